"""`manage.py cluster_set NAME --reason TEXT [--cycle-s N] [--grace-s N]
[--max-min-runtime 8h] [--short-reserve-hosts N] [--short-reserve-auto on|off]
[--share-floor on|off] [--consolidate on|off] [--reservation-admit-min 60]
[--short-job-max 15m] [--lookback 7d] [--half-life 3d|none] [--idle-reclaim on|off]
[--idle-threshold-pct 5] [--idle-after 30m] [--idle-notify on|off]`: change a cluster's
scheduling policy, audited."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from scheduler.management.options import (
    POLICY_OPTIONS,
    add_idle_arguments,
    add_policy_arguments,
    given_policy,
    idle_options,
    policy_options,
    refused,
)
from scheduler.models import Cluster
from scheduler.services.clusters import POLICY_FIELDS, cluster_policy_update


class Command(BaseCommand):
    help = (
        "Change a cluster's scheduling policy: only the options given change. The change "
        "is checked like cluster_add's options and recorded with the reason (the system "
        "as its actor); the cluster's next cycle uses it."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="the cluster's name")
        parser.add_argument("--reason", required=True, help="why, for the audit trail")
        add_policy_arguments(parser, defaults=False)
        add_idle_arguments(parser)
        parser.add_argument(
            "--lookback", help="the fair-share usage window, e.g. 7d, 36h (at least 1h)"
        )
        parser.add_argument(
            "--half-life",
            help="half-life of past usage in fair share, e.g. 3d; 'none': no decay",
        )

    def handle(self, *args, **options):
        changes = {**policy_options(options), **idle_options(options)}
        changes.update(given_policy(options, ("lookback_s",)))
        if options["half_life"] is not None and options["half_life"].strip().lower() == "none":
            changes["half_life_s"] = None
        else:
            changes.update(given_policy(options, ("half_life_s",)))
        if not changes:
            raise CommandError(
                "nothing to change: give one or more of "
                + ", ".join(option for option, _ in POLICY_OPTIONS.values())
            )
        name = options["name"]
        before = Cluster.objects.filter(name=name).values(*POLICY_FIELDS, "pk").first()
        if before is None:
            raise CommandError(f"there is no cluster named {name!r}")
        try:
            cluster = cluster_policy_update(
                actor=None, cluster_id=before["pk"], changes=changes, reason=options["reason"]
            )
        except ApplicationError as exc:
            raise refused(exc) from None
        changed = [
            f"{field} {before[field]} -> {getattr(cluster, field)}"
            for field in POLICY_FIELDS
            if before[field] != getattr(cluster, field)
        ]
        if changed:
            self.stdout.write(
                self.style.SUCCESS(f"Cluster '{cluster.name}': {', '.join(changed)}.")
            )
        else:
            self.stdout.write(f"Cluster '{cluster.name}': nothing changed.")
