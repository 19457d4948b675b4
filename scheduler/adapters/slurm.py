"""The Slurm cluster adapter: Allot decides order, placement and preemption; Slurm runs.

`SlurmAdapter` implements `scheduler.adapters.base.ClusterAdapter` on top of one small
`SlurmClient`, which talks to slurmctld through Slurm's own command-line tools
(sbatch, scontrol, squeue --json, sinfo --json, scancel): they exist on every Slurm
host and need no extra daemon. slurmrestd is not used.

How Allot's verbs map onto Slurm (checked against Slurm 22.05, recipe in docs/slurm.md):

- start: `sbatch --hold --nodelist=<hosts Allot chose> --gres=gpu:<n> --no-requeue`
  with the attempt id stamped in the job's comment (`allot-attempt:<id>`), then
  `scontrol release`. Slurm picks the GPU indices on those hosts; `jobs()` reports
  the ones it gave (squeue's `gres_detail`, the same as `scontrol show job -d`), and
  the cycle records them on the attempt. Adopt-before-retry: before submitting, and
  after a submit that timed out or failed, the attempt id is looked up in Slurm; a job
  that is there is adopted (node list set again, released), never submitted twice.
- stop: the comment gets `,stop-by:<epoch>`, then `scancel --signal=TERM --batch`
  reaches the job script's trap, which forwards SIGTERM to the command's process
  group; once the grace period is over (`grace_s` <= 0 or the stamped deadline
  passed) `scancel` ends the job. A stopped job is requeued by Allot (a new attempt),
  never by Slurm (`--no-requeue`).
- jobs: `squeue --json` (every job slurmctld still knows, ended ones for MinJobAge
  seconds). Jobs with an attempt id map to `ClusterJob`s; jobs without one are
  reported as foreign (`attempt_id=""`) and never touched.
- hosts: `sinfo --json`: every node with GPUs (in `partition` when given); DOWN,
  NOT_RESPONDING, FUTURE, POWERED_DOWN -> down; DRAIN/FAIL -> draining, with Slurm's
  reason. `set_host_health` drains (`scontrol update nodename=X state=drain
  reason=...`) or resumes (`state=resume`) the node.

Limits: with no slurmdbd a job slurmctld has purged (MinJobAge after its end) is
gone; an attempt the cycle had not seen end by then is reported lost by the cycle's
reconcile. Slurm, not Allot, picks GPU indices inside a host. The job's `image` is
ignored (the command runs directly on the node).

Plain Python (no Django), so it can be tested and benchmarked on its own.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hostlist

from scheduler.adapters.base import (
    AdapterError,
    AdapterUnavailable,
    ClusterHost,
    ClusterJob,
    ClusterJobState,
    ClusterPlacement,
    HostHealthState,
    StartRequest,
)

COMMENT_PREFIX = "allot-attempt:"
STOP_MARK = ",stop-by:"
# A submit whose release failed is cancelled and marked so: it never ran, and jobs()
# leaves it out, so that the cycle sees the start as failed (and requeues the job).
ABANDONED_MARK = ",abandoned"
ATTEMPT_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
COMMENT_RE = re.compile(
    r"^allot-attempt:(?P<id>[A-Za-z0-9._-]+)(?:,stop-by:(?P<stop>\d+))?(?P<abandoned>,abandoned)?"
)
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
GRES_GPU_RE = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d+)")
GRES_IDX_RE = re.compile(r"^gpu(?::[^:(]+)?(?::\d+)?\(IDX:([^)]*)\)")

# Messages of Slurm's clients that mean slurmctld could not be reached at all.
UNREACHABLE_MARKERS = (
    "Unable to contact slurm controller",
    "connect failure",
    "Socket timed out",
    "Zero Bytes were transmitted or received",
    "Unable to establish controller machine",
    "Unexpected message received",
    "Unable to process configuration file",
)
# Messages that a later try will not change (the request itself is wrong).
PERMANENT_MARKERS = (
    "Invalid job id",
    "Invalid node name",
    "Requested node configuration is not available",
    "Invalid account",
    "Invalid partition",
    "Invalid generic resource",
    "Invalid Trackable RESource",
    "Access/permission denied",
    "Job violates accounting/QOS policy",
    "not allowed",
)
# Ending of a job that is already over (stop and cancel are idempotent).
ALREADY_OVER_MARKERS = (
    "already completing or completed",
    "Job/step already",
    "has already finished",
    "Invalid job id",
)

ACTIVE_SLURM_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETING",
    "SIGNALING",
    "STOPPED",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "STAGE_OUT",
    "RESV_DEL_HOLD",
}
FAILED_SLURM_STATES = {
    "FAILED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "DEADLINE",
    "BOOT_FAIL",
    "SPECIAL_EXIT",
}
DOWN_NODE_STATES = {"down", "future", "unknown"}
# NOT_RESPONDING alone is not down: Slurm sets it for a second after every resume and
# keeps a silent node's jobs until SlurmdTimeout, when it marks the node DOWN itself.
DOWN_NODE_FLAGS = {"POWERED_DOWN", "POWER_DOWN", "POWERING_DOWN"}
DRAIN_NODE_FLAGS = {"DRAIN", "FAIL"}


class SlurmTimeout(AdapterError):
    """A Slurm command did not answer in time: it may or may not have acted."""


# ---------------------------------------------------------------------------- parsing


def parse_attempt_comment(comment: str | None) -> tuple[str, int | None, bool]:
    """(attempt id or "", stop deadline epoch or None, abandoned) from a job comment."""
    match = COMMENT_RE.match((comment or "").strip())
    if match is None:
        return "", None, False
    stop = match.group("stop")
    return match.group("id"), int(stop) if stop else None, bool(match.group("abandoned"))


def attempt_comment(attempt_id: str, *, stop_by: int | None = None, abandoned: bool = False) -> str:
    return (
        f"{COMMENT_PREFIX}{attempt_id}"
        + (f"{STOP_MARK}{stop_by}" if stop_by is not None else "")
        + (ABANDONED_MARK if abandoned else "")
    )


def gpus_in_gres(gres: str | None) -> int:
    """GPUs a node offers from its gres string: "gpu:8", "gpu:a100:4(S:0-1),gpu:h100:4"."""
    return sum(int(n) for n in GRES_GPU_RE.findall(gres or ""))


def parse_index_list(text: str) -> tuple[int, ...]:
    """ "0-2,5" -> (0, 1, 2, 5)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part or part == "N/A":
            continue
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return tuple(out)


