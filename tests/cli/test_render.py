"""The CLI's wording of times (allot_cli/render.py): what a researcher reads in a column."""

import datetime as dt
import re
import time

import pytest

from allot_cli import render
from allot_cli.jobs import _attempts_table, _eta_text, _events_table
from allot_cli.queue import print_pending, waited
from scheduler.api.serializers.jobs import AttemptOutput
from scheduler.models import Attempt, AttemptEnd

NOW = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)


def _iso(seconds_before_now: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_before_now)).isoformat()


def test_a_wait_reads_as_a_span_even_under_a_minute():
    assert render.since(_iso(10), NOW) == "10 s"
    assert render.since(_iso(3 * 3600 + 600), NOW) == "3 h 10 min"
    # a queue time a little ahead of this machine's clock is no wait yet, not a negative one
    assert render.since(_iso(-5), NOW) == "0 s"


def test_the_waited_column_never_says_now():
    queued = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)).isoformat()
    assert waited(queued) in {"5 s", "6 s", "7 s"}
    assert waited(None) == "–"


def test_show_words_an_overtaken_estimate_as_the_job_page_does():
    eta = {
        "start": _iso(180),
        "earliest": _iso(400),
        "latest": _iso(-3600),
        "method": "forward-simulation",
        "overdue": True,
    }
    assert _eta_text(eta).startswith("due now (it was expected by ")
    assert "likely between" not in _eta_text(eta)
    eta["overdue"] = False
    assert "likely between" in _eta_text(eta)


def _pending_page(n: int) -> dict:
    row = {
        "submitter": "researcher",
        "project_path": "allot-demo/language-models/pretraining",
        "gpus": 16,
        "min_runtime_s": 240,
        "queued_at": _iso(60),
        "name": "training-1210",
        "kind": "training",
        "priority": 0,
        "fairshare_factor": 0.9,
        "reason": "waiting: project allot-demo/language-models/pretraining is at 82% of its "
        "entitled share over 7 days (fair-share rank 2 of 9); 1 project ranks above it",
    }
    results = [{**row, "position": i + 1, "job": 1210 + i} for i in range(n)]
    return {"count": n, "computed_at": _iso(5), "cycle": 7, "results": results}


ANSI = re.compile(r"\x1b\[[0-9;]*m")
LONG_REASON = (
    "waiting: project allot-demo/language-models/pretraining is at 82% of its entitled "
    "share over 7 days (fair-share rank 2 of 9); 1 project ranks above it; no free GPUs; "
    "h1, h2 held for jobs with a min runtime of at most 10 min (short-job reserve)"
)


def _terminal(monkeypatch, columns: str | None) -> None:
    """Standard output a terminal of `columns` (rich's judgement: TTY_COMPATIBLE), or a
    pipe (None: as capsys makes it)."""
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    if columns is not None:
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
        monkeypatch.setenv("COLUMNS", columns)


def _printed(capsys) -> list[str]:
    return ANSI.sub("", capsys.readouterr().out).splitlines()


def _short_project_page(reason: str) -> dict:
    page = _pending_page(2)
    for row in page["results"]:
        row["project_path"], row["reason"] = "org/prog-a/a1", reason
    return page


def test_queue_on_a_wide_terminal_shows_the_reason_in_its_width(capsys, monkeypatch):
    """On a 320-column terminal the reason was cut at about 125 characters (the room left
    was halved between PROJECT and REASON, whatever the path's length): the reason now
    takes what the other columns leave."""
    _terminal(monkeypatch, "320")
    print_pending("demo-h100", _short_project_page(LONG_REASON), me=False, long=False)
    lines = _printed(capsys)
    rows = [line for line in lines if "researcher" in line]
    assert len(rows) == 2 and all(line.rstrip().endswith("(short-job reserve)") for line in rows)
    assert all(len(line) <= 320 for line in lines) and "…" not in "".join(lines)


