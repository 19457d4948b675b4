"""A submission checked field by field (the field named in every error): the job's
fields, the project the actor may use, the Idempotency-Key and the body's fingerprint."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef

from budgets import permissions
from budgets.models import BudgetNode
from budgets.selectors import tree_index
from config.errors import PermissionDenied, ValidationFailed
from config.plainsql import columns, fetch_one, instance
from config.text import clean_text, is_id_text, refuse_control_characters
from scheduler.core.engine.blocks import Shape
from scheduler.models import (
    DAY_S,
    RUNS_COMMANDS,
    AdapterKind,
    Cluster,
    Host,
    JobKind,
)
from scheduler.selectors.clusters import resolve_cluster

MAX_ARRAY = 10_000
NAME_MAX_LENGTH = 200
PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
MAX_DURATION_S = 90 * DAY_S
SPEC_KEYS = ("image", "command", "env")
IMAGE_MAX_LENGTH = 1000
COMMAND_MAX_LENGTH = 10_000
ENV_MAX_ENTRIES = 200
ENV_VALUE_MAX_LENGTH = 10_000
SPEC_MAX_BYTES = 64 * 1024
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
IDEMPOTENCY_KEY_MAX_LENGTH = 255


@dataclass(frozen=True)
class JobRequest:
    """A validated submission (what the fingerprint and the stored jobs are made of)."""

    project_id: int
    project_path: str
    cluster: Cluster
    name: str
    gpus: int
    min_runtime_s: int
    resumable: bool
    priority: int
    kind: str
    spec: dict[str, Any]
    duration_s: int | None
    array: int

    def canonical(self) -> dict[str, Any]:
        return {
            "project": self.project_id,
            "cluster": self.cluster.pk,
            "name": self.name,
            "gpus": self.gpus,
            "min_runtime_s": self.min_runtime_s,
            "resumable": self.resumable,
            "priority": self.priority,
            "kind": self.kind,
            "spec": self.spec,
            "duration_s": self.duration_s,
            "array": self.array,
        }


# ---------------------------------------------------------------- field checks


def _integer(value: Any, *, field: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed(f"{field} must be a whole number ({what}).", field=field)
    if not low <= value <= high:
        raise ValidationFailed(
            f"{field} is {value}; it must be between {low} and {high} ({what}).", field=field
        )
    return value


def _boolean(value: Any, *, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationFailed(f"{field} must be true or false.", field=field)
    return value


def clean_name(value: Any) -> str:
    return clean_text(
        value,
        field="name",
        max_length=NAME_MAX_LENGTH,
        multiline=False,
        blank_message="name must not be empty.",
    )


def clean_kind(value: Any) -> str:
    if value not in JobKind.values:
        raise ValidationFailed(
            f"kind must be one of {', '.join(JobKind.values)} (got {value!r}).", field="kind"
        )
    return str(value)


def _text(value: Any, *, field: str, max_length: int, multiline: bool) -> str:
    if not isinstance(value, str):
        raise ValidationFailed(f"{field} must be text.", field=field)
    if len(value) > max_length:
        raise ValidationFailed(
            f"{field} has {len(value)} characters; at most {max_length} are allowed.",
            field=field,
        )
    refuse_control_characters(value, field=field, multiline=multiline)
    return value


def clean_spec(value: Any) -> dict[str, Any]:
    """`{"image": str, "command": str, "env": {str: str}}`, every key optional."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationFailed(
            'spec must be an object like {"image": ..., "command": ..., "env": {...}}.',
            field="spec",
        )
    unknown = sorted(set(value) - set(SPEC_KEYS))
    if unknown:
        raise ValidationFailed(
            f"spec has an unknown key '{unknown[0]}'; allowed: {', '.join(SPEC_KEYS)}.",
            field=f"spec.{unknown[0]}",
        )
    spec: dict[str, Any] = {}
    if value.get("image") is not None:
        spec["image"] = _text(
            value["image"], field="spec.image", max_length=IMAGE_MAX_LENGTH, multiline=False
        )
    if value.get("command") is not None:
        spec["command"] = _text(
            value["command"], field="spec.command", max_length=COMMAND_MAX_LENGTH, multiline=True
        )
    env = value.get("env")
    if env is not None:
        if not isinstance(env, Mapping):
            raise ValidationFailed(
                'spec.env must be an object of names to text values, like {"SEED": "1"}.',
                field="spec.env",
            )
        if len(env) > ENV_MAX_ENTRIES:
            raise ValidationFailed(
                f"spec.env has {len(env)} variables; at most {ENV_MAX_ENTRIES} are allowed.",
                field="spec.env",
            )
        for key, val in env.items():
            if not isinstance(key, str) or not ENV_NAME.match(key):
                raise ValidationFailed(
                    f"spec.env has the variable name {key!r}; names are letters, digits and "
                    "underscores, not starting with a digit.",
                    field="spec.env",
                )
            _text(
                val,
                field=f"spec.env.{key}",
                max_length=ENV_VALUE_MAX_LENGTH,
                multiline=True,
            )
        spec["env"] = dict(env)
    size = len(json.dumps(spec).encode())
    if size > SPEC_MAX_BYTES:
        raise ValidationFailed(
            f"spec is {size} bytes long; at most {SPEC_MAX_BYTES} are allowed.", field="spec"
        )
    return spec


