"""Strict readers for the simulator's input files (pure Python, no Django).

- ``load_tree`` / ``load_tree_with_usage``: TREE.json, the budget tree format of
  `scheduler.core.engine.budget_tree`, shared with ``manage.py budget_import`` and
  ``budget_export`` (``name``, ``weight``, ``children``; leaves are projects; a leaf may
  carry ``usage``).
- ``load_cluster``: CLUSTER.json, either ``{"name", "hosts": [{"name", "gpus"}]}`` or
  ``{"name", "host_count", "gpus_per_host"}`` (hosts named h000, h001, ...), with optional
  ``events: [{"at_s", "host", "health": "healthy"|"unhealthy"}]``.
- ``load_trace``: TRACE.csv with header
  ``job_id,project,user,submit_s,gpus,duration_s,min_runtime_s,resumable,priority,kind``
  (extra columns ignored). ``project`` names a leaf by its project key or its path key
  ("prog-a/a1"); jobs carry the project key.

Every problem raises one :class:`InputError` that names the file and the CSV line or the
JSON node path and field. Row errors are collected (up to ``MAX_ERRORS``) so a user sees
them together; nothing is simulated from a file that has any error.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from scheduler.core.engine.budget_tree import (
    TreeFileError,
    budget_node,
    document_usage,
    leaves,
    parse_tree_document,
    project_lookup,
)
from scheduler.core.engine.types import BudgetNode
from scheduler.core.sim.model import ClusterSpec, HealthEvent, HostSpec, TraceJob

__all__ = [
    "MAX_ERRORS",
    "TRACE_COLUMNS",
    "InputError",
    "leaf_names",
    "load_cluster",
    "load_trace",
    "load_tree",
    "load_tree_with_usage",
    "parse_tree",
]

MAX_ERRORS = 20
TRACE_COLUMNS = (
    "job_id",
    "project",
    "user",
    "submit_s",
    "gpus",
    "duration_s",
    "min_runtime_s",
    "resumable",
    "priority",
    "kind",
)
_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f", ""}


class InputError(ValueError):
    """A simulator input file is invalid. ``errors`` lists every problem found (capped)."""

    def __init__(self, path: str | Path, errors: Iterable[str], more: int = 0) -> None:
        self.path = str(path)
        self.errors = list(errors)
        self.more = more
        lines = [f"{self.path}: {e}" for e in self.errors]
        if more:
            lines.append(f"{self.path}: ... and {more} more error(s)")
        super().__init__("\n".join(lines))


class _Errors:
    """Collects problems up to MAX_ERRORS and counts the rest."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.items: list[str] = []
        self.more = 0

    def add(self, msg: str) -> None:
        if len(self.items) < MAX_ERRORS:
            self.items.append(msg)
        else:
            self.more += 1

    def raise_if_any(self) -> None:
        if self.items:
            raise InputError(self.path, self.items, self.more)


def _read_json(path: str | Path) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(path, [f"cannot read file: {exc.strerror or exc}"]) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            path, [f"line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"]
        ) from exc


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


# --------------------------------------------------------------------------- tree


def parse_tree(data: Any, path: str | Path = "<tree>") -> tuple[BudgetNode, dict[str, float]]:
    """Validate a decoded TREE.json document; return the tree and the leaves' ``usage``
    by project key. The rules are those of `scheduler.core.engine.budget_tree` (the format
    ``manage.py budget_export`` writes)."""
    try:
        document = parse_tree_document(data)
    except TreeFileError as exc:
        raise InputError(path, [str(i) for i in exc.issues], exc.more) from None
    return budget_node(document), document_usage(document)


def load_tree_with_usage(path: str | Path) -> tuple[BudgetNode, dict[str, float]]:
    """Read TREE.json; return the tree and ``{project: usage}`` for leaves that give one."""
    return parse_tree(_read_json(path), path)


def load_tree(path: str | Path) -> BudgetNode:
    """Read and validate TREE.json (see :func:`parse_tree`)."""
    return load_tree_with_usage(path)[0]


def leaf_names(tree: BudgetNode) -> list[str]:
    """The project keys of the leaves, depth first (see `budget_tree` for the rule)."""
    return [leaf.key for leaf in leaves(tree)]