@pytest.mark.parametrize("columns", ["80", "120"])
def test_queue_on_a_narrow_terminal_cuts_the_reason_after_a_word(capsys, monkeypatch, columns):
    """Where the terminal is too narrow, one line per job still, the reason cut after a
    whole word and marked with an ellipsis, never inside a word."""
    _terminal(monkeypatch, columns)
    print_pending("demo-h100", _short_project_page(LONG_REASON), me=False, long=False)
    lines = _printed(capsys)
    rows = [line for line in lines if "researcher" in line]
    assert len(rows) == 2 and all(len(line) <= int(columns) for line in lines)
    for row in rows:
        shown = row[row.index("waiting:") :].rstrip()
        assert shown.endswith("…") and LONG_REASON.startswith(shown[:-1])
        assert LONG_REASON[len(shown) - 1] in " ;,", shown  # the word it ends with is whole


@pytest.mark.parametrize("long", [False, True])
def test_queue_into_a_pipe_prints_every_reason_whole(capsys, monkeypatch, long):
    """Into a pipe (a script, `| grep`) the reasons were cut at 80 columns: every value is
    whole there, one line per job, however long, with `--long` or without."""
    _terminal(monkeypatch, None)
    monkeypatch.setenv("COLUMNS", "80")
    print_pending("demo-h100", _pending_page(2), me=False, long=long)
    print_pending("demo-h100", _short_project_page(LONG_REASON), me=False, long=long)
    rows = [line for line in _printed(capsys) if "researcher" in line]
    assert len(rows) == 4 and "…" not in "".join(rows)
    assert all("allot-demo/language-models/pretraining" in row for row in rows[:2])
    assert all(row.rstrip().endswith("1 project ranks above it") for row in rows[:2])
    assert all(row.rstrip().endswith("(short-job reserve)") for row in rows[2:])


def test_a_reason_is_clipped_after_a_whole_word():
    assert render.clip("waiting: project a1 is at 82%", 100) == "waiting: project a1 is at 82%"
    assert render.clip("waiting: project a1 is at 82%", 19) == "waiting: project…"
    assert render.clip("waiting: project a1; 1 project", 21) == "waiting: project a1…"
    assert render.clip("waiting: project a1 is", 20) == "waiting: project a1…"
    assert render.clip("allot-demo/language-models", 12) == "allot-demo/…"


@pytest.mark.parametrize("columns", ["80", "250"])
def test_queue_long_keeps_every_job_id_and_reason_whole(capsys, monkeypatch, columns):
    """`allot queue -l` on an 80-column terminal cut the POS and JOBID columns to "…"
    (twelve whole columns cannot fit): there each job is a block of whole values; on a
    wide terminal it stays a table, one job per row."""
    _terminal(monkeypatch, columns)
    print_pending("demo-h100", _pending_page(2), me=False, long=True)
    lines = _printed(capsys)
    text = " ".join(" ".join(lines).split())
    assert all(len(line) <= int(columns) for line in lines)
    assert "…" not in text and "1210" in text and "1211" in text
    assert "(fair-share rank 2 of 9); 1 project ranks above it" in text
    if columns == "80":
        assert [line.split()[1] for line in lines if line.startswith("jobid")] == ["1210", "1211"]
    else:
        rows = [line.split()[:2] for line in lines if line[:1].isdigit()]
        assert rows == [["1", "1210"], ["2", "1211"]]