def gpu_indices_of(gres_detail: str) -> tuple[int, ...]:
    """GPU indices in one node's gres detail: "gpu:2(IDX:0-1)" -> (0, 1)."""
    indices: list[int] = []
    for item in re.split(r",(?=gpu)", gres_detail or ""):
        match = GRES_IDX_RE.match(item.strip())
        if match:
            indices.extend(parse_index_list(match.group(1)))
    return tuple(sorted(indices))


def placements_of(job: Mapping[str, Any]) -> tuple[ClusterPlacement, ...]:
    """The GPUs a job holds, per node, from squeue's JSON (empty until it runs)."""
    resources = job.get("job_resources") or {}
    nodes = [n.get("nodename", "") for n in resources.get("allocated_nodes") or []]
    if not nodes and job.get("nodes") and job.get("gres_detail"):
        nodes = hostlist.expand_hostlist(job["nodes"])
    details = list(job.get("gres_detail") or [])
    if not nodes or not details:
        return ()
    placements = (
        ClusterPlacement(host=node, gpu_indices=gpu_indices_of(detail))
        for node, detail in zip(nodes, details, strict=False)
    )
    return tuple(p for p in placements if p.gpu_indices)


def _epoch(value: Any) -> dt.datetime | None:
    if isinstance(value, dict):  # newer Slurm: {"set": true, "number": N}
        value = value.get("number") if value.get("set", True) else None
    if not value:
        return None
    return dt.datetime.fromtimestamp(int(value), tz=dt.UTC)


def _state_name(job: Mapping[str, Any]) -> str:
    state = job.get("job_state") or ""
    if isinstance(state, list):  # newer Slurm: ["RUNNING", "COMPLETING"]
        flags = [s for s in state if s in {"COMPLETING", "CONFIGURING", "REQUEUED", "SIGNALING"}]
        return flags[0] if flags else (state[0] if state else "")
    return str(state)


