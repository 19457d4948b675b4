"""`SlurmAdapter`: Allot's `ClusterAdapter` verbs over a `SlurmClient` (see the package
docstring for the mapping)."""

from __future__ import annotations

import time
from typing import Any

from scheduler.adapters.base import (
    AdapterError,
    ClusterHost,
    ClusterJob,
    ClusterJobState,
    HostHealthState,
    StartRequest,
)
from scheduler.adapters.slurm.client import SlurmClient, SubmitOptions
from scheduler.adapters.slurm.parsing import (
    ACTIVE_SLURM_STATES,
    ATTEMPT_ID_RE,
    SlurmTimeout,
    attempt_comment,
    cluster_job_of,
    host_of,
    parse_attempt_comment,
)
from scheduler.adapters.slurm.script import job_script


class SlurmAdapter:
    """`ClusterAdapter` over a `SlurmClient` (see the module docstring).

    Options: `partition` (sbatch's and the hosts' partition; default: Slurm's default
    partition for jobs and every node for hosts), `workdir` (the jobs' working
    directory, default /tmp), `output` (sbatch's --output, relative to workdir),
    `use_accounts` (pass the project's last path component as --account; default on).
    """

    def __init__(
        self,
        client: SlurmClient,
        *,
        partition: str = "",
        workdir: str = "/tmp",
        output: str = "allot-%j.out",
        use_accounts: bool = True,
        index_max_age_s: float = 30.0,
    ) -> None:
        self.client = client
        self.partition = partition
        self.workdir = workdir
        self.output = output
        self.use_accounts = use_accounts
        self.index_max_age_s = index_max_age_s
        # attempt id -> Slurm job id, as last listed (adopt lookups without a query
        # per start); refreshed when older than index_max_age_s.
        self._index: dict[str, str] = {}
        self._index_at: float | None = None

    # -- reads -------------------------------------------------------------------------
    def hosts(self) -> list[ClusterHost]:
        hosts = []
        for node in self.client.nodes():
            if self.partition and self.partition not in (node.get("partitions") or []):
                continue
            host = host_of(node)
            if host is not None:
                hosts.append(host)
        return sorted(hosts, key=lambda h: h.name)

    def jobs(self) -> list[ClusterJob]:
        raw = self.client.jobs()
        out: list[ClusterJob] = []
        index: dict[str, str] = {}
        for job in raw:
            cj = cluster_job_of(job)
            if cj is None:
                continue
            if cj.attempt_id:
                index[cj.attempt_id] = cj.external_id
            out.append(cj)
        self._index, self._index_at = index, time.monotonic()
        return out

    def _lookup(self, attempt_id: str, *, fresh: bool = False) -> str | None:
        """The Slurm job id of an attempt, from the last listing unless it is stale."""
        stale = self._index_at is None or time.monotonic() - self._index_at > self.index_max_age_s
        if fresh or stale:
            self._index, self._index_at = self.client.attempt_index(), time.monotonic()
        return self._index.get(attempt_id)

    # -- start -------------------------------------------------------------------------
    def start(self, request: StartRequest) -> ClusterJob:
        """Submit held, release; adopt instead when Slurm already has the attempt."""
        if not ATTEMPT_ID_RE.match(request.attempt_id):
            raise AdapterError(
                f"attempt id {request.attempt_id!r} cannot be stamped on a Slurm job",
                retryable=False,
            )
        hosts = [p.host for p in request.placements]
        if not hosts or len(set(hosts)) != len(hosts):
            raise AdapterError(
                f"attempt {request.attempt_id}: placements must name distinct hosts",
                retryable=False,
            )
        existing = self._lookup(request.attempt_id)
        if existing:
            return self._adopt(request, existing)
        script = job_script(request)
        try:
            job_id = self.client.submit(script, self._submit_options(request))
        except AdapterError as exc:
            if not exc.retryable and not isinstance(exc, SlurmTimeout):
                raise
            # sbatch may have queued it before failing or timing out: adopt, never resubmit
            found = self._lookup_after_error(request.attempt_id)
            if found is None:
                raise
            return self._adopt(request, found)
        self._index[request.attempt_id] = job_id
        self._release(request, job_id)
        return ClusterJob(
            attempt_id=request.attempt_id,
            state=ClusterJobState.STARTING,
            detail=f"Slurm job {job_id} submitted on {','.join(hosts)}",
            external_id=job_id,
        )

    def _lookup_after_error(self, attempt_id: str) -> str | None:
        try:
            return self._lookup(attempt_id, fresh=True)
        except AdapterError:
            return None

    def _submit_options(self, request: StartRequest) -> SubmitOptions:
        counts = {len(p.gpu_indices) for p in request.placements}
        per_node = counts.pop() if len(counts) == 1 else None
        account = (
            request.project.rsplit("/", 1)[-1].lower()
            if self.use_accounts and request.project
            else ""
        )
        return SubmitOptions(
            name=request.job_name[:200] or request.attempt_id,
            comment=attempt_comment(request.attempt_id),
            nodelist=[p.host for p in request.placements],
            gpus_per_node=per_node if per_node else None,
            gpus_total=request.gpus,
            account=account,
            partition=self.partition,
            workdir=self.workdir,
            output=self.output,
        )

    def _release(self, request: StartRequest, job_id: str) -> None:
        """Release a held job; if that fails twice, cancel it as abandoned (it never
        ran; jobs() leaves it out, so the cycle counts the start as failed)."""
        for attempt in range(2):
            try:
                self.client.release(job_id)
                return
            except AdapterError as exc:
                if attempt == 1:
                    self._abandon(request, job_id)
                    raise AdapterError(f"Slurm job {job_id} could not be released: {exc}") from exc

    def _abandon(self, request: StartRequest, job_id: str) -> None:
        try:
            self.client.update_job(
                job_id, comment=attempt_comment(request.attempt_id, abandoned=True)
            )
            self.client.cancel(job_id)
        except AdapterError:
            pass  # still held: it cannot run; the next start of the job has a new attempt id

    def _adopt(self, request: StartRequest, job_id: str) -> ClusterJob:
        """The job Slurm already has for this attempt: released on Allot's hosts if it
        is still held, reported as it is otherwise."""
        job = self.client.job(job_id)
        if job is None:
            raise AdapterError(f"Slurm job {job_id} of attempt {request.attempt_id} vanished")
        held = job["job_state"] == "PENDING" and job["state_reason"].startswith("JobHeld")
        if held:
            self.client.update_job(job_id, nodelist=",".join(p.host for p in request.placements))
            self._release(request, job_id)
            return ClusterJob(
                attempt_id=request.attempt_id,
                state=ClusterJobState.STARTING,
                detail=f"adopted Slurm job {job_id} (submitted before a timeout) and released it",
                external_id=job_id,
            )
        squeue_like = {
            "job_id": job_id,
            "job_state": job["job_state"],
            "state_reason": job["state_reason"],
            "comment": job["comment"],
            "nodes": job["nodes"],
            "job_resources": {"allocated_nodes": [{"nodename": n} for n, _ in job["allocated"]]},
            "gres_detail": [d for _, d in job["allocated"]],
        }
        adopted = cluster_job_of(squeue_like)
        if adopted is None:
            raise AdapterError(f"Slurm job {job_id} of attempt {request.attempt_id} was abandoned")
        return adopted

    # -- stop --------------------------------------------------------------------------
    def stop(self, attempt_id: str, grace_s: float) -> None:
        """Graceful stop: stamp the deadline, SIGTERM the batch script; `scancel` once
        the grace period is over. Idempotent; a job Slurm no longer has is left alone."""
        job_id = self._lookup(attempt_id)
        if job_id is None:
            job_id = self._lookup(attempt_id, fresh=True)
        if job_id is None:
            return
        job = self.client.job(job_id)
        if job is None or job["job_state"] not in ACTIVE_SLURM_STATES:
            return
        _, stop_by, _ = parse_attempt_comment(job["comment"])
        now = time.time()
        if stop_by is None:
            stop_by = int(now + max(0.0, grace_s))
            self.client.update_job(job_id, comment=attempt_comment(attempt_id, stop_by=stop_by))
            if job["job_state"] in ("PENDING", "REQUEUED", "REQUEUE_HOLD"):
                self.client.cancel(job_id)  # never ran: nothing to stop gracefully
                return
            self.client.signal(job_id, "TERM")
        if grace_s <= 0 or now >= stop_by:
            self.client.cancel(job_id)

    # -- hosts -------------------------------------------------------------------------
    def set_host_health(self, host: str, health: HostHealthState, reason: str) -> None:
        """Drain (draining or down in Allot) or resume a node in Slurm."""
        if health == HostHealthState.HEALTHY:
            try:
                self.client.update_node(host, "resume")
            except AdapterError as exc:
                if "Invalid node state" not in str(exc):  # it was not drained
                    raise
            return
        reason = " ".join((reason or "drained in Allot").split())[:200]
        self.client.update_node(host, "drain", reason)

    def close(self) -> None:
        """Nothing to release: every call is its own process."""


def adapter_for_cluster(cluster: Any) -> SlurmAdapter:
    """The adapter of a `Cluster` row with `adapter="slurm"`; `cluster.adapter_options`
    holds `slurm_conf`, `bin_dir`, `timeout_s`, `partition`, `workdir`, `output`,
    `use_accounts`."""
    options = dict(getattr(cluster, "adapter_options", None) or {})
    client = SlurmClient(
        slurm_conf=options.get("slurm_conf") or None,
        bin_dir=options.get("bin_dir") or None,
        timeout_s=float(options.get("timeout_s") or 30.0),
    )
    return SlurmAdapter(
        client,
        partition=options.get("partition", ""),
        workdir=options.get("workdir", "/tmp"),
        output=options.get("output", "allot-%j.out"),
        use_accounts=bool(options.get("use_accounts", True)),
    )