# --------------------------------------------------------------------------- cluster


def _listed_hosts(raw: Any, errors: _Errors) -> list[HostSpec]:
    """The hosts of the ``hosts`` form: ``[{"name", "gpus"}]`` (8 GPUs by default)."""
    hosts: list[HostSpec] = []
    if not isinstance(raw, list) or not raw:
        errors.add("field 'hosts': must be a non-empty list")
        return hosts
    names: set[str] = set()
    for i, h in enumerate(raw):
        where = f"hosts[{i}]"
        if not isinstance(h, dict):
            errors.add(f"{where}: must be an object")
            continue
        hname: Any = h.get("name")
        gpus: Any = h.get("gpus", 8)
        if not isinstance(hname, str) or not hname.strip():
            errors.add(f"{where}: field 'name': must be a non-empty string")
            continue
        where = f"{where} ('{hname}')"
        if hname in names:
            errors.add(f"{where}: field 'name': duplicate host name")
            continue
        names.add(hname)
        if not _is_int(gpus) or gpus <= 0:
            errors.add(f"{where}: field 'gpus': must be an integer > 0, got {gpus!r}")
            continue
        hosts.append(HostSpec(hname, int(gpus)))
    return hosts


def _counted_hosts(data: dict[str, Any], errors: _Errors) -> list[HostSpec]:
    """The hosts of the ``host_count``/``gpus_per_host`` form, named h000, h001, ..."""
    count: Any = data.get("host_count")
    per: Any = data.get("gpus_per_host", 8)
    good = True
    if not _is_int(count) or count <= 0:
        errors.add(f"field 'host_count': must be an integer > 0, got {count!r}")
        good = False
    if not _is_int(per) or per <= 0:
        errors.add(f"field 'gpus_per_host': must be an integer > 0, got {per!r}")
        good = False
    if not good:
        return []
    width = max(3, len(str(int(count) - 1)))
    return [HostSpec(f"h{i:0{width}d}", int(per)) for i in range(int(count))]


def _cluster_hosts(data: dict[str, Any], errors: _Errors) -> list[HostSpec]:
    """The hosts of CLUSTER.json in whichever form it gives them (exactly one)."""
    has_list = "hosts" in data
    has_count = "host_count" in data or "gpus_per_host" in data
    if has_list and has_count:
        errors.add("give either 'hosts' or 'host_count'/'gpus_per_host', not both")
    elif has_list:
        return _listed_hosts(data["hosts"], errors)
    elif has_count:
        return _counted_hosts(data, errors)
    else:
        errors.add("missing field 'hosts' (or 'host_count' and 'gpus_per_host')")
    return []


def _health_event(
    ev: Any, where: str, hosts: list[HostSpec], known: set[str], errors: _Errors
) -> HealthEvent | None:
    """One entry of ``events``, or None (its problems added to `errors`)."""
    if not isinstance(ev, dict):
        errors.add(f"{where}: must be an object")
        return None
    at: Any = ev.get("at_s")
    host: Any = ev.get("host")
    health: Any = ev.get("health")
    good = True
    if not _is_number(at) or at < 0:
        errors.add(f"{where}: field 'at_s': must be a number >= 0, got {at!r}")
        good = False
    if not isinstance(host, str) or (hosts and host not in known):
        errors.add(f"{where}: field 'host': unknown host {host!r}")
        good = False
    if health not in ("healthy", "unhealthy"):
        errors.add(f"{where}: field 'health': must be 'healthy' or 'unhealthy', got {health!r}")
        good = False
    return HealthEvent(float(at), host, health == "healthy") if good else None


def _health_events(
    data: dict[str, Any], hosts: list[HostSpec], errors: _Errors
) -> list[HealthEvent]:
    """The valid entries of the optional ``events`` list, in file order."""
    events: list[HealthEvent] = []
    raw_events = data.get("events", [])
    if raw_events is None:
        raw_events = []
    if not isinstance(raw_events, list):
        errors.add("field 'events': must be a list")
        raw_events = []
    known = {h.name for h in hosts}
    for i, ev in enumerate(raw_events):
        event = _health_event(ev, f"events[{i}]", hosts, known, errors)
        if event is not None:
            events.append(event)
    return events


