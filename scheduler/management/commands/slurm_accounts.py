"""`manage.py slurm_accounts [--cluster NAME] [--check]`: projects and Slurm accounts."""

from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from scheduler.models import AdapterKind, Cluster
from scheduler.services.slurm import slurm_accounts_drift


class Command(BaseCommand):
    help = (
        "List how the budget tree's projects map to Slurm accounts (a project's slug is "
        "its account); --check reports drift both ways and exits 1 when there is any."
    )

    def add_arguments(self, parser):
        parser.add_argument("--cluster", help="the Slurm cluster (default: the only one)")
        parser.add_argument("--check", action="store_true", help="exit 1 when there is drift")

    def handle(self, *args, cluster: str | None, check: bool, **options):
        row = self._cluster(cluster)
        try:
            drift = slurm_accounts_drift(cluster=row)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        out = self.stdout
        out.write(f"Slurm accounts of {row.name}: {len(drift.accounts)}, from {drift.source}")
        if not drift.accounts:
            out.write(
                "  Slurm defines no accounts here: it accepts any --account unchecked, so "
                "every project below is reported without one."
            )
        for account, paths in drift.projects.items():
            mark = "ok" if account in drift.accounts else "NO ACCOUNT"
            out.write(f"  {account:<24} {mark:<10} {', '.join(paths)}")
        for title, items in (
            ("projects without a Slurm account", drift.projects_without_account),
            ("Slurm accounts without a project", drift.accounts_without_project),
            (
                "accounts shared by several projects (same slug)",
                [f"{a}: {', '.join(p)}" for a, p in drift.shared_accounts.items()],
            ),
        ):
            if items:
                out.write(f"{title} ({len(items)}):")
                for item in items:
                    out.write(f"  {item}")
        if check:
            if drift.drift:
                raise CommandError(
                    "drift between the budget tree and Slurm's accounts", returncode=1
                )
            out.write("no drift")

    def _cluster(self, name: str | None) -> Cluster:
        if name:
            row = Cluster.objects.filter(name=name).first()
            if row is None:
                raise CommandError(f"there is no cluster named {name!r}")
            if row.adapter != AdapterKind.SLURM:
                raise CommandError(
                    f"cluster {name!r} is a {row.adapter} cluster (adapter {row.adapter!r}), "
                    "not a Slurm one: Slurm accounts exist on Slurm clusters only"
                )
            return row
        rows = list(Cluster.objects.filter(adapter=AdapterKind.SLURM)[:2])
        if len(rows) != 1:
            raise CommandError(
                "name the Slurm cluster with --cluster" if rows else _no_slurm_cluster()
            )
        return rows[0]


def _no_slurm_cluster() -> str:
    """Why there is no cluster to read accounts of, naming the clusters there are."""
    others = list(Cluster.objects.order_by("name").values_list("name", "adapter")[:10])
    if not others:
        return "there is no cluster (add a Slurm one with cluster_add --adapter slurm)"
    named = ", ".join(f"{name} ({adapter})" for name, adapter in others)
    return f"there is no Slurm cluster; the clusters here are not Slurm ones: {named}"
