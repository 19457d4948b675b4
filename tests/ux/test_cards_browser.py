"""The queue page's cards on a phone (Debian's chromium): a value made of text and
elements reads as one paragraph. A waiting job's reason that tells a budget change
carries a `<time>`; as flex items the pieces of the "Why it waits" cell stood in
columns, the text of one over the other (seen on the demo after a manager's change)."""

from __future__ import annotations

from budgets import services
from tests.browser import BROWSER_MARKS, sign_in

pytestmark = BROWSER_MARKS

# Every pair of boxes of a cell's content (each text node's line boxes, each element's
# boxes) that cover the same pixels: none when the value flows as one paragraph.
OVERLAPS = """
(cell) => {
  const boxes = [];
  cell.childNodes.forEach(function (node) {
    const range = document.createRange();
    range.selectNodeContents(node);
    Array.from(node.nodeType === 3 ? range.getClientRects() : node.getClientRects())
      .filter(function (r) { return r.width > 0 && r.height > 0; })
      .forEach(function (r) { boxes.push(r); });
  });
  const hits = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) { hits.push([a.left, a.top, b.left, b.top]); }
    }
  }
  return hits;
}
"""

# Each piece of the value starts no higher than the last line of the piece before it
# (one paragraph); as columns, the <time> stood at the top beside a several-line text.
IN_READING_ORDER = """
(cell) => {
  const out = [];
  let lastTop = -Infinity;
  cell.childNodes.forEach(function (node) {
    const range = document.createRange();
    range.selectNodeContents(node);
    const rects = Array.from(node.nodeType === 3 ? range.getClientRects() : node.getClientRects())
      .filter(function (r) { return r.width > 0 && r.height > 0; });
    if (!rects.length) { return; }
    if (rects[0].top < lastTop - 1) { out.push([node.textContent.slice(0, 40), rects[0].top, lastTop]); }
    lastTop = rects[rects.length - 1].top;
  });
  return out;
}
"""


def test_a_reason_with_a_time_reads_as_one_paragraph_on_a_phone(live, live_server, page):
    for _ in range(4):
        live.submit("a2", gpus=8, min_runtime_s=3600)
    live.cycle()
    waiting = live.submit("a1", gpus=8, min_runtime_s=3600)
    live.cycle(advance_s=60)
    services.budget_change_create(
        actor=live.tree.user("lead-a"),
        reason="a2 needs more",
        changes=[{"node": live.tree.node("a1").pk, "weight": 30}],
    )
    live.cycle(advance_s=60)
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/clusters/{live.cluster.pk}/queue/")
    row = page.locator("tr", has=page.locator(f'a[href="/jobs/{waiting.pk}/"]')).first
    cell = row.locator('td[data-label="Why it waits"]')
    assert "weight changed 70 -> 30" in cell.inner_text()
    assert cell.locator("time").count() == 1  # the change's time, in the reader's zone
    assert cell.evaluate(OVERLAPS) == []
    assert cell.evaluate(IN_READING_ORDER) == []
    label_right = cell.evaluate(
        "c => { const s = getComputedStyle(c, '::before'); return parseFloat(s.width); }"
    )
    assert label_right > 0  # the label is still drawn beside the value
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_planners_figures_read_as_cards_on_a_phone(live_server, page):
    """At 390 px the planner's figures table was 482 px wide in a 370 px card: "Unmet
    real-time" and "Planning time (ms)" stood out of view. Each mode is a card now."""
    from tests.browser import CUT_CELLS, DRAWN
    from tests.roles import participant

    viewer = participant("viewer")
    viewer.set_password("pw")
    viewer.save()
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, live_server.url, "viewer")
    page.goto(f"{live_server.url}/planner/mixed-control/")
    page.wait_for_function(DRAWN, timeout=30000, polling=100)
    assert page.locator("table.metrics td").count() == 3 * 7
    assert page.evaluate(CUT_CELLS, "table.metrics") == []
