"""Reading Slurm's output: job comments, gres strings, squeue/sinfo JSON, scontrol text.

Plain functions and constants, no process is run here (see `client` for that)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

import hostlist

from scheduler.adapters.base import (
    AdapterError,
    ClusterHost,
    ClusterJob,
    ClusterJobState,
    ClusterPlacement,
    HostHealthState,
)

COMMENT_PREFIX = "allot-attempt:"
# job_submit.lua's tag of a job sbatch'd to a governed partition (its admin comment)
GOVERNED_TAG = "allot-governed"
STOP_MARK = ",stop-by:"
# A submit whose release failed is cancelled and marked so: it never ran, and jobs()
# leaves it out, so that the cycle sees the start as failed (and requeues the job).
ABANDONED_MARK = ",abandoned"
# a requeue-held (or held) governed job after Allot's stop: it waits in Allot's queue
REQUEUE_HELD = ("JobHeldUser", "JobHeldAdmin", "job requeued in held state")
ATTEMPT_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
COMMENT_RE = re.compile(
    r"^allot-attempt:(?P<id>[A-Za-z0-9._-]+)(?:,stop-by:(?P<stop>\d+))?(?P<abandoned>,abandoned)?"
)
# a Slurm job as scontrol names it: "123", an array task "122_3"
SLURM_ID_RE = re.compile(r"[0-9]+(?:_[0-9]+)?")  # fullmatch
# slurmctld refuses a comment over 1024 bytes
COMMENT_MAX_BYTES = 1000
NO_BREAK_SPACE = "\u00a0"
TYPOGRAPHIC_QUOTES = str.maketrans({'"': "\u201d", "'": "\u2019"})
# quotes typographic, control characters (Unicode's Cc: C0, DEL, C1) dropped; white
# space among them is split on before this applies
_WORD_CHARS = {
    **TYPOGRAPHIC_QUOTES,
    **{code: None for code in (*range(0x20), *range(0x7F, 0xA0))},
}
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
# node states and flags in which Slurm starts jobs as usual (others are named to the
# user when a start waits there: RESERVED, MAINT, ...)
PLAIN_NODE_STATES = {"idle", "mixed", "allocated"}
QUIET_NODE_FLAGS = {"COMPLETING", "NOT_RESPONDING"}


class SlurmTimeout(AdapterError):
    """A Slurm command did not answer in time: it may or may not have acted."""


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


def scontrol_word(text: str, *, max_bytes: int = COMMENT_MAX_BYTES) -> str:
    """`text` as one word of a command line that scontrol reads from stdin.

    scontrol splits such a line at ASCII white space and keeps quote characters in
    the value (`Comment="a b"` stores the quotes; there is no escape), so white space
    becomes one no-break space (U+00A0, shown as a space), `"` and `'` typographic
    quotes, and control characters are dropped; cut to `max_bytes` of UTF-8."""
    words = (word.translate(_WORD_CHARS) for word in text.split())
    encoded = NO_BREAK_SPACE.join(w for w in words if w).encode("utf-8", "replace")
    return encoded[:max_bytes].decode("utf-8", "ignore")


def comment_update_line(slurm_id: str, text: str) -> str:
    """One `scontrol update` of a job's comment, as a line of scontrol's stdin."""
    if not SLURM_ID_RE.fullmatch(slurm_id):
        raise ValueError(f"{slurm_id!r} is no Slurm job id")
    return f"update JobId={slurm_id} Comment={scontrol_word(text)}\n"


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
    if not attempt_id and is_governed_record(job) and not placements_of(job):
        return None  # governed sbatch Allot has not started: adopted, not foreign
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
        external_id=slurm_id_of(job),
    )


def slurm_id_of(job: Mapping[str, Any]) -> str:
    """The id that names exactly this job to scontrol and scancel: an array task's is
    `<array job id>_<task>` (its bare job id may be the array's, naming every task)."""
    array_job = int(job.get("array_job_id") or 0)
    task = job.get("array_task_id")
    if isinstance(task, dict):  # newer Slurm: {"set": ..., "number": ...}
        task = task.get("number") if task.get("set") else None
    if array_job and task is not None and str(task).isdigit():
        return f"{array_job}_{task}"
    return str(job.get("job_id", ""))


def is_governed_record(job: Mapping[str, Any]) -> bool:
    """Whether job_submit.lua tagged the job (sbatch'd to a governed partition)."""
    return str(job.get("admin_comment") or "").startswith(GOVERNED_TAG)


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
        if stopped_by_allot and is_governed_record(job) and reason.startswith(REQUEUE_HELD):
            return s.STOPPED, f"requeued and held by Allot ({what})"
        # squeue's %R: "ReqNodeNotAvail, May be reserved for other job" (JSON's
        # state_description) says more than its code "ReqNodeNotAvail"
        said = str(job.get("state_description") or "").strip() or reason
        if reason and reason != "None" and reason not in said:
            said = f"{reason}: {said}"
        return s.STARTING, f"{what} ({said})" if said and said != "None" else what
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
    notable = state not in PLAIN_NODE_STATES or flags - QUIET_NODE_FLAGS
    word = "+".join([state.upper(), *sorted(flags)]) if notable else ""
    return ClusterHost(name=node["name"], gpus=gpus, health=health, reason=reason, state=word)


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
        "admin_comment": field_of("AdminComment"),
        "nodes": field_of("NodeList"),
        "required_nodes": field_of("ReqNodeList"),
        "allocated": [
            (node, detail)
            for nodes, detail in allocated
            for node in hostlist.expand_hostlist(nodes)
        ],
    }
