"""The live scheduling cycle of a cluster: reconcile with the adapter, plan, apply.

`CycleWorker.run(cluster_id=)` (`worker.py`) runs one cycle under a PostgreSQL advisory
lock per cluster (`lock.py`: a second concurrent cycle of the same cluster returns None
at once) and writes a `CycleRecord`. The worker object owns what a worker process keeps
between cycles: the warm engine state per cluster (`warm.py`) and the Redis client of
the cycle requests; the Celery tasks (`scheduler.tasks`) hold one per process.

0. Apply the budget changes now due (`budgets.services.budget_apply_due_changes`, in
   `CycleWorker.run`), so that the decision uses the weights in force.
1. Read the cluster through its adapter (`adapter_io.py`: `hosts()`, `jobs()`). If it
   cannot be reached the cycle records the error and changes nothing.
2. Reconcile (`reconcile.py`, one transaction): hosts mirrored into `Host` rows with
   `HostEvent`s (`hosts.py`); open attempts brought in line with what the cluster
   reports (`attempts.py`): confirmed starts become RUNNING, ended runs ENDED with their
   end reason and the job's next state, STARTING attempts the cluster never got fail
   back to PENDING, running attempts it no longer knows are lost. Then, after commit,
   stops are resent for every STOPPING attempt (with no grace left once its deadline
   passed) and Allot's drains are pushed.
3. Snapshot (`scheduler.selectors.snapshot`) and `plan()` with the warm state.
4. Apply (`apply.py`, one transaction, then the adapter): stops first (attempt STOPPING
   with its intent and deadline, a job event naming the preempting job, its project
   and the rule), then starts (the Attempt is committed STARTING *before*
   `adapter.start`, so a crash leaves a record that the next reconcile heals: adopted
   if the cluster has it, else failed and requeued; never started twice). A start that
   needs GPUs of a job being stopped waits: GPUs are free only when the cluster reports
   the end. Hosts the engine reports empty and unhealthy get `ready_for_repair_at`.
5. The explained queue is stored in the cluster's `QueueSnapshot` (`queue_store.py`).

`run.py` runs the steps in order and records the cycle (`context.py`: what the steps
share); `beat.py` has the periodic helpers (which clusters are due, retention). Every
attempt state change goes through `scheduler.services.transitions.attempt_transition`.

Crash safety: every database step commits before the adapter call that depends on
it, and every adapter call is repeated or checked by the next reconcile.
"""