def load_cluster(path: str | Path) -> ClusterSpec:
    """Read and validate CLUSTER.json (either host form, optional health events)."""
    data = _read_json(path)
    errors = _Errors(path)
    if not isinstance(data, dict):
        raise InputError(path, ["the cluster must be a JSON object"])
    name: Any = data.get("name")
    if not isinstance(name, str) or not name.strip():
        errors.add(f"field 'name': must be a non-empty string, got {name!r}")
    hosts = _cluster_hosts(data, errors)
    events = _health_events(data, hosts, errors)
    errors.raise_if_any()
    events.sort(key=lambda e: e.at_s)  # stable: same-time events keep file order
    return ClusterSpec(name=name, hosts=tuple(hosts), events=tuple(events))


# --------------------------------------------------------------------------- trace


def _parse_float(raw: str, field: str, minimum: float, strict: bool) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"field '{field}': not a number: {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"field '{field}': must be finite, got {raw!r}")
    if value < minimum or (strict and value == minimum):
        op = ">" if strict else ">="
        raise ValueError(f"field '{field}': must be {op} {minimum:g}, got {raw!r}")
    return value


def _parse_int(raw: str, field: str) -> int:
    try:
        return int(raw)
    except ValueError:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"field '{field}': not an integer: {raw!r}") from None
        if not value.is_integer():
            raise ValueError(f"field '{field}': not an integer: {raw!r}") from None
        return int(value)


# The numeric columns and their parsers: (column, parse(raw, column)).
_TRACE_NUMBERS: tuple[tuple[str, Callable[[str, str], float | int]], ...] = (
    ("submit_s", lambda r, f: _parse_float(r, f, 0.0, False)),
    ("duration_s", lambda r, f: _parse_float(r, f, 0.0, True)),
    ("min_runtime_s", lambda r, f: _parse_float(r, f, 0.0, False)),
    ("gpus", _parse_int),
    ("priority", _parse_int),
)


def _parse_resumable(raw: str, problems: list[str]) -> bool:
    """The ``resumable`` column (1/0, true/false, yes/no, ...; empty is false)."""
    res = raw.lower()
    if res in _TRUE:
        return True
    if res not in _FALSE:
        problems.append(f"field 'resumable': must be 0 or 1, got {raw!r}")
    return False


class _TraceRows:
    """Turns the rows of one TRACE.csv into jobs, each row checked on its own (job ids
    also against the rows before it)."""

    def __init__(
        self, header: list[str], known: Mapping[str, str], cluster: ClusterSpec | None
    ) -> None:
        self.col = {c: header.index(c) for c in TRACE_COLUMNS}
        self.idle_col = header.index("idle_after_s") if "idle_after_s" in header else -1
        self.width = len(header)
        self.known = known
        self.cluster = cluster
        host_sizes = sorted({h.gpus for h in cluster.hosts}) if cluster else []
        self.max_host = host_sizes[-1] if host_sizes else 0
        self.total = cluster.total_gpus if cluster else 0
        self.seen: dict[str, int] = {}  # job id -> its line

    def _job_id(self, job_id: str, line: int, problems: list[str]) -> None:
        """A job id must be given and new."""
        if not job_id:
            problems.append("field 'job_id': empty")
        elif job_id in self.seen:
            problems.append(
                f"field 'job_id': duplicate job id {job_id!r} (first on line {self.seen[job_id]})"
            )
        else:
            self.seen[job_id] = line

    def _gpus(self, gpus: Any, raw: str, problems: list[str]) -> None:
        """A GPU count must be > 0 and, with a cluster, fit on it."""
        if gpus is None:
            return
        if gpus <= 0:
            problems.append(f"field 'gpus': must be > 0, got {raw!r}")
        elif self.cluster is not None:
            if gpus > self.total:
                problems.append(
                    f"field 'gpus': {gpus} GPUs is more than the cluster has ({self.total})"
                )
            elif gpus > self.max_host and gpus % self.max_host:
                problems.append(
                    f"field 'gpus': {gpus} GPUs is more than one host and not a "
                    f"multiple of the host size ({self.max_host})"
                )

    def _idle_after(self, row: list[str], problems: list[str]) -> float | None:
        """The optional ``idle_after_s`` column (None when absent or empty)."""
        idle_raw = row[self.idle_col].strip() if self.idle_col >= 0 else ""
        try:
            return _parse_float(idle_raw, "idle_after_s", 0.0, False) if idle_raw else None
        except ValueError as exc:
            problems.append(str(exc))
            return None

    def job(self, row: list[str], line: int) -> TraceJob | list[str]:
        """The job of a (non-blank) row, or its problems."""
        if len(row) < self.width:
            return [f"expected {self.width} fields, got {len(row)}"]
        vals = {c: row[i].strip() for c, i in self.col.items()}
        problems: list[str] = []
        job_id = vals["job_id"]
        self._job_id(job_id, line, problems)
        project = self.known.get(vals["project"], "")
        if not project:
            problems.append(f"field 'project': unknown project {vals['project']!r}")
        parsed: dict[str, Any] = {}
        for field, fn in _TRACE_NUMBERS:
            try:
                parsed[field] = fn(vals[field], field)
            except ValueError as exc:
                problems.append(str(exc))
        self._gpus(parsed.get("gpus"), vals["gpus"], problems)
        idle_after = self._idle_after(row, problems)
        resumable = _parse_resumable(vals["resumable"], problems)
        if problems:
            return problems
        return TraceJob(
            job_id=job_id,
            project=project,
            user=vals["user"],
            submit_s=parsed["submit_s"],
            gpus=parsed["gpus"],
            duration_s=parsed["duration_s"],
            min_runtime_s=parsed["min_runtime_s"],
            resumable=resumable,
            priority=parsed["priority"],
            kind=vals["kind"],
            idle_after_s=idle_after,
        )


