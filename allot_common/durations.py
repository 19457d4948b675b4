"""Durations people type ("8h", "15m", "1h30m", "90s", "3600"), parsed by pytimeparse.

Plain Python (no Django, no server code, no CLI code): the `allot` CLI's options
(allot_cli/options.py) and the management commands' options
(scheduler/management/options.py) both parse durations with it, so the server does not
depend on the client package nor the client on the server.
"""

from __future__ import annotations


def parse_duration(text: str | int | float) -> int:
    """Whole seconds of a duration: a number of seconds or an expression such as
    "8h", "15m", "1h30m", "2d". Raises ValueError naming what is accepted."""
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        cleaned = text.strip()
        try:
            seconds = float(cleaned)
        except ValueError:
            # imported here: its import (~6 ms of CPU, many regular expressions) is paid
            # only by a duration that is not a number (`allot --help` pays nothing)
            from pytimeparse.timeparse import timeparse

            parsed = timeparse(cleaned) if cleaned else None
            if parsed is None:
                raise ValueError(
                    f"not a duration: {text!r} (use seconds or e.g. 90s, 15m, 8h, 1h30m, 2d)"
                ) from None
            seconds = float(parsed)
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"a duration must be >= 0, got {text!r}")
    return round(seconds)
