"""`SlurmClient`: Slurm's command-line tools, with timeouts, parsing and clear errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.adapters.base import AdapterError, AdapterUnavailable
from scheduler.adapters.slurm.parsing import (
    ACTIVE_SLURM_STATES,
    ALREADY_OVER_MARKERS,
    PERMANENT_MARKERS,
    SLURM_ID_RE,
    UNREACHABLE_MARKERS,
    SlurmTimeout,
    comment_update_line,
    parse_attempt_comment,
    parse_show_job,
    scontrol_word,
)

# scontrol reading commands from stdin (readline): no site key bindings, C locale
SCONTROL_STDIN_ENV = {"INPUTRC": "/dev/null", "LC_ALL": "C"}


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
class CommentWrites:
    """What a batch of comment writes did, by Slurm id."""

    written: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()  # Slurm no longer knows the job (it ended meanwhile)
    failed: Mapping[str, str] = field(default_factory=dict)  # {Slurm id: the error}


def sorted_writes(
    wanted: Mapping[str, str], shown: Mapping[str, tuple[str, str]], error: str
) -> CommentWrites:
    """Which of a failed batch's comments hold: `shown` is {Slurm id: (state, comment)}
    as squeue lists them after it; a job it no longer lists, or lists ended, is gone."""
    written: list[str] = []
    gone: list[str] = []
    failed: dict[str, str] = {}
    for slurm_id, text in wanted.items():
        state, comment = shown.get(slurm_id, ("", ""))
        if state not in ACTIVE_SLURM_STATES:
            gone.append(slurm_id)
        elif comment == scontrol_word(text):
            written.append(slurm_id)
        else:
            failed[slurm_id] = error
    return CommentWrites(tuple(written), tuple(gone), failed)


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
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Run one Slurm command; its stdout, or an error as the class docstring says.
        `ok_markers`: error messages that count as success (idempotent requests);
        `env`: variables set for this command only."""
        if self.slurm_conf and not Path(self.slurm_conf).is_file():
            raise AdapterUnavailable(f"Slurm configuration {self.slurm_conf} not found")
        command = [self._binary(args[0]), *args[1:]]
        timeout = timeout_s or self.timeout_s
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**self._env, **env} if env else self._env,
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

    def hold(self, job_id: str) -> None:
        self.run("scontrol", "hold", str(job_id), ok_markers=ALREADY_OVER_MARKERS)

    def requeue_hold(self, job_id: str) -> None:
        """`scontrol requeuehold`: end the run, keep the job pending and held."""
        self.run("scontrol", "requeuehold", str(job_id), ok_markers=ALREADY_OVER_MARKERS)

    def update_job(self, job_id: str, **fields: str) -> None:
        pairs = [f"{key}={value}" for key, value in fields.items()]
        self.run("scontrol", "update", f"jobid={job_id}", *pairs, ok_markers=ALREADY_OVER_MARKERS)

    def set_comments(self, comments: Mapping[str, str]) -> CommentWrites:
        """Write the comments {Slurm id: text} with one `scontrol` that reads an `update`
        per line from stdin (each text as `scontrol_word` makes it safe there). A line
        that fails (its job ended meanwhile) does not stop the others; when any failed,
        one `squeue` tells which held (a job that ended is gone, as for `update_job`).
        A timeout or an unreachable slurmctld is raised."""
        bad = {i: "not a Slurm job id" for i in comments if not SLURM_ID_RE.fullmatch(i)}
        wanted = {i: text for i, text in comments.items() if i not in bad}
        if not wanted:
            return CommentWrites(failed=bad)
        lines = "".join(comment_update_line(i, text) for i, text in wanted.items())
        try:
            self.run("scontrol", stdin=lines, env=SCONTROL_STDIN_ENV)
        except (AdapterUnavailable, SlurmTimeout):
            raise
        except AdapterError as exc:
            result = sorted_writes(wanted, self.comments(), str(exc))
            return CommentWrites(result.written, result.gone, {**result.failed, **bad})
        return CommentWrites(written=tuple(wanted), failed=bad)

    def comments(self) -> dict[str, tuple[str, str]]:
        """{Slurm id: (state, comment)} of every job slurmctld knows (an array's tasks
        each)."""
        out = self.run("squeue", "--noheader", "--states=all", "--array", "--format=%i|%T|%k")
        rows = (line.split("|", 2) for line in out.splitlines() if line.count("|") >= 2)
        return {job_id.strip(): (state.strip(), comment) for job_id, state, comment in rows}

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
