"""A minimum runtime reads the same digits on every surface (docs/concepts.md,
"How pages show them" and protection): a job asked for 235 s once read "3 min" on its
page and the queue page (`span_text` drops the seconds), "protected for 4 min" in its
start reason (`hours_text` rounds to minutes) and "3m55s" in `allot show` and `allot
queue`. One function words it now (`allot_common.figures.runtime_text`)."""

from __future__ import annotations

import html
import re

import pytest
from rest_framework.test import APIClient

from allot_cli import render
from allot_common.figures import runtime_text, span_text
from scheduler.models import JobEvent
from tests.factories import SuperUserFactory
from tests.roles import token_for
from tests.support.cli import Cli


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0"), (15, "15 s"), (235, "3 min 55 s"), (600, "10 min"), (5400, "1 h 30 min"),
     (5407, "1 h 30 min 7 s"), (86400 + 3600, "1 d 1 h")],
)  # fmt: skip
def test_a_runtime_reads_every_unit_it_has(seconds, text):
    assert runtime_text(seconds) == text
    assert render.runtime(seconds) == text  # the CLI writes it with the same function


def test_the_cli_words_a_span_with_the_pages_function():
    for seconds in (40, 235, 3 * 3600 + 640, 86400 + 4 * 3600 + 59):
        assert render.span(seconds) == span_text(seconds)


def _words(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


@pytest.mark.django_db(transaction=True)  # the live server's thread reads the committed rows
def test_a_min_runtime_reads_the_same_on_the_pages_the_reasons_and_the_cli(
    live, live_server, tmp_path
):
    running = live.submit("a2", gpus=8, min_runtime_s=235, duration_s=3600)
    live.cycle()
    live.cycle(advance_s=30)  # the cluster confirms the run; still protected
    waiting = live.submit("a1", gpus=32, min_runtime_s=5407)
    live.cycle()
    root = SuperUserFactory(username="root")
    pages = APIClient()
    pages.force_login(root)
    cli = Cli(live_server.url, tmp_path, token_for(root))
    cli.env["COLUMNS"] = "1000"

    started = JobEvent.objects.get(job=running, to_state="starting")
    assert started.reason.endswith("; protected for 3 min 55 s"), started.reason
    for job, text in ((running, "3 min 55 s"), (waiting, "1 h 30 min 7 s")):
        page = _words(pages.get(f"/jobs/{job.pk}/").content.decode())
        assert f"Min runtime {text} (allocated)" in page
        shown = cli("show", str(job.pk))
        assert shown.returncode == 0, shown.stderr
        assert re.search(rf"^min runtime +{text} \(allocated\) *$", shown.stdout, re.M), (
            shown.stdout
        )
    queue_page = pages.get(f"/clusters/{live.cluster.pk}/queue/").content.decode()
    cell = re.search(r'data-label="Min runtime">(.*?)</td>', queue_page, re.S)
    assert cell is not None and _words(cell[1]) == "1 h 30 min 7 s"
    queued = cli("queue", "--cluster", live.cluster.name)
    assert queued.returncode == 0, queued.stderr
    row = next(line for line in queued.stdout.splitlines() if f" {waiting.pk} " in line)
    assert "1 h 30 min 7 s" in row