def check_gpus(gpus: Any, cluster: Cluster, host_sizes: list[int]) -> int:
    """1, 2, 4, 8 (powers of two that one host holds) or a multiple of the host size
    that the cluster has enough whole hosts for (the engine's placement rule, `Shape`)."""
    gpus = _integer(gpus, field="gpus", low=1, high=1_000_000, what="GPUs of the job")
    sizes = host_sizes or [cluster.gpus_per_host] * cluster.host_count
    biggest = max(sizes)
    if gpus <= biggest and gpus & (gpus - 1):
        raise ValidationFailed(
            f"gpus is {gpus}; a job on one host asks for 1, 2, 4, 8, ... GPUs (a power of "
            f"two up to {biggest}), or for a multiple of the host size to use whole hosts.",
            field="gpus",
        )
    shape = Shape(gpus, sizes)
    if shape.reason:
        host_list = "/".join(str(s) for s in sorted(set(sizes)))
        raise ValidationFailed(
            f"gpus is {gpus}; no placement on cluster '{cluster.name}' can hold it "
            f"({len(sizes)} hosts of {host_list} GPUs): ask for a power of two up to "
            f"{biggest} or a multiple of the host size up to {sum(sizes)}.",
            field="gpus",
        )
    return gpus


# ---------------------------------------------------------------- lookups


@dataclass(frozen=True)
class ProjectRef:
    """A project (a leaf) and the chain of nodes down to it: (id, parent id, slug,
    weight), root first. Who may use it is `budgets.permissions.may_submit`."""

    id: int
    path: str
    chain: list[tuple[int, int | None, str, Any]]


_CHAIN_FIELDS = (
    "pk",
    "parent_id",
    "slug",
    "weight",
    "kind",
    "has_children",
)


_CHAIN_SQL = """
    SELECT n.id, n.parent_id, n.slug, n.weight, n.kind,
           EXISTS (SELECT 1 FROM {node} c WHERE c.parent_id = n.id)
    FROM {node} n WHERE n.slug = ANY(%s)
"""  # the columns of _CHAIN_FIELDS


def _with_children(qs):
    """The chain's rows with whether each has children (one query with the lookup)."""
    return qs.annotate(has_children=Exists(BudgetNode.objects.filter(parent_id=OuterRef("pk"))))


def resolve_project(
    value: Any, *, field: str = "project", path_rows: list[tuple] | None = None
) -> ProjectRef:
    """A leaf of the budget tree by its id, its slug path (`org/program/project`) or,
    when no path matches, its slug alone if one project has it.
    `path_rows`: the rows `_CHAIN_SQL` gives for the path's slugs, read already (by
    `_project_and_cluster`)."""
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise ValidationFailed(
            f"{field} must be a project's id or its path like 'org/program/project'.",
            field=field,
        )
    if isinstance(value, str):
        refuse_control_characters(value, field=field, multiline=False)  # a NUL: SQL refuses
    if isinstance(value, int) or is_id_text(value):
        try:
            ancestors = BudgetNode.objects.ancestors(BudgetNode(pk=int(value)), include_self=True)
            rows = list(_with_children(ancestors).values_list(*_CHAIN_FIELDS))
        except BudgetNode.DoesNotExist:
            rows = []
        if not rows:
            raise ValidationFailed(f"There is no project with id {value}.", field=field)
    else:
        parts = _path_parts(value)
        rows = _rows_by_path(parts) if path_rows is None else _chain(parts, path_rows)
        if not rows and len(parts) == 1:
            rows = _project_by_slug(parts[0], field)
        if not rows:
            raise ValidationFailed(
                f"There is no project at the path '{value}' (paths are slugs from the "
                "root, like 'org/program/project'"
                + (", or a project's slug alone, like 'project')." if len(parts) == 1 else ")."),
                field=field,
            )
    path = "/".join(row[2] for row in rows)
    pk, _, _, _, kind, has_children = rows[-1]
    if has_children:
        raise ValidationFailed(
            f"'{path}' is a {kind}, not a project: jobs belong to the leaves of the "
            "budget tree; pick one of its projects.",
            field=field,
        )
    return ProjectRef(id=pk, path=path, chain=[row[:4] for row in rows])


