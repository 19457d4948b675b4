"""Allot's answers in the comments of waiting governed sbatch jobs (docs/slurm.md): a
cycle writes those that changed, all in one batch through the adapter
(`SlurmAdapter.annotate`, one scontrol), and records the ones Slurm took; one it could
not write is written again by a later cycle. The adapter here is an in-memory stand-in
(the real one: tests/adapters/slurm/test_adapter.py, against slurmctld)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import pytest
from django.utils import timezone

from scheduler.adapters.slurm import CommentWrites
from scheduler.adapters.slurm.governed import SlurmRecord, waiting_comment
from scheduler.models import SlurmAdoption
from scheduler.services.slurm_adoption import governed_sync
from tests.factories import ClusterFactory, JobFactory

pytestmark = pytest.mark.django_db


class Comments:
    """Governed jobs held in Slurm; `annotate` records each batch and answers with what
    `outcome` says ({Slurm id: "gone" | an error}; written otherwise)."""

    def __init__(self, ids: list[str]) -> None:
        self.records = {i: SlurmRecord(state="PENDING", held=True, comment="") for i in ids}
        self.batches: list[dict[str, str]] = []
        self.outcome: dict[str, str] = {}

    def governed_records(self) -> dict[str, SlurmRecord]:
        return self.records

    def annotate(self, comments: Mapping[str, str]) -> CommentWrites:
        self.batches.append(dict(comments))
        return CommentWrites(
            written=tuple(i for i in comments if i not in self.outcome),
            gone=tuple(i for i in comments if self.outcome.get(i) == "gone"),
            failed={i: e for i, e in self.outcome.items() if i in comments and e != "gone"},
        )


def test_changed_answers_go_in_one_batch_and_a_failed_one_is_written_again():
    cluster = ClusterFactory()
    rows = {
        slurm_id: SlurmAdoption.objects.create(
            cluster=cluster,
            slurm_job_id=slurm_id,
            job=JobFactory(cluster=cluster),
            at=timezone.now(),
        )
        for slurm_id in ("11", "12", "13")
    }
    slurm = Comments(list(rows))
    slurm.outcome = {"12": "gone", "13": "scontrol: Access/permission denied"}
    governed_sync(cluster=cluster, adapter=slurm, now=timezone.now())
    (batch,) = slurm.batches
    assert sorted(batch) == ["11", "12", "13"]
    assert batch["11"] == f"allot-job:{rows['11'].job_id} waiting for the next cycle"
    stored = dict(SlurmAdoption.objects.values_list("slurm_job_id", "comment"))
    assert stored == {"11": batch["11"], "12": batch["12"], "13": ""}

    slurm.outcome = {}
    governed_sync(cluster=cluster, adapter=slurm, now=timezone.now())
    assert slurm.batches[1] == {"13": batch["13"]}  # only what Slurm has not taken yet
    governed_sync(cluster=cluster, adapter=slurm, now=timezone.now())
    assert len(slurm.batches) == 2  # nothing changed: no write at all
    assert SlurmAdoption.objects.get(slurm_job_id="13").comment == batch["13"]


def test_a_job_without_an_answer_yet_is_written_before_a_stale_one(monkeypatch):
    monkeypatch.setattr("scheduler.services.slurm_adoption.MAX_COMMENT_WRITES", 1)
    cluster = ClusterFactory()
    for slurm_id, comment in (("11", "allot-job:1 #1 stale"), ("12", "")):
        SlurmAdoption.objects.create(
            cluster=cluster,
            slurm_job_id=slurm_id,
            job=JobFactory(cluster=cluster),
            at=timezone.now(),
            comment=comment,
        )
    slurm = Comments(["11", "12"])
    governed_sync(cluster=cluster, adapter=slurm, now=timezone.now())
    governed_sync(cluster=cluster, adapter=slurm, now=timezone.now())
    assert [list(batch) for batch in slurm.batches] == [["12"], ["11"]]


def test_an_answer_that_only_drifted_is_not_written_again(monkeypatch):
    """A standing queue: the share and ETA in a waiting job's answer move a little every
    cycle; what Slurm shows stays until its reader would learn something."""
    cluster = ClusterFactory()
    job = JobFactory(cluster=cluster)
    eta = timezone.now() + dt.timedelta(hours=2)
    shown = waiting_comment(
        job.pk, 1, "waiting: project a1 is at 40% of its share", f"{eta:%Y-%m-%d %H:%M}"
    )
    SlurmAdoption.objects.create(
        cluster=cluster, slurm_job_id="11", job=job, at=timezone.now(), comment=shown
    )
    answer = {"reason": "waiting: project a1 is at 41% of its share", "eta": eta}

    def answers(_cluster):
        when = f"{answer['eta']:%Y-%m-%d %H:%M}"
        return {job.pk: (1, answer["reason"], when)}

    monkeypatch.setattr("scheduler.services.slurm_adoption._queue_answers", answers)
    slurm = Comments(["11"])
    answer["eta"] = eta + dt.timedelta(minutes=3)
    governed_sync(cluster=cluster, adapter=slurm, now=timezone.now())
    assert slurm.batches == []
    answer["eta"] = eta + dt.timedelta(minutes=30)
    governed_sync(cluster=cluster, adapter=slurm, now=timezone.now())
    ((written,),) = (list(b.values()) for b in slurm.batches)
    assert written.endswith(f"ETA {answer['eta']:%Y-%m-%d %H:%M}") and "41%" in written
