"""Schemathesis over the whole OpenAPI schema, as each role, against one live server:
no server error, every response documented and matching the schema (`--checks all`),
pagination parameters included (they are in the schema), and every operation of the
schema exercised for every role (the floor is the operation count, not a sample).

Kept to CI time by one server and one data set for all four roles, few examples per
operation and the coverage phase (boundary values of every parameter, the slowest part)
for the role that reaches the most code; bench/fuzz.py runs the same for longer."""

import pytest
from drf_spectacular.generators import SchemaGenerator

from budgets.services import budget_tree_import
from tests.api.fuzz import run_schemathesis
from tests.factories import EXAMPLE_TREE, ClusterFactory, HostFactory, SuperUserFactory
from tests.roles import token_for

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = {
    "superuser": "root",
    "manager": "lead-a",  # manages the program prog-a
    "member": "ann",  # member of the project a1
    "anonymous": None,
}
PHASES = {"superuser": "coverage,fuzzing,stateful"}
METHODS = {"get", "post", "put", "patch", "delete"}


def test_schema_fuzzing_finds_nothing_for_any_role(live_server, django_user_model):
    budget_tree_import(data=EXAMPLE_TREE)
    SuperUserFactory(username="root")
    cluster = ClusterFactory(name="gpu", host_count=2, gpus_per_host=8)
    HostFactory(cluster=cluster, name="node0")
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = sum(1 for item in schema["paths"].values() for m in item if m in METHODS)
    for role, username in ROLES.items():
        user = django_user_model.objects.get(username=username) if username else None
        report = run_schemathesis(
            live_server.url,
            token=token_for(user) if user else None,
            max_examples=3,
            extra_args=("--phases", PHASES.get(role, "fuzzing,stateful")),
        )
        assert report["operations"]["tested"] == operations, (role, report["output"][-3000:])
        assert report["failures"] == [] and report["errors"] == [], (role, report["output"])