def _exit_detail(status: Any) -> str:
    """Slurm's raw wait status: exit code in the high byte, signal in the low bits."""
    if isinstance(status, dict):  # newer Slurm
        status = (status.get("return_code") or {}).get("number", 0) << 8
    try:
        status = int(status or 0)
    except (TypeError, ValueError):
        return ""
    if status & 0x7F:
        return f"killed by signal {status & 0x7F}"
    return f"exit code {status >> 8}"


def cluster_job_of(job: Mapping[str, Any], *, now: float | None = None) -> ClusterJob | None:
    """One squeue JSON job as a `ClusterJob` (None for a start Allot abandoned)."""
    attempt_id, stop_by, abandoned = parse_attempt_comment(job.get("comment"))
    if abandoned:
        return None
    slurm_state = _state_name(job)
    reason = job.get("state_reason") or ""
    stopped_by_allot = stop_by is not None
    state, detail = _map_state(slurm_state, reason, job, stopped_by_allot)
    return ClusterJob(
        attempt_id=attempt_id,
        state=state,
        placements=placements_of(job) if state != ClusterJobState.STARTING else (),
        started_at=_epoch(job.get("start_time")) if state != ClusterJobState.STARTING else None,
        ended_at=_epoch(job.get("end_time")) if state in _ENDED else None,
        detail=detail,
        external_id=str(job.get("job_id", "")),
    )


_ENDED = frozenset(
    {
        ClusterJobState.SUCCEEDED,
        ClusterJobState.FAILED,
        ClusterJobState.STOPPED,
        ClusterJobState.CANCELLED,
        ClusterJobState.LOST,
    }
)


def _map_state(
    slurm_state: str, reason: str, job: Mapping[str, Any], stopped_by_allot: bool
) -> tuple[ClusterJobState, str]:
    """Slurm's job state -> Allot's, with the detail a person reads."""
    s = ClusterJobState
    what = f"Slurm job {job.get('job_id')} {slurm_state}"
    if slurm_state in (
        "PENDING",
        "CONFIGURING",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESV_DEL_HOLD",
    ):
        return s.STARTING, f"{what} ({reason})" if reason and reason != "None" else what
    if slurm_state in ("RUNNING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING"):
        return (s.STOPPING if stopped_by_allot else s.RUNNING), what
    if slurm_state in ("COMPLETING", "STAGE_OUT"):
        return s.STOPPING, what  # still holds its GPUs
    exit_detail = _exit_detail(job.get("exit_code"))
    if slurm_state == "NODE_FAIL":
        nodes = job.get("nodes") or "its node"
        return s.LOST, f"lost with {nodes} (Slurm: NODE_FAIL, {reason})"
    if stopped_by_allot:
        return s.STOPPED, f"stopped by Allot ({what}, {exit_detail})"
    if slurm_state == "COMPLETED":
        return s.SUCCEEDED, exit_detail
    if slurm_state == "CANCELLED":
        return (
            s.CANCELLED,
            f"cancelled in Slurm outside Allot (scancel or an administrator; {what})",
        )
    if slurm_state == "PREEMPTED":
        return s.LOST, f"preempted by Slurm itself, outside Allot ({what})"
    if slurm_state in FAILED_SLURM_STATES:
        why = {"TIMEOUT": "Slurm's time limit", "OUT_OF_MEMORY": "out of memory"}.get(slurm_state)
        return s.FAILED, f"{why or slurm_state.lower()}: {exit_detail} ({what}, {reason})"
    return s.LOST, f"{what} ({reason})"


def host_of(node: Mapping[str, Any]) -> ClusterHost | None:
    """One sinfo JSON node as a `ClusterHost` (None for a node without GPUs)."""
    gpus = gpus_in_gres(node.get("gres"))
    if gpus <= 0:
        return None
    state = node.get("state") or ""
    if isinstance(state, list):  # newer Slurm: ["IDLE", "DRAIN"]
        flags = {str(f).upper() for f in state[1:]}
        state = str(state[0]) if state else ""
    else:
        flags = {str(f).upper() for f in node.get("state_flags") or []}
    state = state.lower()
    reason = node.get("reason") or ""
    if state.startswith("down") or state in DOWN_NODE_STATES or flags & DOWN_NODE_FLAGS:
        health = HostHealthState.DOWN
        reason = reason or f"Slurm: {state} {' '.join(sorted(flags))}".strip()
    elif flags & DRAIN_NODE_FLAGS or state in ("drained", "draining", "drain", "fail"):
        health = HostHealthState.DRAINING
    else:
        health = HostHealthState.HEALTHY
        reason = ""
    return ClusterHost(name=node["name"], gpus=gpus, health=health, reason=reason)


