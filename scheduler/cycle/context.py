"""What the steps of one cycle share: the cluster, the cycle's clock, the adapter, the
record and its counts, and the worker's warm state of the cluster."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.utils import timezone

from scheduler.adapters import ClusterAdapter, ClusterHost, ClusterJob
from scheduler.cycle.warm import ClusterWarm
from scheduler.models import Cluster, CycleRecord

log = logging.getLogger(__name__)


@dataclass
class ClusterReport:
    """The cluster as its adapter reported it at the start of the cycle."""

    hosts: Sequence[ClusterHost]
    jobs: Sequence[ClusterJob]


@dataclass
class Counts:
    reconciled: int = 0
    starts: int = 0
    stops: int = 0
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # (action, rule) of every start and stop, for the operators' metrics
    actions: list[tuple[str, str]] = field(default_factory=list)


class CycleContext:
    """One cycle of one cluster. Its str() is the cycle's id in log lines (its
    record's, once stored: `config.logs.cycle_scope`)."""

    def __init__(
        self,
        cluster: Cluster,
        warm: ClusterWarm,
        *,
        now: dt.datetime | None,
        adapter: ClusterAdapter | None,
        reconcile_only: bool = False,
    ) -> None:
        self.cluster = cluster
        self.warm = warm
        self.reconcile_only = reconcile_only
        self.at = now or timezone.now()
        self.fixed_clock = now is not None
        # when the cluster was read: times it reports are kept at or before it
        self.read_at = self.at
        self.adapter = adapter
        self.own_adapter = adapter is None
        self.counts = Counts()
        self.record: CycleRecord | None = None
        self.phases: dict[str, float] = {}  # milliseconds per phase of the cycle
        # host -> the cluster's own word for its state when it may keep starts waiting
        # there (Slurm: "IDLE+RESERVED"), from this cycle's read
        self.host_states: dict[str, str] = {}

    def __str__(self) -> str:
        return str(self.record.pk) if self.record is not None else ""

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase of the cycle (for the worker's log line and the benchmarks)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + (time.perf_counter() - t) * 1000.0

    def error(self, what: str, exc: BaseException) -> None:
        """Log and record an error of the cycle (the cycle goes on)."""
        text = f"{what}: {exc}" if str(exc) else f"{what}: {type(exc).__name__}"
        log.warning("cluster %s: %s", self.cluster, text)
        self.counts.errors.append(text[:1000])

    def cluster_read(self) -> None:
        """The cluster was (re)read now: the times it reports are kept before it."""
        if not self.fixed_clock:
            self.read_at = timezone.now()

    def clamp(self, when: dt.datetime | None, floor: dt.datetime) -> dt.datetime:
        """A time the cluster reported, kept inside [floor, when it was read] (clocks
        may differ); None (not reported) is the cycle's time."""
        if when is None:
            return max(self.at, floor)
        return min(max(when, floor), max(self.read_at, floor))