def _project_by_slug(slug: str, field: str) -> list[tuple]:
    """The chain of the one project named by its slug alone (`pretraining`, as Slurm's
    `-A account`; `TreeIndex.by_slug`), root first; else of the one node with that slug
    (refused as not a project by the caller); empty when none. A slug several projects
    share is refused with their paths to choose from."""
    index = tree_index()
    leaves, named = index.by_slug(slug)
    if len(leaves) > 1:
        choices = ", ".join(sorted(index.path(pk) for pk in leaves))
        raise ValidationFailed(
            f"'{slug}' names {len(leaves)} projects ({choices}); give the path of one.",
            field=field,
        )
    found = leaves or named
    if len(found) != 1:
        return []
    ancestors = BudgetNode.objects.ancestors(BudgetNode(pk=found[0]), include_self=True)
    return list(_with_children(ancestors).values_list(*_CHAIN_FIELDS))


def _path_parts(path: str) -> list[str]:
    return [p for p in path.strip().strip("/").split("/") if p]


def _rows_by_path(parts: list[str]) -> list[tuple]:
    """The chain of a slug path, root first, in one query (empty when there is none)."""
    if not parts:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_CHAIN_SQL.format(node=BudgetNode._meta.db_table), [sorted(set(parts))])
        return _chain(parts, cursor.fetchall())


def _chain(parts: list[str], rows: list[tuple]) -> list[tuple]:
    """The chain of the slug path `parts`, root first, from `_CHAIN_SQL`'s rows for its
    slugs (empty when there is none)."""
    by_parent_slug = {(row[1], row[2]): row for row in rows}
    chain: list[tuple] = []
    parent: int | None = None
    for slug in parts:
        row = by_parent_slug.get((parent, slug))
        if row is None:
            return []
        chain.append(row)
        parent = row[0]
    return chain


# A submission naming its project by path: the path's nodes (`_CHAIN_SQL`'s rows, as
# JSON) and the cluster with its hosts' GPU counts (`resolve_cluster(...,
# with_host_sizes=True)`'s: by name, else by id; NULLs when there is none), one statement.
_PROJECT_AND_CLUSTER_SQL = """
    SELECT {columns}, ARRAY(SELECT h.gpus FROM {host} h WHERE h.cluster_id = c.id),
           (SELECT json_agg(json_build_array(n.id, n.parent_id, n.slug, n.weight::text, n.kind,
                   EXISTS (SELECT 1 FROM {node} k WHERE k.parent_id = n.id)))
            FROM {node} n WHERE n.slug = ANY(%s))
    FROM (SELECT 1) AS one LEFT JOIN {cluster} c ON c.id = COALESCE(
        (SELECT x.id FROM {cluster} x WHERE x.name = %s),
        (SELECT x.id FROM {cluster} x WHERE x.id = %s))
"""


@dataclass(frozen=True)
class _Lookup:
    """What `_project_and_cluster` read: the path's node rows and the cluster (None
    when none matched)."""

    path_rows: list[tuple]
    cluster: Cluster | None


def _project_and_cluster(project: Any, cluster: Any) -> _Lookup | None:
    """For a project given by path and a cluster given by name or id, both read in one
    statement (every submission through the API and the CLI reads both); None for any
    other input, which `resolve_project` and `resolve_cluster` read (and refuse) one by
    one, in the order the fields are checked."""
    if not isinstance(project, str) or is_id_text(project) or not _path_parts(project):
        return None
    if isinstance(cluster, bool) or not isinstance(cluster, int | str) or cluster == "":
        return None
    if "\x00" in project or (isinstance(cluster, str) and "\x00" in cluster):
        return None  # PostgreSQL text holds no NUL: the field-by-field reads refuse it, named
    ident = cluster if isinstance(cluster, int) else int(cluster) if is_id_text(cluster) else None
    if ident is not None and not -(2**63) <= ident < 2**63:
        ident = -1  # beyond bigint: no cluster has that id
    sql = _PROJECT_AND_CLUSTER_SQL.format(
        columns=columns(Cluster, "c"),
        host=Host._meta.db_table,
        node=BudgetNode._meta.db_table,
        cluster=Cluster._meta.db_table,
    )
    name = cluster if isinstance(cluster, str) else None
    row = fetch_one(sql, [sorted(set(_path_parts(project))), name, ident], prepared=True)
    assert row is not None  # one row always (the LEFT JOIN's)
    nodes = [
        (pk, parent, slug, None if weight is None else Decimal(weight), kind, children)
        for pk, parent, slug, weight, kind, children in row[-1] or []
    ]
    if row[0] is None:
        return _Lookup(path_rows=nodes, cluster=None)
    found, at = instance(Cluster, row)
    found.host_sizes = row[at]
    return _Lookup(path_rows=nodes, cluster=found)


# ---------------------------------------------------------------- the request


