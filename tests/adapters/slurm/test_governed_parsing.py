"""What governed sbatch reads from squeue's JSON (no cluster needed)."""

from __future__ import annotations

import datetime as dt

from scheduler.adapters.base import ClusterJobState
from scheduler.adapters.slurm import cluster_job_of
from scheduler.adapters.slurm.governed import (
    comment_news,
    governed_candidates,
    governed_records,
    gpus_of,
    task_ids,
    waiting_comment,
)
from scheduler.adapters.slurm.parsing import slurm_id_of


def held(job_id: int = 7, **extra) -> dict:
    """A job as squeue --json shows it after job_submit.lua held and tagged it."""
    return {
        "job_id": job_id,
        "job_state": "PENDING",
        "state_reason": "JobHeldUser",
        "admin_comment": "allot-governed",
        "comment": "",
        "user_name": "ann",
        "account": "A1",
        "name": "train",
        "tres_per_node": "gres:gpu:8",
        "node_count": 1,
        "time_minimum": 30,
        "submit_time": 1796485576,
        "partition": "governed",
        "array_job_id": 0,
        "array_task_id": None,
        "array_task_string": "",
        **extra,
    }


def test_a_held_tagged_job_is_a_candidate_with_its_options():
    (job,) = governed_candidates([held(admin_comment="allot-governed,requeue")])
    assert (job.slurm_ids, job.user, job.account, job.gpus) == (("7",), "ann", "a1", 8)
    assert (job.time_min_s, job.resumable, job.name) == (1800, True, "train")
    assert job.submitted_at.timestamp() == 1796485576


def test_gpus_come_from_gres_per_node_or_gpus_per_job():
    assert gpus_of({"tres_per_node": "gres:gpu:8", "node_count": 2}) == 16
    assert gpus_of({"tres_per_job": "gres:gpu:4"}) == 4
    assert gpus_of({"tres_per_node": "gres:gpu:a100:2"}) == 2
    assert gpus_of({}) == 0


def test_an_array_stands_for_its_pending_tasks_and_a_split_task_for_itself():
    assert task_ids(held(array_job_id=7, array_task_string="0-2,5%2")) == (
        "7_0",
        "7_1",
        "7_2",
        "7_5",
    )
    split = held(job_id=9, array_job_id=7, array_task_id=3)
    assert task_ids(split) == ("7_3",) and slurm_id_of(split) == "7_3"


def test_answered_untagged_or_released_jobs_are_no_candidates():
    assert governed_candidates([held(comment="allot-job:12 #3")]) == []
    assert governed_candidates([held(comment="allot-refused: no")]) == []
    assert governed_candidates([held(admin_comment="")]) == []
    assert governed_candidates([held(state_reason="Priority")]) == []


def test_records_of_governed_jobs_only():
    records = governed_records([held(), held(8, admin_comment=""), held(9, job_state="RUNNING")])
    assert set(records) == {"7", "9"} and records["7"].held and not records["9"].held


def test_a_waiting_governed_job_is_neither_allot_s_attempt_nor_foreign():
    assert cluster_job_of(held(comment="allot-job:12 #1")) is None
    assert cluster_job_of(held()) is None
    untagged = cluster_job_of(held(admin_comment=""))
    assert untagged is not None and untagged.attempt_id == ""  # foreign, as before


def test_a_requeue_held_governed_job_after_allot_s_stop_is_stopped():
    job = cluster_job_of(held(comment="allot-attempt:allot-1-0-x,stop-by:5"))
    assert job.state == ClusterJobState.STOPPED and job.attempt_id == "allot-1-0-x"
    plain = cluster_job_of(held(comment="allot-attempt:allot-1-0-x", admin_comment=""))
    assert plain.state == ClusterJobState.STARTING


def test_the_waiting_comment_says_position_reason_and_eta():
    text = waiting_comment(12, 3, "waiting:  over its share", "2026-12-05 16:40")
    assert text == "allot-job:12 #3 waiting: over its share ETA 2026-12-05 16:40"
    assert waiting_comment(12, None, "", "") == "allot-job:12"
    long = waiting_comment(12, 3, "waiting: " + "x" * 500, "2026-12-05 16:40")
    assert len(long) == 400 and long.endswith(" ETA 2026-12-05 16:40")  # the reason is cut


NOW = dt.datetime(2026, 12, 5, 16, 0, tzinfo=dt.UTC)
SHARE = "waiting: project a1 is at {}% of its entitled share over 7 days (fair-share rank 3 of 20)"


def answer(position=3, pct="40", eta="2026-12-05 18:00", job=12) -> str:
    return waiting_comment(job, position, SHARE.format(pct), eta)


def test_a_comment_is_rewritten_only_when_its_reader_learns_something():
    shown = answer()
    assert not comment_news(shown, shown, NOW)
    # drift: a share a few points off, an ETA a few minutes or a tenth of the wait off
    assert not comment_news(shown, answer(pct="43"), NOW)
    assert not comment_news(shown, answer(eta="2026-12-05 18:04"), NOW)
    assert not comment_news(shown, answer(eta="2026-12-05 18:11"), NOW)  # 2 h left: 12 min
    # news: another job or position, a share 5 points off, counts, words, an ETA moved
    assert comment_news("", shown, NOW)
    assert comment_news(shown, answer(job=13), NOW)
    assert comment_news(shown, answer(position=2), NOW)
    assert comment_news(answer(position=11), answer(position=10), NOW)  # the first ten
    assert not comment_news(answer(position=409), answer(position=406), NOW)  # far back
    assert comment_news(answer(position=409), answer(position=368), NOW)  # a tenth
    assert comment_news(shown, answer(pct="45"), NOW)
    assert comment_news(shown, shown.replace("rank 3", "rank 4"), NOW)
    assert comment_news(shown, shown.replace("waiting:", "held:"), NOW)
    assert comment_news(shown, answer(eta="2026-12-05 18:20"), NOW)
    assert comment_news(answer(eta=""), shown, NOW)
    # no ETA this time (the forecast leaves some jobs out at times): the one shown stands
    assert not comment_news(shown, answer(eta=""), NOW)
    # an ETA that has passed is corrected however little the new one moved, or taken away
    late = NOW + dt.timedelta(hours=2, minutes=1)
    assert comment_news(shown, answer(eta="2026-12-05 18:02"), late)
    assert comment_news(shown, answer(eta=""), late)
