"""`SlurmAdapter`: Allot's `ClusterAdapter` verbs over a `SlurmClient` (see the package
docstring for the mapping)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from scheduler.adapters.base import (
    AdapterError,
    ClusterHost,
    ClusterJob,
    ClusterJobState,
    HostHealthState,
    StartRequest,
)
from scheduler.adapters.slurm.client import CommentWrites, SlurmClient, SubmitOptions
from scheduler.adapters.slurm.governed import (
    GovernedJob,
    SlurmRecord,
    governed_candidates,
    governed_records,
    is_requeue_tagged,
)
from scheduler.adapters.slurm.parsing import (
    ACTIVE_SLURM_STATES,
    ATTEMPT_ID_RE,
    SlurmTimeout,
    attempt_comment,
    cluster_job_of,
    host_of,
    is_governed_record,
    parse_attempt_comment,
)
from scheduler.adapters.slurm.script import job_script

# `Job.spec` key of a job adopted from sbatch: its Slurm id (start releases that job)
SLURM_JOB_KEY = "slurm_job_id"
# Slurm states of a job that has not run yet (`withdraw` takes it back)
PENDING_SLURM_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "RESV_DEL_HOLD"})


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
        # squeue's jobs as the last jobs() read them (governed sbatch reads them again)
        self._raw: list[dict[str, Any]] | None = None

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
        self._raw = raw
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
        slurm_id = str((request.spec or {}).get(SLURM_JOB_KEY) or "")
        if slurm_id:
            return self._start_governed(request, slurm_id)
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

    def _start_governed(self, request: StartRequest, slurm_id: str) -> ClusterJob:
        """An sbatch'd job Allot adopted: stamp the attempt, set the hosts Allot chose,
        release it (the job keeps its Slurm id; an array task is split off its array)."""
        hosts = [p.host for p in request.placements]
        # one update (one RPC: all of it or nothing): the attempt id (adopt-before-retry
        # finds it), Allot's hosts, and starttime (a requeued job would wait ~2 min)
        self.client.update_job(
            slurm_id,
            comment=attempt_comment(request.attempt_id),
            nodelist=",".join(hosts),
            numnodes=str(len(hosts)),
            starttime="now",
        )
        self._index[request.attempt_id] = slurm_id
        try:
            self.client.release(slurm_id)
        except AdapterError as exc:  # held still: the next attempt stamps it again
            raise AdapterError(f"Slurm job {slurm_id} could not be released: {exc}") from exc
        return ClusterJob(
            attempt_id=request.attempt_id,
            state=ClusterJobState.STARTING,
            detail=f"sbatch job {slurm_id} released on {','.join(hosts)}",
            external_id=slurm_id,
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
        found = self._active_job(attempt_id)
        if found is None:
            return
        job_id, job = found
        _, stop_by, _ = parse_attempt_comment(job["comment"])
        now = time.time()
        end = self._ender(job)
        requeue = is_requeue_tagged(job.get("admin_comment"))
        if stop_by is None:
            stop_by = int(now + max(0.0, grace_s))
            self.client.update_job(job_id, comment=attempt_comment(attempt_id, stop_by=stop_by))
            if job["job_state"] in ("PENDING", "REQUEUED", "REQUEUE_HOLD"):
                end(job_id, pending=True)  # never ran: nothing to stop gracefully
                return
            if not requeue:  # a requeue is graceful itself: SIGTERM, KillWait, SIGKILL
                self.client.signal(job_id, "TERM")
        if requeue or grace_s <= 0 or now >= stop_by:
            end(job_id, pending=False)

    # -- withdraw --------------------------------------------------------------------
    def withdraw(self, attempt_id: str) -> bool:
        """Take back a start Slurm keeps pending (the cycle's start timeout): `scontrol
        hold` first, which slurmctld refuses once the job runs (then it is left running
        and False returned: the cycle sees it run), then the comment's stop-by mark
        (stopped by Allot), then `scancel` for a job Allot submitted. An adopted sbatch
        job is the researcher's: it stays held, never cancelled, and jobs() reports it
        stopped; Allot starts it again later (`_start_governed`). True when the job will
        not run (taken back, or Slurm no longer has it). Idempotent."""
        found = self._active_job(attempt_id)
        if found is None:
            return True
        job_id, job = found
        if job["job_state"] not in PENDING_SLURM_STATES:
            return False
        try:
            self.client.hold(job_id)
        except AdapterError:
            again = self.client.job(job_id)
            if again is not None and again["job_state"] not in PENDING_SLURM_STATES:
                return again["job_state"] not in ACTIVE_SLURM_STATES  # it started first
            raise
        _, stop_by, _ = parse_attempt_comment(job["comment"])
        stamp = attempt_comment(attempt_id, stop_by=stop_by or int(time.time()))
        self.client.update_job(job_id, comment=stamp)
        if not is_governed_record(job):
            self.client.cancel(job_id)
        return True

    def _active_job(self, attempt_id: str) -> tuple[str, dict[str, Any]] | None:
        """(Slurm id, job) of the attempt's job while Slurm has it active, else None."""
        job_id = self._lookup(attempt_id) or self._lookup(attempt_id, fresh=True)
        if job_id is None:
            return None
        job = self.client.job(job_id)
        if job is None or job["job_state"] not in ACTIVE_SLURM_STATES:
            return None
        return job_id, job

    def _ender(self, job: dict[str, Any]) -> Any:
        """How a stop ends a job: `scancel`; a governed sbatch job sbatch'd with
        `--requeue` (resumable in Allot) is requeued held instead, to wait in Allot's
        queue under its own Slurm id. A governed job that never ran is held, whatever
        its flags: it is the researcher's and waits in Allot's queue again (a cancel in
        Allot cancels it through the adoption sync, not here)."""
        requeue = is_requeue_tagged(job.get("admin_comment"))
        governed = requeue or is_governed_record(job)

        def end(job_id: str, pending: bool) -> None:
            if pending and governed:
                self.client.hold(job_id)
            elif requeue:
                self.client.requeue_hold(job_id)
            else:
                self.client.cancel(job_id)

        return end

    # -- governed sbatch ------------------------------------------------------------
    def _governed_raw(self) -> list[dict[str, Any]]:
        return self._raw if self._raw is not None else self.client.jobs()

    def governed_jobs(self) -> list[GovernedJob]:
        """Held, tagged jobs of governed partitions Allot has not answered yet (from the
        last `jobs()` read)."""
        return governed_candidates(self._governed_raw())

    def governed_records(self) -> dict[str, SlurmRecord]:
        """{Slurm id: record} of every governed job slurmctld still knows."""
        return governed_records(self._governed_raw())

    def annotate(self, comments: Mapping[str, str]) -> CommentWrites:
        """Write Allot's answers {Slurm id: text} in the jobs' comments (`squeue -o
        "%i %k"`), all with one scontrol (`SlurmClient.set_comments`)."""
        return self.client.set_comments(comments)

    def refuse(self, slurm_id: str, comment: str) -> None:
        """Cancel a governed job Allot cannot adopt, the reason in its comment."""
        self.client.update_job(slurm_id, comment=comment)
        self.client.cancel(slurm_id)

    def cancel_governed(self, slurm_id: str) -> None:
        self.client.cancel(slurm_id)

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
