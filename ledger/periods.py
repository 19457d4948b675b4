"""The windows of the reporting figures (docs/concepts.md, "Windows").

Every reporting figure (delivered and entitled GPU-hours, the delivery ratio, occupancy
and its parts, the efficiency figures) is read over whole UTC hours that are over: a
period ends at `report_end`, the end of the last complete hour, unless the request asks
for an earlier end. The hour now going on is never shown as if it were complete. The
dashboards, `/me/`, the API (`usage/`, `occupancy/`), `allot usage`, the metric
`allot_entitlement_ratio` and the what-if preview all take their end from here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone

from config.clock import read_time
from config.errors import ValidationFailed
from scheduler.models import Cluster

DAYS_CHOICES = (7, 30, 90)
DEFAULT_DAYS = 7
STEPS = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1)}
MAX_PERIOD = dt.timedelta(days=366)


@dataclass(frozen=True)
class Span:
    """The time range [since, until) read in steps of `step` (hour or day, UTC)."""

    since: dt.datetime
    until: dt.datetime
    step: str

    @property
    def days(self) -> int:
        return round((self.until - self.since) / dt.timedelta(days=1))


@dataclass(frozen=True)
class Period(Span):
    """A span of one cluster."""

    cluster: Cluster


def floor_hour(at: dt.datetime) -> dt.datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def report_end(now: dt.datetime | None = None) -> dt.datetime:
    """The end of every reporting window: the end of the last complete UTC hour before
    `now` (the start of the hour now going on), the one function every surface asks."""
    return floor_hour((now or timezone.now()).astimezone(dt.UTC))


def parse_time(value: str | dt.datetime, field: str) -> dt.datetime:
    """An aware time in UTC from an ISO 8601 text or a datetime, as every input reads one
    (`config.clock.read_time`); anything else raises ValidationFailed naming `field`."""
    try:
        return read_time(value)
    except ValueError as exc:
        raise ValidationFailed(f"{field}: {exc}", field=field) from None


def resolve_span(
    *,
    days: str | int | None = None,
    since: str | dt.datetime | None = None,
    until: str | dt.datetime | None = None,
    step: str | None = None,
    now: dt.datetime | None = None,
) -> Span:
    """The span a request asks for: `until` rounded down to a whole hour, at most (and by
    default) `report_end(now)`; `since` (default: `days` before `until`, `days` one of
    7/30/90, default 7), step hour (default) or day; since < until and at most
    MAX_PERIOD apart."""
    step = step or "hour"
    if step not in STEPS:
        raise ValidationFailed("step must be hour or day.", field="step")
    end = report_end(now)
    if until:
        end = min(floor_hour(parse_time(until, "until").astimezone(dt.UTC)), end)
    if since:
        start = parse_time(since, "since")
    else:
        try:
            n_days = int(days or DEFAULT_DAYS)
        except (TypeError, ValueError):
            n_days = -1
        if n_days not in DAYS_CHOICES:
            raise ValidationFailed("days must be 7, 30 or 90.", field="days")
        start = end - dt.timedelta(days=n_days)
    if start >= end:
        raise ValidationFailed(
            "since must be before until (a period ends at the last complete hour at the latest).",
            field="since",
        )
    if end - start > MAX_PERIOD:
        raise ValidationFailed(
            f"A period is at most {MAX_PERIOD.days} days; ask for a later since.", field="since"
        )
    return Span(since=start, until=end, step=step)


def step_key(at: dt.datetime, span: Span) -> dt.datetime:
    """The start of the step (UTC) that `at` falls in."""
    if span.step == "day":
        return at.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return floor_hour(at.astimezone(dt.UTC))


def step_starts(span: Span) -> list[dt.datetime]:
    """Every step of the span, so a chart has a point for hours without rows."""
    out, at = [], step_key(span.since, span)
    while at < span.until:
        out.append(at)
        at += STEPS[span.step]
    return out
