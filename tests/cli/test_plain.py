"""The CLI's tables and lines written without rich (`allot_cli/plain.py`) are rich's
characters exactly, wherever the plain path takes them; everything else goes to rich."""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allot_cli import plain, render

# mostly text the plain path takes (a time's colons too), some that it must leave to rich
TEXT = st.text(alphabet=" abcXYZ019:-_/.…", max_size=30) | st.text(
    alphabet=" abcXYZ019:-_/.…[é\t", max_size=30
)
HEADER = st.text(alphabet="ABCDEFGHIJ_", min_size=1, max_size=9)
# each property compares ours with rich's on many draws (capsys and monkeypatch are
# function-scoped: reset by each test's own reads, not per draw)
AGAINST_RICH = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(autouse=True)
def pipe(monkeypatch):
    """Standard output a pipe (as capsys makes it), nothing forcing a terminal."""
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)


def printed(capsys, write) -> tuple[object, str]:
    capsys.readouterr()
    result = write()
    return result, capsys.readouterr().out


@AGAINST_RICH
@given(
    columns=st.lists(HEADER, min_size=1, max_size=6, unique=True),
    data=st.data(),
    title=st.none() | TEXT,
    width=st.integers(10, 160),
    justify=st.sampled_from(["center", "left"]),
)
def test_a_plain_table_is_what_rich_prints(
    capsys, monkeypatch, columns, data, title, width, justify
):
    monkeypatch.setenv("COLUMNS", str(width))
    n = len(columns)
    cells = data.draw(st.lists(st.lists(TEXT, min_size=n, max_size=n), max_size=5))
    layout = data.draw(
        st.lists(
            st.sampled_from([("", None, None), ("fold", 16, None)])
            | st.builds(lambda w: ("ellipsis", None, w), st.integers(12, 40)),
            min_size=n,
            max_size=n,
        )
    )
    done, ours = printed(capsys, lambda: plain.table(columns, cells, layout, title, None, justify))
    _, theirs = printed(
        capsys, lambda: render._rich_table(columns, cells, layout, title, width, justify)
    )
    assert not done or ours == theirs


@AGAINST_RICH
@given(text=TEXT | st.just("Queue of gpu: 3 pending, as of the cycle at 2026-12-05 14:09:03 CET"))
def test_a_plain_line_is_what_rich_prints(capsys, monkeypatch, text):
    monkeypatch.setenv("COLUMNS", "40")
    done, ours = printed(capsys, lambda: plain.line(text))
    _, theirs = printed(capsys, lambda: render.out().print(text))
    assert not done or ours == theirs


@AGAINST_RICH
@given(text=TEXT | st.just("error: --state: state must be one of pending, running, all"))
def test_a_plain_error_line_is_what_rich_prints_on_standard_error(capsys, monkeypatch, text):
    monkeypatch.setenv("COLUMNS", "40")
    capsys.readouterr()
    done = plain.line(text, sys.stderr)
    ours = capsys.readouterr()
    render.err().print(text, markup=False)
    theirs = capsys.readouterr()
    assert ours.out == theirs.out == ""
    assert not done or ours.err == theirs.err


def test_the_cli_s_own_output_takes_the_plain_path(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    line = "Queue of gpu: 3 pending, as of the cycle at 2026-12-05 14:09:03 CET (cycle 7)"
    assert printed(capsys, lambda: plain.line(line)) == (True, line + "\n")
    columns = ["POS", "JOBID", "PROJECT", "REASON"]
    cells = [["1", "100", "…/prog-a/a1", "waits for 8 free GPUs on one host"]]
    layout = [("", None, None), ("", None, None), ("ellipsis", None, 12), ("ellipsis", None, 20)]
    done, out = printed(capsys, lambda: plain.table(columns, cells, layout, None))
    assert done and out == "POS  JOBID  PROJECT      REASON\n" + (  # no trailing blanks
        "1    100    …/prog-a/a1  waits for 8 free GP…\n"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[bold]x[/bold]", "markup"),
        ("a :smile: b", "an emoji code"),
        ("café", "not ASCII"),
        ("x" * 41, "longer than the width"),
        (" indented", "leading space"),
    ],
)
def test_what_rich_would_change_goes_to_rich(monkeypatch, text, why):
    monkeypatch.setenv("COLUMNS", "40")
    assert not plain.line(text), why


def test_a_terminal_or_forced_colour_goes_to_rich(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert plain.styled() and not plain.line("fine")
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    assert not plain.styled()


@pytest.mark.parametrize("columns", [None, "0", "37", "250", "wide"])
def test_the_width_is_rich_s(monkeypatch, columns):
    from rich.console import Console

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.delenv("LINES", raising=False)
    assert plain.width() == Console().width
