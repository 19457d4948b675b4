"""A job's ETA keeps the refusals the live cycle keeps (issue 25): a job the cluster
refused on every host starts no sooner than the first avoidance lapses, one refused on
one host of two starts on the other, and the ETA reads the refusals where the cycle
does (`cluster_snapshot(refusals=True)`, `scheduler.selectors.refusals`)."""

import datetime as dt

import pytest
from django.utils import timezone

from scheduler.models import AttemptEnd, AttemptState
from scheduler.selectors.refusals import START_WITHDRAWN, avoid_s
from scheduler.services.eta import cluster_etas
from tests.factories import AttemptFactory
from tests.support.live import submit_job

pytestmark = pytest.mark.django_db


def _refused(cluster, tree, hosts: list[str], ago_s: float = 60.0):
    """A pending 4-GPU job whose start on `hosts` the cycle took back `ago_s` ago."""
    now = timezone.now()
    job = submit_job(
        cluster=cluster, project=tree.node("a1"), user=tree.user("ann"), at=now, gpus=4
    )
    ended = now - dt.timedelta(seconds=ago_s)
    AttemptFactory(
        job=job,
        state=AttemptState.ENDED,
        end_reason=AttemptEnd.START_FAILED,
        end_detail=f"{START_WITHDRAWN}Slurm job 7 PENDING (ReqNodeNotAvail)",
        placements=[{"host": h, "gpu_indices": [0, 1, 2, 3]} for h in hosts],
        ended_at=ended,
    )
    return job, ended.timestamp()


def _start(cluster, job) -> float:
    eta = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]
    assert eta["method"] == "forward-simulation"
    return dt.datetime.fromisoformat(eta["start"]).timestamp()


def test_a_job_refused_on_every_host_starts_no_sooner_than_its_avoidance_ends(cluster, tree):
    hosts = list(cluster.hosts.order_by("name").values_list("name", flat=True))
    job, ended = _refused(cluster, tree, hosts)
    base, _ = avoid_s()
    eta = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]
    for key in ("start", "earliest"):
        assert dt.datetime.fromisoformat(eta[key]).timestamp() >= ended + base - 1e-3


def test_a_job_refused_on_one_host_of_two_starts_now_on_the_other(cluster, tree):
    first = cluster.hosts.order_by("name").values_list("name", flat=True)[0]
    job, _ = _refused(cluster, tree, [first])
    assert _start(cluster, job) <= timezone.now().timestamp()


def test_a_refusal_whose_avoidance_lapsed_changes_nothing(cluster, tree):
    hosts = list(cluster.hosts.order_by("name").values_list("name", flat=True))
    base, _ = avoid_s()
    job, _ = _refused(cluster, tree, hosts, ago_s=base + 60)
    assert _start(cluster, job) <= timezone.now().timestamp()
