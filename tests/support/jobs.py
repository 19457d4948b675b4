"""Job histories shared by the what-if tests (service, pages, browser) and the UX pages."""

from __future__ import annotations

import datetime as dt
import random

from django.utils import timezone

from scheduler.models import JobState
from tests.factories import JobFactory


def seed_jobs(tree, cluster, n: int = 80, seed: int = 1) -> None:
    """Completed allocated jobs of a1, a2 and b1 over the last two days, beyond capacity."""
    rng = random.Random(seed)
    now = timezone.now()
    users = {"a1": tree.user("ann"), "a2": tree.user("bob"), "b1": tree.user("lead-b")}
    for i in range(n):
        project = rng.choice(["a1", "a2", "b1"])
        at = now - dt.timedelta(seconds=rng.uniform(3600, 2 * 86400))
        JobFactory(
            cluster=cluster, project=tree.node(project), submitter=users[project],
            name=f"j{i}", gpus=rng.choice((1, 2, 4, 8)), min_runtime_s=600,
            resumable=True, kind=rng.choice(("training", "debug")),
            duration_s=int(rng.uniform(1800, 6 * 3600)), state=JobState.SUCCEEDED,
            submitted_at=at, queued_at=at,
        )  # fmt: skip
