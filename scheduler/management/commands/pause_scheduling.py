"""`manage.py pause_scheduling --reason TEXT`: stop every cluster's cycles until
`manage.py reconcile_restore` (before a restore in place, or to hold the scheduler for
maintenance)."""

from __future__ import annotations

import getpass

from django.core.management.base import BaseCommand, CommandError

from ops.selectors import scheduling_paused
from ops.services import scheduling_pause


class Command(BaseCommand):
    help = (
        "Pause scheduling on this database: no cycle runs, /healthz says 'paused' and every "
        "page shows the reason, submissions are accepted and wait. `manage.py "
        "reconcile_restore` reconciles every cluster and resumes."
    )

    def add_arguments(self, parser):
        parser.add_argument("--reason", required=True, help="Shown on every page and by /healthz.")

    def handle(self, *args, reason: str, **options):
        reason = reason.strip()
        if not reason:
            raise CommandError("--reason: say why scheduling is paused (it is shown to users).")
        scheduling_pause(reason=f"{reason} (paused by {getpass.getuser()})")
        self.stdout.write(self.style.SUCCESS(f"scheduling paused: {scheduling_paused()}"))
