"""`manage.py reconcile_restore`: after restoring a backup, reconcile every cluster with
what it really ran since, then resume scheduling (scheduler.services.restore)."""

from __future__ import annotations

import getpass

from django.core.management.base import BaseCommand, CommandError

from ops.selectors import scheduling_paused
from scheduler.services.restore import RestoreReconcileFailed, restore_reconcile


class Command(BaseCommand):
    help = (
        "After a restore: bring the database in line with every cluster (runs that "
        "started, finished or were cancelled since the backup) and resume scheduling, "
        "which stays paused on a restored database until this succeeds. Stop the workers "
        "and beat first; exits non-zero, still paused, when a cluster cannot be read."
    )

    def handle(self, *args, **options):
        paused = scheduling_paused()
        self.stdout.write(
            f"scheduling is paused: {paused}" if paused else "scheduling is not paused"
        )
        try:
            report = restore_reconcile(by=f"{getpass.getuser()} (manage.py reconcile_restore)")
        except RestoreReconcileFailed as exc:
            raise CommandError(str(exc)) from exc
        for cluster in report.clusters:
            adopted = ", ".join(f"{n} {state}" for state, n in sorted(cluster.adopted.items()))
            self.stdout.write(
                f"{cluster.name}: {cluster.rounds} rounds; adopted runs: {adopted or 'none'}; "
                f"attempts reconciled: {cluster.reconciled}"
            )
            if cluster.unknown_runs:
                self.stdout.write(
                    f"  {len(cluster.unknown_runs)} runs of jobs this database does not have "
                    f"(submitted after the backup; left running): "
                    + ", ".join(cluster.unknown_runs[:20])
                )
        self.stdout.write(
            f"{report.pending_jobs} jobs are pending (a job cancelled while pending after "
            "the backup is among them: nothing outside the database recorded that cancel)"
        )
        self.stdout.write(self.style.SUCCESS("scheduling resumed"))