def test_reasons_and_blockers_show_their_utc_times_in_the_local_zone(monkeypatch):
    """A queue reason or blocker carries UTC times ('... at 2026-12-05 10:04 UTC',
    '... ends at 23:59:30 UTC'); the CLI shows them local, as its other times."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        now = dt.datetime(2026, 12, 6, 0, 5, tzinfo=dt.UTC)
        text = "a1's weight changed 70 -> 30 at 2026-12-05 10:04 UTC by lead-a"
        assert render.local_times(text, now) == (
            "a1's weight changed 70 -> 30 at 2026-12-05 11:04 CET by lead-a"
        )
        # no date: the day nearest now (yesterday's 23:59:30 UTC, today's 00:59:30 CET)
        grace = "stop grace period ends at 23:59:30 UTC); their GPUs"
        assert (
            render.local_times(grace, now) == "stop grace period ends at 00:59:30 CET); their GPUs"
        )
        assert render.local_times("no time here", now) == "no time here"
        assert render.local_times("DAY (UTC)", now) == "DAY (UTC)"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_a_table_and_a_panel_show_reasons_in_local_time(monkeypatch, capsys):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    monkeypatch.setenv("COLUMNS", "200")
    time.tzset()
    try:
        reason = "waiting: a1's weight changed 70 -> 30 at 2026-12-05 10:04 UTC by lead-a"
        render.table(["#", "WHY"], [[1, reason]], wrap=("WHY",))
        render.pairs([("reason", reason)])
        out = capsys.readouterr().out
        assert "11:04 CET" in out and "UTC" not in out
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_an_attempts_end_reads_in_the_job_pages_words(capsys, monkeypatch):
    """`allot show`'s END column says what the job page's End column says ("Moved to
    other hosts"), from the API's `end_label`, not the code (`migrated`)."""
    label = AttemptOutput().get_end_label
    assert label(Attempt(end_reason=AttemptEnd.MIGRATED)) == "Moved to other hosts"
    assert label(Attempt(end_reason=AttemptEnd.PREEMPTED)) == "Preempted"
    assert label(Attempt(stop_intent=AttemptEnd.MIGRATED)) == "Moved to other hosts"
    assert label(Attempt()) == ""
    monkeypatch.setenv("COLUMNS", "200")
    row = {
        "number": 1,
        "attempt_id": "a-1",
        "state": "ended",
        "placements": [{"host": "h0", "gpu_indices": [0, 1]}],
        "started_at": _iso(600),
        "ended_at": _iso(60),
        "end_reason": "migrated",
        "stop_intent": "migrated",
        "end_label": "Moved to other hosts",
    }
    _attempts_table([row])
    out = capsys.readouterr().out
    assert "Moved to other hosts" in out and "migrated" not in out
    assert "h0[0-1]" in out  # the hosts as every reason writes them


def test_an_open_attempts_end_and_a_first_events_from_read_the_pages_dash(capsys, monkeypatch):
    """`allot show` left a running attempt's END blank and wrote a submission's FROM as
    "-", where the job page (and every other CLI column) writes "–"."""
    monkeypatch.setenv("COLUMNS", "200")
    row = {
        "number": 1,
        "attempt_id": "a-1",
        "state": "running",
        "placements": [{"host": "h0", "gpu_indices": [0, 1]}],
        "started_at": _iso(600),
        "ended_at": None,
        "end_reason": "",
        "stop_intent": "",
        "end_label": "",
    }
    _attempts_table([row])
    attempt = _printed(capsys)[-1].split()
    assert attempt[-2:] == ["–", "–"], attempt  # ENDED, END
    _events_table(
        [
            {
                "at": _iso(900),
                "from_state": "",
                "to_state": "pending",
                "actor": "",
                "reason": "submitted",
            }
        ]
    )
    event = _printed(capsys)[-1].split()
    assert event[3:6] == ["–", "pending", "allot"], event


def test_a_day_the_period_starts_or_ends_inside_reads_partial():
    """`allot usage`'s first and last days of "the last 7 days of complete hours" are
    marked "(partial)", as the charts label such a step, so 6 hours are no drop."""
    start, end = "2026-11-30T06:00:00Z", "2026-12-07T06:00:00Z"
    assert render.day_step("2026-11-30T00:00:00Z", start, end) == "2026-11-30 (partial)"
    assert render.day_step("2026-12-01T00:00:00Z", start, end) == "2026-12-01"
    assert render.day_step("2026-12-06T00:00:00Z", start, end) == "2026-12-06"
    assert render.day_step("2026-12-07T00:00:00Z", start, end) == "2026-12-07 (partial)"
    whole = "2026-12-01T00:00:00Z", "2026-12-03T00:00:00Z"
    assert render.day_step("2026-12-02T00:00:00Z", *whole) == "2026-12-02"


@pytest.mark.parametrize("styled", ["0", "1"])
def test_a_table_too_wide_for_the_terminal_cuts_no_figure(capsys, monkeypatch, styled):
    """The demo's `allot usage` at 80 columns: its whole columns alone leave the path less
    than its least width, so the lines run past the terminal instead of cutting a number
    ("4104…") or a header."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TTY_COMPATIBLE", styled)  # the plain path and rich's
    columns = ["DAY (UTC)", "PROJECT", "DELIVERED", "UNALLOC", "DEMAND", "CAPPED ENT", "GPU UTIL"]
    row = ["2026-11-30 (partial)", "allot-demo/language-models/pretraining", "999.5", "0.0"]
    render.table(columns, [[*row, "41040.5", "652.8", "84.8%"]], crop_left=("PROJECT",))
    text = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # rich's bold header
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert lines[0].split() == [
        "DAY",
        "(UTC)",
        "PROJECT",
        "DELIVERED",
        "UNALLOC",
        "DEMAND",
        "CAPPED",
        "ENT",
        "GPU",
        "UTIL",
    ]
    cells = lines[1].split()
    assert cells[:2] == ["2026-11-30", "(partial)"] and cells[3:] == [
        "999.5", "0.0", "41040.5", "652.8", "84.8%"
    ]  # fmt: skip
    if styled == "1":
        # the path's end, cut at a "/" (`path_tail`): the project's own name whole
        assert cells[2] in ("pretraining", "…/pretraining"), cells[2]
    else:  # into a pipe: whole, for a script's grep
        assert cells[2] == "allot-demo/language-models/pretraining"


def test_every_table_into_a_pipe_keeps_its_values_whole(capsys, monkeypatch):
    """`allot usage | grep language-models/pretraining` found nothing: the path was cut
    to "…pretraining" at 80 columns into a pipe, as on a terminal. Every table (not only
    the queue's) now writes whole values where no terminal reads it."""
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    long_path = "allot-demo/language-models/post-training"
    render.table(
        ["PROJECT", "REASON"], [[long_path, "x " * 60]], crop=("REASON",), crop_left=("PROJECT",)
    )
    line = capsys.readouterr().out.splitlines()[-1]
    assert long_path in line and line.rstrip().endswith("x x") and "…" not in line


def test_a_table_into_a_pipe_ends_its_lines_without_blanks(capsys, monkeypatch):
    """`allot queue | less`: the last column was padded to its longest reason, hundreds of
    blanks on every shorter line; a reason rich must print (a `[`) goes through rich."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    for reason in ("waits", "waits [for the reserve]"):
        rows = [["1", reason], ["2", "waits for 8 free GPUs on one host, behind job 100"]]
        render.table(["POS", "REASON"], rows, wrap=("REASON",))
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].split(maxsplit=1) == ["1", reason]
        assert all(line == line.rstrip() for line in lines), lines


def test_a_job_name_in_brackets_is_shown_not_read_as_markup(capsys, monkeypatch):
    """rich read "exp[lr=3e-4]" in a cell as a style tag and dropped it."""
    monkeypatch.setenv("COLUMNS", "80")
    render.pairs([("job", "1339 exp[lr=3e-4]")])
    render.table(["JOBID", "NAME"], [["1339", "exp[lr=3e-4]"]])
    text = capsys.readouterr().out
    assert text.count("exp[lr=3e-4]") == 2, text
    assert all(line == line.rstrip() for line in text.splitlines()), text  # into a pipe


@pytest.mark.parametrize("columns", [None, "80"])
def test_show_keeps_each_event_on_one_line_into_a_pipe_and_fits_a_terminal(
    capsys, monkeypatch, columns
):
    """`allot show | less` folded the events' reasons at 80 columns, cutting a project's
    path in the middle ("…/pre" / "training"): into a pipe each event is one line with its
    reason whole, as `allot queue` prints it; on an 80-column terminal every line fits,
    the reason folded between its words (a word longer than the column is folded too)."""
    _terminal(monkeypatch, columns)
    monkeypatch.setenv("COLUMNS", columns or "80")
    path = "acme-research/foundation-models/pretraining"
    reason = f"preempted: {path} is at 112% of its 7-day entitlement and a1 waits"
    event = {"at": _iso(60), "from_state": "running", "to_state": "preempted", "actor": None}
    _events_table([{**event, "reason": reason}])
    lines = _printed(capsys)
    if columns is None:
        assert [line for line in lines if "preempted:" in line][0].endswith(reason)
    else:
        assert all(len(line) <= 80 for line in lines) and len(lines) > 3
        assert sum("entitlement" in line for line in lines) == 1


@pytest.mark.parametrize("mark", ["", " [x]"])  # the plain path, and rich's for "[x]"
def test_show_into_a_pipe_starts_a_table_s_title_at_its_line_s_start(capsys, monkeypatch, mark):
    """`allot show 42 | less`: the events table, its reasons whole, is hundreds of
    columns wide, and its title "events" was centred over it, ~230 blanks in. A table
    whose values are printed whole begins its title at the line's start; on a terminal
    it stays centred over the table."""
    reason = "preempted: acme-research/foundation-models/pretraining waits " * 4 + mark
    event = {"at": _iso(60), "from_state": "running", "to_state": "preempted", "actor": None}
    _terminal(monkeypatch, None)
    monkeypatch.setenv("COLUMNS", "80")
    _events_table([{**event, "reason": reason}])
    lines = _printed(capsys)
    assert lines[0] == "events" and len(lines[2]) > 230, lines[:1]
    _terminal(monkeypatch, "80")
    _events_table([{**event, "reason": reason}])
    title = _printed(capsys)[0]
    assert title.strip() == "events" and title.startswith(" " * 30), title


def test_an_indented_tree_name_is_cut_after_its_first_letters_not_to_nothing():
    """`allot shares` on 80 columns printed "…" alone for "  language-models" and
    "    post-training": the tree's indentation was taken for a word break."""
    assert render.clip("  language-models", 16) == "  language-mode…"
    assert render.clip("    post-training", 16) == "    post-traini…"
    assert render.clip("  science and art", 16) == "  science and…"  # a real word break


def test_a_panel_into_a_pipe_keeps_a_short_keys_long_value_on_one_line(capsys, monkeypatch):
    """`allot show 1349 | cat` folded the reason after 200 characters: the pipe's width
    was its own key's ("reason") plus its value, while the keys' column is as wide as
    the longest key ("reservation-only estimate")."""
    reason = "waiting: project allot-demo/science/biology is at 65% " + "of its share " * 14
    _terminal(monkeypatch, None)
    monkeypatch.setenv("COLUMNS", "80")
    render.pairs([("reservation-only estimate", "soon"), ("reason", reason)])
    lines = _printed(capsys)
    assert len(lines) == 2 and lines[1].split(None, 1) == ["reason", reason.strip()]


def test_a_line_and_a_panel_into_a_pipe_keep_each_value_on_one_line(capsys, monkeypatch):
    """`allot submit | cat` folded "Submitted job 1345 to … 2 / GPUs" and `allot show | cat`
    a job's state over four lines at 80 columns: into a pipe a line and each panel value
    are whole on one line; on an 80-column terminal both still fit."""
    state = "starting (started on h012[0-1] using free GPUs; " + "project a/b/c " * 8 + ")"
    said = "Submitted job 1345 to allot-demo/language-models/pretraining on demo-h100: 2 GPUs"
    _terminal(monkeypatch, None)
    monkeypatch.setenv("COLUMNS", "80")
    render.line(f"[bold]{said}[/bold]")  # markup: rich prints it
    render.pairs([("job", "1345 tour"), ("state", state)])
    lines = _printed(capsys)
    assert lines[0] == said and lines[2].split(None, 1) == ["state", state.strip()]
    _terminal(monkeypatch, "80")
    render.line(f"[bold]{said}[/bold]")
    render.pairs([("state", state)])
    lines = _printed(capsys)
    assert len(lines) > 3 and all(len(line) <= 80 for line in lines)


def test_an_error_into_a_log_is_one_line(capsys, monkeypatch):
    """`allot submit -G 3 2>> log` folded the error at 80 columns: into a pipe or a file
    the message is one line (a script greps it), as standard output's lines are."""
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    message = "error: -G (gpus): gpus is 3; a job on one host asks for 1, 2, 4, 8, ... " * 2
    render.error(message.strip())
    assert capsys.readouterr().err.splitlines() == [message.strip()]
