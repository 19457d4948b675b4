"""Schemathesis over the whole OpenAPI schema, as each role, against a live server:
no server error, every response documented and matching the schema (`--checks all`).

Bounded examples keep it to CI time; bench/fuzz.py runs the same for longer."""

import pytest

from budgets.services import budget_tree_import
from tests.api.fuzz import run_schemathesis
from tests.factories import EXAMPLE_TREE, SuperUserFactory, UserFactory
from tests.roles import token_for

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = {
    "superuser": "root",
    "manager": "lead-a",  # manages the program prog-a
    "member": "ann",  # member of the project a1
    "anonymous": None,
}
# The coverage phase (boundary values of every parameter) takes most of the time; it runs
# for the role that reaches the most code, the others get the random and stateful phases.
PHASES = {"superuser": "coverage,fuzzing,stateful"}


@pytest.mark.parametrize("role", list(ROLES))
def test_schema_fuzzing_finds_nothing(live_server, role):
    budget_tree_import(data=EXAMPLE_TREE)
    SuperUserFactory(username="root")
    username = ROLES[role]
    token = token_for(UserFactory(username=username)) if username else None
    phases = PHASES.get(role, "fuzzing,stateful")
    report = run_schemathesis(
        live_server.url, token=token, max_examples=5, extra_args=("--phases", phases)
    )
    assert report["operations"]["tested"] >= 10, report["output"]
    assert report["failures"] == [] and report["errors"] == [], report["output"]
    assert report["test_cases"]["generated"] > 50
