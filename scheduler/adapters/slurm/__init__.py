"""The Slurm cluster adapter: Allot decides order, placement and preemption; Slurm runs.

`SlurmAdapter` implements `scheduler.adapters.base.ClusterAdapter` on top of one small
`SlurmClient`, which talks to slurmctld through Slurm's own command-line tools
(sbatch, scontrol, squeue --json, sinfo --json, scancel): they exist on every Slurm
host and need no extra daemon. slurmrestd is not used.

How Allot's verbs map onto Slurm (checked against Slurm 22.05, recipe in docs/slurm.md):

- start: `sbatch --hold --nodelist=<hosts Allot chose> --gres=gpu:<n> --no-requeue`
  with the attempt id stamped in the job's comment (`allot-attempt:<id>`), then
  `scontrol release`. Slurm picks the GPU indices on those hosts; `jobs()` reports
  the ones it gave (squeue's `gres_detail`, the same as `scontrol show job -d`), and
  the cycle records them on the attempt. Adopt-before-retry: before submitting, and
  after a submit that timed out or failed, the attempt id is looked up in Slurm; a job
  that is there is adopted (node list set again, released), never submitted twice.
- stop: the comment gets `,stop-by:<epoch>`, then `scancel --signal=TERM --batch`
  reaches the job script's trap, which forwards SIGTERM to the command's process
  group; once the grace period is over (`grace_s` <= 0 or the stamped deadline
  passed) `scancel` ends the job. A stopped job is requeued by Allot (a new attempt),
  never by Slurm (`--no-requeue`).
- jobs: `squeue --json` (every job slurmctld still knows, ended ones for MinJobAge
  seconds). Jobs with an attempt id map to `ClusterJob`s; jobs without one are
  reported as foreign (`attempt_id=""`) and never touched.
- hosts: `sinfo --json`: every node with GPUs (in `partition` when given); DOWN,
  NOT_RESPONDING, FUTURE, POWERED_DOWN -> down; DRAIN/FAIL -> draining, with Slurm's
  reason. `set_host_health` drains (`scontrol update nodename=X state=drain
  reason=...`) or resumes (`state=resume`) the node.

Limits: with no slurmdbd a job slurmctld has purged (MinJobAge after its end) is
gone; an attempt the cycle had not seen end by then is reported lost by the cycle's
reconcile. Slurm, not Allot, picks GPU indices inside a host. The job's `image` is
ignored (the command runs directly on the node).

Plain Python (no Django), so it can be tested and benchmarked on its own. Modules:
`parsing` (Slurm's output), `client` (the commands), `script` (the batch script),
`adapter` (the verbs).
"""

from scheduler.adapters.slurm.adapter import SlurmAdapter, adapter_for_cluster
from scheduler.adapters.slurm.client import CallStats, CommentWrites, SlurmClient, SubmitOptions
from scheduler.adapters.slurm.parsing import (
    ABANDONED_MARK,
    COMMENT_PREFIX,
    STOP_MARK,
    SlurmTimeout,
    attempt_comment,
    cluster_job_of,
    gpu_indices_of,
    gpus_in_gres,
    host_of,
    parse_attempt_comment,
    parse_index_list,
    parse_show_job,
    placements_of,
    scontrol_word,
)
from scheduler.adapters.slurm.script import SCRIPT_TEMPLATE, job_script

__all__ = [
    "ABANDONED_MARK",
    "COMMENT_PREFIX",
    "SCRIPT_TEMPLATE",
    "STOP_MARK",
    "CallStats",
    "CommentWrites",
    "SlurmAdapter",
    "SlurmClient",
    "SlurmTimeout",
    "SubmitOptions",
    "adapter_for_cluster",
    "attempt_comment",
    "cluster_job_of",
    "gpu_indices_of",
    "gpus_in_gres",
    "host_of",
    "job_script",
    "parse_attempt_comment",
    "parse_index_list",
    "parse_show_job",
    "placements_of",
    "scontrol_word",
]
