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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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


def load_cluster(path: str | Path) -> ClusterSpec:
    """Read and validate CLUSTER.json (either host form, optional health events)."""
    data = _read_json(path)
    errors = _Errors(path)
    if not isinstance(data, dict):
        raise InputError(path, ["the cluster must be a JSON object"])
    name: Any = data.get("name")
    if not isinstance(name, str) or not name.strip():
        errors.add(f"field 'name': must be a non-empty string, got {name!r}")
    hosts: list[HostSpec] = []
    has_list = "hosts" in data
    has_count = "host_count" in data or "gpus_per_host" in data
    if has_list and has_count:
        errors.add("give either 'hosts' or 'host_count'/'gpus_per_host', not both")
    elif has_list:
        raw = data["hosts"]
        if not isinstance(raw, list) or not raw:
            errors.add("field 'hosts': must be a non-empty list")
        else:
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
    elif has_count:
        count: Any = data.get("host_count")
        per: Any = data.get("gpus_per_host", 8)
        good = True
        if not _is_int(count) or count <= 0:
            errors.add(f"field 'host_count': must be an integer > 0, got {count!r}")
            good = False
        if not _is_int(per) or per <= 0:
            errors.add(f"field 'gpus_per_host': must be an integer > 0, got {per!r}")
            good = False
        if good:
            width = max(3, len(str(int(count) - 1)))
            hosts = [HostSpec(f"h{i:0{width}d}", int(per)) for i in range(int(count))]
    else:
        errors.add("missing field 'hosts' (or 'host_count' and 'gpus_per_host')")

    events: list[HealthEvent] = []
    raw_events = data.get("events", [])
    if raw_events is None:
        raw_events = []
    if not isinstance(raw_events, list):
        errors.add("field 'events': must be a list")
        raw_events = []
    known = {h.name for h in hosts}
    for i, ev in enumerate(raw_events):
        where = f"events[{i}]"
        if not isinstance(ev, dict):
            errors.add(f"{where}: must be an object")
            continue
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
        if good:
            events.append(HealthEvent(float(at), host, health == "healthy"))
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
    host_sizes = sorted({h.gpus for h in cluster.hosts}) if cluster else []
    max_host = host_sizes[-1] if host_sizes else 0
    total = cluster.total_gpus if cluster else 0

    errors = _Errors(path)
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    try:
        fh = open(path, newline="", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InputError(path, [f"cannot read file: {exc.strerror or exc}"]) from exc
    with fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(path, ["line 1: empty file, expected a header"]) from None
        except csv.Error as exc:
            raise InputError(path, [f"line 1: unreadable CSV: {exc}"]) from None
        header = [h.strip() for h in header]
        missing = [c for c in TRACE_COLUMNS if c not in header]
        if missing:
            raise InputError(
                path, [f"line 1: missing column(s) {', '.join(missing)} in the header"]
            )
        col = {c: header.index(c) for c in TRACE_COLUMNS}
        idle_col = header.index("idle_after_s") if "idle_after_s" in header else -1
        width = len(header)
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
            if len(row) < width:
                errors.add(f"line {line}: expected {width} fields, got {len(row)}")
                continue
            vals = {c: row[i].strip() for c, i in col.items()}
            problems: list[str] = []
            job_id = vals["job_id"]
            if not job_id:
                problems.append("field 'job_id': empty")
            elif job_id in seen:
                problems.append(
                    f"field 'job_id': duplicate job id {job_id!r} (first on line {seen[job_id]})"
                )
            else:
                seen[job_id] = line
            project = known.get(vals["project"], "")
            if not project:
                problems.append(f"field 'project': unknown project {vals['project']!r}")
            parsed: dict[str, Any] = {}
            for field, fn in (
                ("submit_s", lambda r, f: _parse_float(r, f, 0.0, False)),
                ("duration_s", lambda r, f: _parse_float(r, f, 0.0, True)),
                ("min_runtime_s", lambda r, f: _parse_float(r, f, 0.0, False)),
                ("gpus", _parse_int),
                ("priority", _parse_int),
            ):
                try:
                    parsed[field] = fn(vals[field], field)
                except ValueError as exc:
                    problems.append(str(exc))
            gpus = parsed.get("gpus")
            if gpus is not None:
                if gpus <= 0:
                    problems.append(f"field 'gpus': must be > 0, got {vals['gpus']!r}")
                elif cluster is not None:
                    if gpus > total:
                        problems.append(
                            f"field 'gpus': {gpus} GPUs is more than the cluster has ({total})"
                        )
                    elif gpus > max_host and gpus % max_host:
                        problems.append(
                            f"field 'gpus': {gpus} GPUs is more than one host and not a "
                            f"multiple of the host size ({max_host})"
                        )
            idle_raw = row[idle_col].strip() if idle_col >= 0 else ""
            try:
                idle_after = (
                    _parse_float(idle_raw, "idle_after_s", 0.0, False) if idle_raw else None
                )
            except ValueError as exc:
                problems.append(str(exc))
            res = vals["resumable"].lower()
            if res in _TRUE:
                resumable = True
            elif res in _FALSE:
                resumable = False
            else:
                problems.append(f"field 'resumable': must be 0 or 1, got {vals['resumable']!r}")
                resumable = False
            if problems:
                for p in problems:
                    errors.add(f"line {line}: {p}")
                continue
            jobs.append(
                TraceJob(
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
            )
    errors.raise_if_any()
    if not jobs:
        raise InputError(path, ["no jobs: the trace has a header but no rows"])
    jobs.sort(key=lambda j: j.submit_s)  # stable: ties keep file order
    return jobs
