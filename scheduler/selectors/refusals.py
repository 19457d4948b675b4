"""The hosts each waiting job is kept off, read from the starts the cycle took back
(`scheduler.core.refusals` is the rule; this module reads its input). The one reading
of them: the live cycle's snapshot, a dry-run submission's and the ETA's all take it
(`cluster_snapshot(refusals=True)`), so a dry run plans what the next cycle will and an
ETA keeps a refused job off those hosts until each avoidance lapses."""

from __future__ import annotations

import datetime as dt

from django.conf import settings

from scheduler.core.refusals import (
    Avoidance,
    Refusal,
    avoid_ends,
    avoid_map,
    avoid_texts,
    avoidances,
    memory_s,
)
from scheduler.models import Attempt, AttemptEnd, JobState

# `Attempt.end_detail` of a STARTING attempt whose start the cycle is taking back (the
# cluster kept it waiting past the start timeout, `scheduler.cycle.attempts`)
START_WITHDRAWN = "start withdrawn: "
# what `scheduler.cycle.refusals.kept_off_note` appends to a withdrawn start's detail
# (cut off again by `why_of`)
KEPT_OFF = "; kept off "


def avoid_s() -> tuple[float, float]:
    """(shortest, longest) time a job is kept off a host that refused it."""
    base = float(getattr(settings, "ALLOT_REFUSAL_AVOID_S", 900.0))
    top = float(getattr(settings, "ALLOT_REFUSAL_AVOID_MAX_S", 14400.0))
    return base, max(base, top)


def why_of(detail: str) -> str:
    """The cluster's reason in a withdrawn start's detail (without Allot's words)."""
    return detail.removeprefix(START_WITHDRAWN).split(KEPT_OFF, 1)[0]


def refusals_of(cluster_id: int, at: dt.datetime, *, job_id: int | None = None) -> list[Refusal]:
    """The starts of waiting jobs the cycle took back within the rule's memory (one
    indexed read: the cluster's attempts ended since then)."""
    _, top = avoid_s()
    rows = Attempt.objects.filter(
        cluster_id=cluster_id,
        ended_at__gte=at - dt.timedelta(seconds=memory_s(top)),
        end_reason=AttemptEnd.START_FAILED,
        end_detail__startswith=START_WITHDRAWN,
    )
    rows = (
        rows.filter(job_id=job_id)
        if job_id is not None
        else rows.filter(job__state=JobState.PENDING)
    )
    return [
        Refusal(str(job), tuple(p["host"] for p in placements), ended.timestamp(), why_of(detail))
        for job, placements, ended, detail in rows.values_list(
            "job_id", "placements", "ended_at", "end_detail"
        )
    ]


def kept_off(cluster_id: int, at: dt.datetime) -> list[Avoidance]:
    """The (job, host) pairs the plan keeps apart at `at`."""
    base, top = avoid_s()
    return avoidances(refusals_of(cluster_id, at), at.timestamp(), base_s=base, max_s=top)


def snapshot_avoidance(
    cluster_id: int, at: dt.datetime
) -> tuple[dict[str, frozenset[str]], dict[str, str], dict[str, dict[str, float]]]:
    """What a plan of the cluster at `at` keeps apart: the hosts each waiting job is kept
    off (`Snapshot.avoid`), the sentence its queue reason gets for it, and when each
    (job, host) pair lapses (epoch s; what the ETA's forward run lifts them at)."""
    kept = kept_off(cluster_id, at)
    return avoid_map(kept), avoid_texts(kept), avoid_ends(kept)
