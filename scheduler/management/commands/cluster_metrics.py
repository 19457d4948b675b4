"""`manage.py cluster_metrics NAME --reason TEXT [--prometheus-url URL] [--host-label L]
[--gpu-label L] [--selector 'k="v"'] [--bearer-token-file PATH]`: where a cluster's GPU
metrics are read (docs/concepts.md#utilization), audited. An empty URL goes back to
reading a simulated cluster's own metrics (other clusters: utilization unknown)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from scheduler.models import Cluster
from scheduler.services.utilization import cluster_metrics_update

OPTIONS = {
    "prometheus_url": "Prometheus's base URL (http:// or https://); '' for none",
    "host_label": "the label naming the host (DCGM exporter: Hostname)",
    "gpu_label": "the label naming the GPU index (DCGM exporter: gpu)",
    "selector": 'extra label matchers, e.g. cluster="a100"',
}


class Command(BaseCommand):
    help = (
        "Change where a cluster's GPU utilization is read: only the options given change; "
        "the change is checked and recorded with the reason (the system as its actor)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="the cluster's name")
        parser.add_argument("--reason", required=True, help="why, for the audit trail")
        for field, text in OPTIONS.items():
            parser.add_argument(f"--{field.replace('_', '-')}", dest=field, help=text)
        parser.add_argument(
            "--bearer-token-file",
            help="a file holding the bearer token Prometheus asks for (never on the command line)",
        )

    def handle(self, *args, **options):
        changes = {field: options[field] for field in OPTIONS if options[field] is not None}
        if options["bearer_token_file"]:
            try:
                changes["bearer_token"] = Path(options["bearer_token_file"]).read_text().strip()
            except OSError as exc:
                raise CommandError(f"--bearer-token-file: {exc}") from None
        cluster = Cluster.objects.filter(name=options["name"]).first()
        if cluster is None:
            raise CommandError(f"there is no cluster named {options['name']!r}")
        try:
            metrics = cluster_metrics_update(
                actor=None, cluster_id=cluster.pk, changes=changes, reason=options["reason"]
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        source = metrics.prometheus_url or "the simulated cluster's own metrics (if simulated)"
        self.stdout.write(f"{cluster.name}: GPU metrics from {source}")