# ------------------------------------------------------------------------------ client


@dataclass
class CallStats:
    """Time spent in Slurm's commands (for the benchmark and the cycle record)."""

    calls: int = 0
    seconds: float = 0.0
    by_command: dict[str, list[float]] = field(default_factory=dict)

    def add(self, command: str, seconds: float) -> None:
        self.calls += 1
        self.seconds += seconds
        entry = self.by_command.setdefault(command, [0, 0.0])
        entry[0] += 1
        entry[1] += seconds


@dataclass(frozen=True, slots=True)
class SubmitOptions:
    """What sbatch is told about one attempt."""

    name: str
    comment: str
    nodelist: Sequence[str]
    gpus_per_node: int | None
    gpus_total: int
    account: str = ""
    partition: str = ""
    workdir: str = "/tmp"
    output: str = "allot-%j.out"
    hold: bool = True


class SlurmClient:
    """Slurm's command-line tools, with timeouts, parsing and clear errors.

    `slurm_conf` (else `$SLURM_CONF`, else Slurm's default) names the cluster;
    `bin_dir` where the tools are (else `$PATH`). Every command runs with a timeout:
    `SlurmTimeout` when it passes, `AdapterUnavailable` when slurmctld cannot be
    reached (checked with `scontrol ping`), `AdapterError` otherwise (`retryable`
    False when the request itself is wrong)."""

    def __init__(
        self,
        *,
        slurm_conf: str | os.PathLike[str] | None = None,
        bin_dir: str | os.PathLike[str] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.slurm_conf = str(slurm_conf) if slurm_conf else os.environ.get("SLURM_CONF", "")
        self.bin_dir = Path(bin_dir) if bin_dir else None
        self.timeout_s = timeout_s
        self.stats = CallStats()
        self._env = {**os.environ}
        if self.slurm_conf:
            self._env["SLURM_CONF"] = self.slurm_conf

    # -- running commands ------------------------------------------------------------
    def _binary(self, name: str) -> str:
        return str(self.bin_dir / name) if self.bin_dir else name

    def run(
        self,
        *args: str,
        stdin: str | None = None,
        timeout_s: float | None = None,
        ok_markers: Sequence[str] = (),
    ) -> str:
        """Run one Slurm command; its stdout, or an error as the class docstring says.
        `ok_markers`: error messages that count as success (idempotent requests)."""
        if self.slurm_conf and not Path(self.slurm_conf).is_file():
            raise AdapterUnavailable(f"Slurm configuration {self.slurm_conf} not found")
        command = [self._binary(args[0]), *args[1:]]
        timeout = timeout_s or self.timeout_s
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                command, input=stdin, capture_output=True, text=True, timeout=timeout, env=self._env
            )
        except FileNotFoundError as exc:
            raise AdapterUnavailable(
                f"{args[0]} is not installed here ({exc})", retryable=False
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise SlurmTimeout(f"{args[0]} did not answer within {timeout:.0f} s") from exc
        finally:
            self.stats.add(args[0], time.perf_counter() - t0)
        if proc.returncode == 0:
            return proc.stdout
        message = (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}"
        if any(marker in message for marker in ok_markers):
            return proc.stdout
        raise self._error(args[0], message)

    def _error(self, command: str, message: str) -> AdapterError:
        text = f"{command}: {message}"[:1000]
        if any(marker in message for marker in UNREACHABLE_MARKERS) or not self.reachable():
            return AdapterUnavailable(f"slurmctld cannot be reached: {text}")
        return AdapterError(text, retryable=not any(m in message for m in PERMANENT_MARKERS))

    def reachable(self) -> bool:
        """`scontrol ping`: whether the primary slurmctld answers (fails fast when down)."""
        try:
            proc = subprocess.run(
                [self._binary("scontrol"), "ping"],
                capture_output=True,
                text=True,
                timeout=min(self.timeout_s, 15.0),
                env=self._env,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return "is UP" in proc.stdout

    def _json(self, *args: str) -> dict[str, Any]:
        out = self.run(*args)
        try:
            data = json.loads(out)
        except json.JSONDecodeError as exc:
            raise AdapterError(f"{args[0]} printed no JSON ({exc}): {out[:200]!r}") from exc
        errors = data.get("errors") or []
        if errors:
            text = "; ".join(
                str(e.get("description") or e.get("error") or e)
                for e in errors
                if isinstance(e, dict)
            )
            if not self.reachable():
                raise AdapterUnavailable(f"slurmctld cannot be reached: {args[0]}: {text}")
            raise AdapterError(f"{args[0]}: {text}")
        if not isinstance(data, dict):
            raise AdapterError(f"{args[0]} printed JSON that is not an object")
        return data

    # -- reads -------------------------------------------------------------------------
    def version(self) -> str:
        """Slurm's version as its clients report it ("slurm 22.05.8")."""
        return self.run("sinfo", "--version").strip()

    def jobs(self) -> list[dict[str, Any]]:
        """Every job slurmctld knows (squeue's JSON; 22.05 ignores squeue's filters
        with --json, so this is always all of them)."""
        return list(self._json("squeue", "--json").get("jobs") or [])

    def attempt_index(self) -> dict[str, str]:
        """{attempt id: Slurm job id} of every job slurmctld knows (a cheap text query,
        for adopt lookups); a job that was abandoned is left out."""
        out = self.run("squeue", "--noheader", "--states=all", "--format=%i|%k")
        index: dict[str, str] = {}
        for line in out.splitlines():
            job_id, _, comment = line.partition("|")
            attempt_id, _, abandoned = parse_attempt_comment(comment)
            if attempt_id and not abandoned:
                index[attempt_id] = job_id.strip()
        return index

    def job(self, job_id: str) -> dict[str, Any] | None:
        """One job from `scontrol show job -d` as {"job_state", "state_reason", "comment",
        "nodes", "allocated": [(node, gres detail)]}; None when Slurm no longer knows it."""
        try:
            out = self.run("scontrol", "show", "job", "-d", str(job_id))
        except AdapterError as exc:
            if "Invalid job id" in str(exc):
                return None
            raise
        return parse_show_job(out)

    def nodes(self) -> list[dict[str, Any]]:
        """Every node (sinfo's JSON, one entry per node)."""
        seen: dict[str, dict[str, Any]] = {}
        for node in self._json("sinfo", "--json").get("nodes") or []:
            seen.setdefault(node["name"], node)
        return list(seen.values())

    def partitions(self) -> list[dict[str, str]]:
        """Every partition as `scontrol show partition --oneliner` key/values."""
        out = self.run("scontrol", "show", "partition", "--oneliner")
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.strip()]

    def accounts(self) -> tuple[str, set[str]]:
        """The accounts Slurm defines, and where they come from.

        With slurmdbd, `sacctmgr show account`. Without it (the test cluster) Slurm has
        no account table: the accounts a site defines are then the partitions'
        `AllowAccounts` lists ("ALL" names none). Returns (source, names)."""
        try:
            out = self.run(
                "sacctmgr",
                "--noheader",
                "--parsable2",
                "show",
                "account",
                "format=Account",
                timeout_s=15,
            )
            return "sacctmgr (slurmdbd)", {
                line.strip().lower() for line in out.splitlines() if line.strip()
            }
        except AdapterError:
            pass
        names: set[str] = set()
        for part in self.partitions():
            allowed = part.get("AllowAccounts", "ALL")
            if allowed and allowed != "ALL":
                names.update(a.strip().lower() for a in allowed.split(",") if a.strip())
        return "partitions' AllowAccounts (no slurmdbd)", names

    # -- writes ------------------------------------------------------------------------
    def submit(self, script: str, options: SubmitOptions) -> str:
        """sbatch the script (read from stdin); the new job's id."""
        args = [
            "sbatch",
            "--parsable",
            f"--job-name={options.name}",
            f"--comment={options.comment}",
            "--no-requeue",
            f"--nodes={len(options.nodelist)}",
            f"--nodelist={','.join(options.nodelist)}",
            f"--chdir={options.workdir}",
            f"--output={options.output}",
        ]
        if options.hold:
            args.append("--hold")
        if options.gpus_per_node:
            args.append(f"--gres=gpu:{options.gpus_per_node}")
        else:
            args.append(f"--gpus={options.gpus_total}")
        if options.account:
            args.append(f"--account={options.account}")
        if options.partition:
            args.append(f"--partition={options.partition}")
        out = self.run(*args, stdin=script).strip()
        job_id = out.split(";", 1)[0]
        if not job_id.isdigit():
            raise AdapterError(f"sbatch printed no job id: {out[:200]!r}")
        return job_id

    def release(self, job_id: str) -> None:
        self.run("scontrol", "release", str(job_id))

    def update_job(self, job_id: str, **fields: str) -> None:
        pairs = [f"{key}={value}" for key, value in fields.items()]
        self.run("scontrol", "update", f"jobid={job_id}", *pairs, ok_markers=ALREADY_OVER_MARKERS)

    def signal(self, job_id: str, signal: str = "TERM") -> None:
        """`scancel --signal=SIG --batch`: the batch script (and its trap) gets it."""
        self.run(
            "scancel", f"--signal={signal}", "--batch", str(job_id), ok_markers=ALREADY_OVER_MARKERS
        )

    def cancel(self, job_id: str) -> None:
        """`scancel`: end the job (SIGTERM, then SIGKILL after KillWait)."""
        self.run("scancel", str(job_id), ok_markers=ALREADY_OVER_MARKERS)

    def update_node(self, name: str, state: str, reason: str = "") -> None:
        args = ["scontrol", "update", f"nodename={name}", f"state={state}"]
        if reason:
            args.append(f"reason={reason}")
        self.run(*args)


def parse_show_job(text: str) -> dict[str, Any]:
    """The fields of `scontrol show job -d` the adapter needs."""

    def field_of(key: str) -> str:
        match = re.search(rf"(?:^|\s){key}=(\S*)", text)
        return match.group(1) if match else ""

    allocated = re.findall(r"^\s*Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=(\S*)", text, re.M)
    return {
        "job_id": field_of("JobId"),
        "job_state": field_of("JobState"),
        "state_reason": field_of("Reason"),
        "comment": field_of("Comment"),
        "nodes": field_of("NodeList"),
        "required_nodes": field_of("ReqNodeList"),
        "allocated": [
            (node, detail)
            for nodes, detail in allocated
            for node in hostlist.expand_hostlist(nodes)
        ],
    }


# ----------------------------------------------------------------------------- script


def job_script(request: StartRequest) -> str:
    """The batch script of one attempt: the job's command in its own process group,
    its environment, and a SIGTERM trap that forwards a graceful stop to the command
    and waits for it to exit. `spec["image"]` is not used on Slurm."""
    spec = request.spec or {}
    command = spec.get("command")
    if isinstance(command, list | tuple):
        command = shlex.join(str(part) for part in command)
    if not command or not str(command).strip():
        raise AdapterError(
            f"job {request.job_name!r} has no command to run on Slurm", retryable=False
        )
    env = dict(spec.get("env") or {})
    bad = [name for name in env if not ENV_NAME_RE.match(str(name))]
    if bad:
        raise AdapterError(
            f"invalid environment variable name(s): {', '.join(map(str, bad))}", retryable=False
        )
    exports = "\n".join(
        f"export {name}={shlex.quote(str(value))}" for name, value in sorted(env.items())
    )
    image = spec.get("image")
    return SCRIPT_TEMPLATE.format(
        attempt_id=request.attempt_id,
        image_note=f"# image {image!r} is not used: Slurm runs the command on the node\n"
        if image
        else "",
        exports=exports,
        attempt=shlex.quote(request.attempt_id),
        project=shlex.quote(request.project),
        command=shlex.quote(str(command)),
    )


SCRIPT_TEMPLATE = """\
#!/bin/bash
# Allot attempt {attempt_id}
{image_note}{exports}
export ALLOT_ATTEMPT_ID={attempt} ALLOT_PROJECT={project}
# Job control: the command runs in its own process group, so that a stop reaches
# every process of it, not only the shell.
set -m
interrupted=0
forward_stop() {{
  interrupted=1
  echo "allot: stop requested, sending SIGTERM to the command" >&2
  kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null
}}
trap forward_stop TERM
bash -c {command} &
child=$!
while :; do
  wait "$child"; status=$?
  # the trap interrupted wait (status > 128): wait again for the command's own status
  if [ "$status" -gt 128 ] && [ "$interrupted" = 1 ]; then interrupted=0; continue; fi
  break
done
exit "$status"
"""


# ----------------------------------------------------------------------------- adapter


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
