"""A job on a cluster that runs commands (Slurm) needs `spec.command`: without one it
would have nothing to run, so the service refuses it with a 400 naming `spec.command`
(the API and the CLI alike). A simulated job runs for its duration and needs none; a
governed sbatch job (adopted) has its batch script in Slurm already."""

from __future__ import annotations

import pytest

from config.errors import ValidationFailed
from scheduler.models import AdapterKind, Job
from scheduler.services.jobs import job_submit
from tests.api.conftest import job_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/jobs/"


@pytest.fixture
def slurm(world):
    world.cluster.adapter = AdapterKind.SLURM
    world.cluster.save(update_fields=["adapter"])
    return world


def _submit(world, *, spec):
    """`job_submit` of ann's job with `spec` ("absent": no spec argument at all)."""
    body = job_body(spec=spec)
    if spec == "absent":
        del body["spec"]
    return job_submit(actor=world.user("ann"), **body)


@pytest.mark.parametrize(
    "spec",
    ["absent", None, {}, {"image": "pytorch:2.5"}, {"command": ""}, {"command": "  \n "}],
)
def test_a_slurm_job_without_a_command_is_refused_and_nothing_stored(slurm, spec):
    with pytest.raises(ValidationFailed) as refused:
        _submit(slurm, spec=spec)
    assert refused.value.field == "spec.command" and refused.value.status_code == 400
    assert "cluster 'gpu' is a Slurm cluster" in refused.value.message
    assert not Job.objects.exists()


def test_a_slurm_job_with_a_command_is_stored(slurm):
    result = _submit(slurm, spec={"command": "python train.py"})
    assert Job.objects.get().spec == {"command": "python train.py"}
    assert result.jobs[0].cluster.adapter == "slurm"


@pytest.mark.parametrize("spec", ["absent", None, {"command": ""}, {"image": "pytorch:2.5"}])
def test_a_simulated_job_needs_no_command(world, spec):
    assert world.cluster.adapter == AdapterKind.SIMULATED
    _submit(world, spec=spec)
    assert Job.objects.count() == 1


def test_an_adopted_sbatch_job_needs_no_command(slurm):
    """Governed sbatch (scheduler.services.slurm_adoption): the script is Slurm's."""
    body = {**job_body(), "actor": slurm.user("ann"), "adopted": True}
    del body["spec"]
    job_submit(**body)
    assert Job.objects.count() == 1


def test_the_api_refuses_it_naming_the_field_and_a_dry_run_too(slurm, api_client):
    api_client.force_authenticate(slurm.user("ann"))
    for url in (URL, f"{URL}?dry_run=1"):
        response = api_client.post(url, job_body(spec={"image": "x:1"}), format="json")
        assert response.status_code == 400, response.content
        assert response.json()["field"] == "spec.command"
    assert not Job.objects.exists()
    body = job_body(spec={"command": "sleep 60"})
    assert api_client.post(URL, body, format="json").status_code == 201
    assert Job.objects.get().spec == {"command": "sleep 60"}
