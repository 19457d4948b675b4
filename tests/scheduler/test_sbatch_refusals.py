"""Who reads the governed sbatch jobs Allot refused (docs/slurm.md): staff and the
cluster's operators every one; anyone else those sbatch'd under their own user name and
those on the account of a project they manage or that lies below a node they manage
(`budgets.permissions.readable_sbatch_refusals`), alike in `GET /api/v1/clusters/{id}/`
and on the Now page. A refusal names a Slurm user and account and says why."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler.models import SlurmAdoption
from scheduler.selectors.now import sbatch_refusals
from tests.factories import ClusterFactory, UserFactory
from tests.roles import participant

pytestmark = pytest.mark.django_db

# Slurm id -> (Slurm user, account, reason); ann is a member of a1, bob of a2
REFUSALS = {
    "101": ("ann", "a1", "gpus is 3: no host holds 3 GPUs"),
    "102": ("nobody", "a1", "Slurm user 'nobody' has no Allot account of that name"),
    "103": ("bob", "nosuch", "account 'nosuch' is no Allot project"),
    "104": ("bob", "b1", "bob may not submit to org/prog-b/b1"),
}
EVERY = sorted(REFUSALS)


@pytest.fixture
def refused(tree):
    cluster = ClusterFactory(name="slurm1")
    other = ClusterFactory(name="slurm2")
    at = timezone.now() - dt.timedelta(minutes=5)
    for i, (slurm_id, (user, account, reason)) in enumerate(sorted(REFUSALS.items())):
        SlurmAdoption.objects.create(
            cluster=cluster, slurm_job_id=slurm_id, slurm_user=user, account=account,
            at=at + dt.timedelta(seconds=i), refused=reason, open=False,
        )  # fmt: skip
    # an adopted job is no refusal, and another cluster's refusals are its own
    SlurmAdoption.objects.create(
        cluster=other, slurm_job_id="201", slurm_user="ann", account="a1", at=at, refused="x"
    )
    return cluster, other


def _api_ids(user, cluster) -> list[str]:
    api = APIClient()
    api.force_authenticate(user)
    response = api.get(f"/api/v1/clusters/{cluster.pk}/")
    assert response.status_code == 200
    return sorted(r["slurm_job_id"] for r in response.json()["sbatch_refusals"])


def _page_ids(user) -> list[str]:
    """The Slurm ids of slurm1's refusals in the "Refused sbatch jobs" tables of the Now
    page (slurm2's has another id)."""
    client = Client()
    client.force_login(user)
    html = client.get("/now/").content.decode()
    sections = [s.split("</table>", 1)[0] for s in html.split("Refused sbatch jobs")[1:]]
    return sorted(i for i in REFUSALS if any(f">{i}<" in s for s in sections))


@pytest.mark.parametrize(
    ("who", "sees"),
    [
        ("staff", EVERY),
        ("operator", EVERY),  # of this cluster
        ("ann", ["101"]),  # her own only: not another user's on her project
        ("bob", ["103", "104"]),  # his own, on any account
        ("pi-a1", ["101", "102"]),  # the manager of a1: every refusal on its account
        ("lead-a", ["101", "102"]),  # a manager above a1 (and a2)
        ("lead-b", ["104"]),
        ("ceo", ["101", "102", "104"]),  # every project's account; not an unknown one
        ("eve", []),  # a participant with none of their own
        ("other-operator", []),  # an operator of another cluster only
    ],
)
def test_each_reader_sees_the_refusals_the_rule_lets_them_read(refused, tree, who, sees):
    cluster, other = refused
    if who == "staff":
        user = UserFactory(username="ops-staff", is_staff=True)
    elif who == "operator":
        user = UserFactory(username="ops1")
        cluster.operators.add(user)
    elif who == "other-operator":
        user = UserFactory(username="ops2")
        other.operators.add(user)
    elif who == "eve":
        user = participant("eve")
    else:
        user = tree.user(who)
    assert [r["slurm_job_id"] for r in sbatch_refusals(cluster=cluster, actor=user)] == sorted(
        sees, reverse=True
    )  # newest first
    assert _api_ids(user, cluster) == sees
    assert _page_ids(user) == sees


def test_a_reader_sees_the_reason_of_what_they_may_read_and_nothing_of_the_rest(refused, tree):
    cluster, _ = refused
    client = Client()
    client.force_login(tree.user("ann"))
    html = client.get("/now/").content.decode()
    assert "no host holds 3 GPUs" in html
    for hidden in ("nobody", "nosuch", "may not submit to org/prog-b/b1"):
        assert hidden not in html


def test_no_role_reads_no_refusal(refused):
    cluster, _ = refused
    user = UserFactory(username="norole")
    api = APIClient()
    api.force_authenticate(user)
    assert api.get(f"/api/v1/clusters/{cluster.pk}/").status_code == 403
    assert sbatch_refusals(cluster=cluster, actor=user) == []
    client = Client()
    client.force_login(user)
    response = client.get("/now/")
    assert response.status_code == 403 and "no host holds" not in response.content.decode()
