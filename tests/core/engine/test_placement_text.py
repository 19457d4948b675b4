"""One way to write where a job runs: the engine's start reason, a running job's stored
reason and a move's reason all read `h013[0-7]` (they wrote `h013 GPUs 0,1,...,7` and
`h013[0-7]` for the same placement)."""

from __future__ import annotations

from allot_common.placements import host_gpus_text
from scheduler.services.transitions import running_reason


def test_one_gpu_a_block_and_scattered_gpus():
    assert host_gpus_text("h013", [6]) == "h013[6]"
    assert host_gpus_text("h013", range(8)) == "h013[0-7]"
    # not contiguous: every GPU is named (a block's first-last would claim 2 and 3)
    assert host_gpus_text("h013", [4, 0, 1]) == "h013[0-1,4]"
    assert host_gpus_text("h013", [1, 3, 5, 6]) == "h013[1,3,5-6]"


def test_a_running_reason_writes_placements_as_the_engine_does():
    rows = [{"host": "h000", "gpu_indices": list(range(8))}, {"host": "h001", "gpu_indices": [0]}]
    assert running_reason(rows, 2) == "running on h000[0-7], h001[0] (attempt 2)"


def test_a_wide_job_names_its_first_hosts_and_a_count():
    rows = [{"host": f"h{i:03d}", "gpu_indices": list(range(8))} for i in range(64)]
    reason = running_reason(rows, 1)
    assert reason.startswith("running on h000[0-7], h001[0-7], h002[0-7], h003[0-7], h004[0-7]")
    assert reason.endswith("and 59 more hosts (attempt 1)")
