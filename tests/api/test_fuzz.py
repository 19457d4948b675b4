"""Schemathesis over the whole OpenAPI schema, as each role, against one live server:
no server error, every response documented and matching the schema (`--checks all`),
pagination parameters included (they are in the schema), and every operation of the
schema exercised for every role it is open to: each one tested, and none that the
permission matrix (tests/security/permissions.py) opens to the role answered it only
401/403 (as every operation did once the fuzzer had revoked a fixed token).

Kept to CI time by one server for all four roles (a test each, which xdist runs side by
side), few examples per operation and the coverage phase (boundary values of every
parameter, the slowest part) for the role that reaches the most code, in parts that
together cover every path; bench/fuzz.py runs the same for longer."""

import json
import logging

import pytest
from django.test import override_settings
from drf_spectacular.generators import SchemaGenerator

from budgets.services import budget_tree_import
from tests.api.fuzz import run_schemathesis
from tests.api.fuzz_world import add_fuzz_members
from tests.factories import EXAMPLE_TREE, ClusterFactory, HostFactory, SuperUserFactory
from tests.security.permissions import operation_key, refused_operations

pytestmark = pytest.mark.django_db(transaction=True)

# fuzzing role -> (user, the permission matrix's role)
ROLES = {
    "superuser": ("root", "superuser"),
    "manager": ("lead-a", "program_manager"),  # manages the program prog-a
    "member": ("ann", "member"),  # member of the project a1
    "anonymous": (None, "anonymous"),
}
# The coverage phase as the superuser is the slowest part by far: it runs on its own, over
# the schema's paths in COVERAGE_PARTS disjoint parts (every path in one), a test each.
# Under pytest-xdist the coverage parts, the longest tests of the module, start first
# (recorded durations, tests/support/scheduling.py), so that none is left to run alone at the end.
COVERAGE_PARTS = 3
RUNS = [("superuser", "coverage", part) for part in range(COVERAGE_PARTS)] + [
    (role, "fuzzing,stateful", None) for role in ROLES
]
METHODS = {"get", "post", "put", "patch", "delete"}
PASSWORD = "pw"


# The fuzzer signs in with random user names and passwords from 127.0.0.1; the roles'
# own sign-ins must not be locked out by them. One test per run, so that pytest-xdist
# runs them side by side (each against the session's live server, on its own data).
@override_settings(AXES_FAILURE_LIMIT=1_000_000)
@pytest.mark.parametrize(
    ("role", "phases", "part"), RUNS, ids=[f"{r}-{p}{'' if n is None else n}" for r, p, n in RUNS]
)
def test_schema_fuzzing_finds_nothing_for_any_role(
    role, phases, part, live_server, django_user_model, tmp_path, caplog
):
    # thousands of 4xx by design: log server errors only (a 5xx is logged at ERROR)
    caplog.set_level(logging.ERROR, logger="django.request")
    caplog.set_level(logging.ERROR, logger="axes")
    budget_tree_import(data=EXAMPLE_TREE)
    SuperUserFactory(username="root", password=PASSWORD)
    cluster = ClusterFactory(name="gpu", host_count=2, gpus_per_host=8)
    HostFactory(cluster=cluster, name="node0")
    for username in ("lead-a", "ann"):
        user = django_user_model.objects.get(username=username)
        user.set_password(PASSWORD)
        user.save()
    # nearly every membership the fuzzer sees is one the manager may remove: with 3
    # examples it once drew only the others, and the manager's DELETE was unreached
    add_fuzz_members(ROLES["manager"][0])
    schema = SchemaGenerator().get_schema(request=None, public=True)
    if part is not None:
        paths = sorted(schema["paths"])[part::COVERAGE_PARTS]
        schema["paths"] = {path: schema["paths"][path] for path in paths}
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(schema))
    operations = sum(1 for item in schema["paths"].values() for m in item if m in METHODS)
    username, matrix_role = ROLES[role]
    report = run_schemathesis(
        live_server.url,
        login=(username, PASSWORD) if username else None,
        max_examples=3,
        schema_path=schema_path,
        extra_args=("--phases", phases),
    )
    assert report["operations"]["tested"] == operations, (role, report["output"][-3000:])
    assert report["failures"] == [] and report["errors"] == [], (role, report["output"])
    only_refused = {operation_key(op) for op in report["warnings"]["missing_auth"]}
    unexpected = sorted(only_refused - refused_operations(matrix_role))
    assert unexpected == [], (role, "answered only 401/403", report["output"][-3000:])
