"""My jobs on a desktop (Debian's chromium): the jobs table fits the page's card at
1440 px, its last column ("Submitted") whole. Each of its Name and Project columns kept
8em at least, and the table scrolled inside itself by ~20 px on the demo, cutting
"Submitted" to "Submitte"."""

from __future__ import annotations

from tests.browser import BROWSER_MARKS, sign_in

pytestmark = BROWSER_MARKS

FITS = "t => t.scrollWidth <= t.clientWidth"
PROJECT = "td[data-label=Project]"
# Whether every cell matching the selector holds its first text's longest word on one line.
WORDS_WHOLE = """(t, selector) => [...t.querySelectorAll(selector)].every(td => {
  const word = td.firstChild.textContent.trim().split(/\\s+/).sort((a, b) => b.length - a.length)[0];
  const probe = document.createElement('span');
  probe.style.whiteSpace = 'nowrap';
  probe.textContent = word;
  td.appendChild(probe);
  const wide = probe.getBoundingClientRect().width;
  probe.remove();
  const style = getComputedStyle(td);
  return wide <= td.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) + 0.5;
})"""


def test_the_my_jobs_table_fits_a_desktop_without_scrolling_inside_itself(live, live_server, page):
    # what the demo's researcher sees: a job that succeeded, a running unallocated job
    # ("never (unallocated)"), running allocated jobs, a queue of ten ("10 of 10")
    live.submit("a1", gpus=1, min_runtime_s=60, duration_s=60, kind="debug", name="debug-1299")
    live.cycle()
    live.cycle(advance_s=120)
    live.submit("a1", gpus=8, min_runtime_s=0, kind="interactive", name="interactive-1318")
    for n in range(3):
        live.submit("a1", gpus=8, min_runtime_s=3600, name=f"training-{1300 + n}")
    live.cycle(advance_s=60)
    for n in range(10):
        live.submit("a1", gpus=16, min_runtime_s=3600, resumable=True, name=f"training-{1310 + n}")
    live.cycle(advance_s=60)
    # a project name as long as the demo's ("pretraining"), which folded "pretraini / ng"
    live.tree.node("a1").__class__.objects.filter(pk=live.tree.node("a1").pk).update(
        name="pretraining"
    )
    live.user.set_password("pw")
    live.user.save()
    page.set_viewport_size({"width": 1440, "height": 900})
    sign_in(page, live_server.url, live.user.username)
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto(f"{live_server.url}/me/")
    table = page.locator("table.jobs")
    text = table.inner_text()
    assert "Succeeded" in text and "never (unallocated)" in text and "10 of 10" in text
    assert table.evaluate(FITS), table.evaluate("t => [t.scrollWidth, t.clientWidth]")
    # the narrowest the columns may be (each cell's longest word or its minimum width)
    # fits too, whatever the reasons' lengths
    width = table.evaluate("t => t.clientWidth")
    narrowest = table.evaluate(
        "t => { t.style.display = 'table'; t.style.width = 'min-content'; "
        "t.style.maxWidth = 'none'; return t.getBoundingClientRect().width; }"
    )
    assert narrowest <= width, (narrowest, width)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # a project's name is never broken inside a word
    assert table.locator(PROJECT).count() == 15  # every job
    assert table.evaluate(WORDS_WHOLE, PROJECT), table.locator(PROJECT).first.inner_text()