class _CsvReader(Protocol):
    """What the trace reader uses of `csv.reader`'s object."""

    line_num: int

    def __next__(self) -> list[str]: ...


def _trace_header(reader: _CsvReader, path: str | Path) -> list[str]:
    """The header row, stripped; raises `InputError` without one that has every column."""
    try:
        header = next(reader)
    except StopIteration:
        raise InputError(path, ["line 1: empty file, expected a header"]) from None
    except csv.Error as exc:
        raise InputError(path, [f"line 1: unreadable CSV: {exc}"]) from None
    header = [h.strip() for h in header]
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise InputError(path, [f"line 1: missing column(s) {', '.join(missing)} in the header"])
    return header


def _trace_jobs(reader: _CsvReader, rows: _TraceRows, errors: _Errors) -> list[TraceJob]:
    """The jobs of the rows after the header, in file order (blank rows skipped); the
    problems go to `errors` (an unreadable row ends the reading)."""
    jobs: list[TraceJob] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.add(f"line {reader.line_num}: unreadable CSV: {exc}")
            break
        line = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        job = rows.job(row, line)
        if isinstance(job, TraceJob):
            jobs.append(job)
        else:
            for p in job:
                errors.add(f"line {line}: {p}")
    return jobs


def load_trace(
    path: str | Path,
    projects: Iterable[str] | Mapping[str, Any] | BudgetNode,
    cluster: ClusterSpec | None = None,
) -> list[TraceJob]:
    """Read and validate TRACE.csv; return the jobs sorted by (submit_s, file order).

    ``projects`` is the set of known project keys, or the tree itself (then a project may
    also be named by its path key, "prog-a/a1", and is stored by its key). With ``cluster``
    the GPU counts are also checked against it: a job must fit on one host or ask for
    whole hosts of the same size, and never more GPUs than the cluster has.
    """
    known = (
        project_lookup(projects) if isinstance(projects, BudgetNode) else {p: p for p in projects}
    )
    errors = _Errors(path)
    try:
        fh = open(path, newline="", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InputError(path, [f"cannot read file: {exc.strerror or exc}"]) from exc
    with fh:
        reader = csv.reader(fh)
        header = _trace_header(reader, path)
        jobs = _trace_jobs(reader, _TraceRows(header, known, cluster), errors)
    errors.raise_if_any()
    if not jobs:
        raise InputError(path, ["no jobs: the trace has a header but no rows"])
    jobs.sort(key=lambda j: j.submit_s)  # stable: ties keep file order
    return jobs
