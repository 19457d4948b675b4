"""The durations people type, parsed in one place (`allot_common.durations`) that the CLI
and the management commands both import; neither side imports the other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from allot_cli import options as cli_options
from allot_common.durations import parse_duration
from scheduler.management import options as command_options
from scheduler.services.demo import REAL_MAX_MIN_RUNTIME_S, demo_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3600", 3600),
        ("90s", 90),
        ("15m", 900),
        ("8h", 28800),
        ("1h30m", 5400),
        ("2d", 172800),
        (" 2.6 ", 3),
        (0, 0),
        (1.4, 1),
    ],
)
def test_durations_read_as_whole_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("soon", "not a duration: 'soon' (use seconds or e.g. 90s, 15m, 8h, 1h30m, 2d)"),
        ("", "not a duration: '' (use seconds or e.g. 90s, 15m, 8h, 1h30m, 2d)"),
        (True, "not a duration: True"),
        ("-5", "a duration must be >= 0, got '-5'"),
        ("nan", "a duration must be >= 0, got 'nan'"),
    ],
)
def test_a_bad_duration_says_what_is_accepted(text, says):
    with pytest.raises(ValueError) as refused:
        parse_duration(text)
    assert str(refused.value) == says


def test_the_cli_and_the_commands_share_the_one_parser():
    assert cli_options.parse_duration is parse_duration
    assert command_options.parse_duration is parse_duration


def test_the_readme_submits_what_the_demo_accepts():
    """The README's CLI example is tried on the demo (right after `allot login -u
    researcher`): its minimum runtime is within the demo cluster's cap, which the demo
    compresses 60x (a `2h` there was refused)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    runtimes = re.findall(r"^allot submit -A allot-demo/.*?--min-runtime (\S+)", readme, re.M)
    assert runtimes, "the README's allot submit example was not found"
    cap = demo_seconds(REAL_MAX_MIN_RUNTIME_S)
    assert all(parse_duration(r) <= cap for r in runtimes), (runtimes, cap)