def clean_request(
    *,
    project: Any,
    cluster: Any,
    name: Any,
    gpus: Any,
    min_runtime_s: Any,
    resumable: Any,
    priority: Any,
    kind: Any,
    spec: Any,
    duration_s: Any,
    array: Any,
    actor=None,
    adopted: bool = False,
) -> JobRequest:
    """Every field checked, in the order a person reads a submission; the first
    problem raises `ValidationFailed` naming its field. With `actor`, the permission
    to use the project is checked as soon as the project is known. `adopted`: the job's
    work is in the cluster already (a governed sbatch job), so it needs no command."""
    lookup = _project_and_cluster(project, cluster)
    ref = resolve_project(project, path_rows=lookup.path_rows if lookup else None)
    chain, path = ref.chain, ref.path
    if actor is not None and not permissions.may_submit(actor, ref.id):
        raise PermissionDenied(
            f"You may not submit to '{path}': only its members and the managers of it or "
            "of a node above it may.",
            field="project",
        )
    the_cluster = lookup.cluster if lookup and lookup.cluster else None
    if the_cluster is None:  # read (or refused) here
        the_cluster = resolve_cluster(cluster, with_host_sizes=True)
    host_sizes = list(the_cluster.host_sizes)
    gpus = check_gpus(gpus, the_cluster, host_sizes)
    cap = the_cluster.max_min_runtime_s
    min_runtime_s = _integer(
        min_runtime_s,
        field="min_runtime_s",
        low=0,
        high=cap,
        what=f"seconds of protected runtime; cluster '{the_cluster.name}' allows up to {cap}, "
        "and 0 submits unallocated work",
    )
    if min_runtime_s > 0:
        _refuse_allocated_in_zero_weight(chain, path)
    array = _integer(array, field="array", low=1, high=MAX_ARRAY, what="jobs in the array")
    if duration_s is not None:
        duration_s = _integer(
            duration_s, field="duration_s", low=1, high=MAX_DURATION_S, what="expected seconds"
        )
    return JobRequest(
        project_id=ref.id,
        project_path=path,
        cluster=the_cluster,
        name=clean_name(name),
        gpus=gpus,
        min_runtime_s=min_runtime_s,
        resumable=_boolean(resumable, field="resumable"),
        priority=_integer(
            priority,
            field="priority",
            low=PRIORITY_MIN,
            high=PRIORITY_MAX,
            what="orders the job among its project's jobs only",
        ),
        kind=clean_kind(kind),
        spec=_runnable(clean_spec(spec), the_cluster, adopted=adopted),
        duration_s=duration_s,
        array=array,
    )


def _runnable(spec: dict[str, Any], cluster: Cluster, *, adopted: bool) -> dict[str, Any]:
    """`spec`, refused (naming `spec.command`) where the cluster runs the job's command
    and it has none: on Slurm the job would have nothing to run. A simulated job runs
    for its duration and needs none."""
    if adopted or cluster.adapter not in RUNS_COMMANDS:
        return spec
    if not spec.get("command", "").strip():
        raise ValidationFailed(
            f"spec.command is required: cluster '{cluster.name}' is a "
            f"{AdapterKind(cluster.adapter).label} cluster, which runs the job's command, "
            "and without one the job would have nothing to run. Give the command line to "
            "run.",
            field="spec.command",
        )
    return spec


def _refuse_allocated_in_zero_weight(chain: list[tuple], path: str) -> None:
    zero = [row for row in chain[1:] if row[3] is not None and row[3] == 0]
    if zero:
        where = (
            "it has weight 0"
            if zero[-1][0] == chain[-1][0]
            else f"'{zero[0][2]}' above it has weight 0"
        )
        raise ValidationFailed(
            f"'{path}' has no budget ({where}), so it can run unallocated work only. "
            "Submit with min_runtime_s 0 (free, preemptible at any time), or ask the "
            "program lead for a weight.",
            field="min_runtime_s",
        )


def clean_idempotency_key(value: Any) -> str | None:
    """The header's key (a quoted structured-field string or a bare token), or None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationFailed("The Idempotency-Key must be text.", field="Idempotency-Key")
    key = value.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not key:
        raise ValidationFailed("The Idempotency-Key header is empty.", field="Idempotency-Key")
    if len(key) > IDEMPOTENCY_KEY_MAX_LENGTH:
        raise ValidationFailed(
            f"The Idempotency-Key has {len(key)} characters; at most "
            f"{IDEMPOTENCY_KEY_MAX_LENGTH} are allowed.",
            field="Idempotency-Key",
        )
    if not key.isascii() or not key.isprintable():
        raise ValidationFailed(
            "The Idempotency-Key must be printable ASCII (e.g. a UUID).", field="Idempotency-Key"
        )
    return key


def fingerprint_of(data: Any) -> str:
    """sha256 of a request body in canonical JSON (key order and spacing do not matter)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
