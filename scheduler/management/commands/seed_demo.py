from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from budgets.demo import DEMO_LOGINS, DEMO_PASSWORD, DEMO_ROOT
from budgets.models import BudgetNode
from budgets.services import budget_tree_import
from scheduler.services.clusters import ClusterUnreachable
from scheduler.services.demo import demo_backfill, demo_cluster_ensure

DEMO_TREE = {
    "name": DEMO_ROOT,
    "managers": ["ceo"],
    "children": [
        {
            "name": "language-models",
            "weight": 50,
            "managers": ["manager"],
            "children": [
                {
                    "name": "pretraining",
                    "weight": 60,
                    "managers": ["pi-pretraining"],
                    "members": ["researcher"],
                },
                {"name": "post-training", "weight": 25, "members": ["researcher", "ann"]},
                {"name": "evaluation", "weight": 10, "members": ["bob"]},
                {"name": "tokenizers", "weight": 5, "members": ["ann"]},
            ],
        },
        {
            "name": "multimodal",
            "weight": 30,
            "managers": ["lead-multimodal"],
            "children": [
                {"name": "vision", "weight": 50, "members": ["carol"]},
                {"name": "speech", "weight": 30, "members": ["dave"]},
                {"name": "video", "weight": 20, "members": ["carol"]},
            ],
        },
        {
            "name": "science",
            "weight": 20,
            "managers": ["lead-science"],
            "children": [
                {"name": "climate", "weight": 40, "members": ["erin"]},
                {"name": "biology", "weight": 40, "members": ["frank"]},
                {"name": "sandbox", "weight": 0, "members": ["researcher"]},
            ],
        },
    ],
}


class Command(BaseCommand):
    help = (
        "Create the demo organisation, its users, its simulated cluster and 14 days of "
        "back-filled history (idempotent)."
    )

    def handle(self, *args, **options):
        if not BudgetNode.objects.filter(parent=None, name=DEMO_TREE["name"]).exists():
            budget_tree_import(data=DEMO_TREE, reason="Demo organisation")
        users = get_user_model().objects
        for username in ("ceo", "manager", "researcher"):
            user = users.get(username=username)
            if not user.has_usable_password():
                user.set_password(DEMO_PASSWORD)
                user.save(update_fields=["password"])
        if not users.filter(username="admin").exists():
            users.create_superuser("admin", "admin@example.com", DEMO_PASSWORD)
        self._cluster_and_history()
        logins = ", ".join(f"{name} ({what})" for name, what in DEMO_LOGINS)
        self.stdout.write(f"Demo logins (password '{DEMO_PASSWORD}'): {logins}.")

    def _cluster_and_history(self) -> None:
        """The demo's simulated cluster and its back-filled history (needs the simulated
        cluster process, which the back-fill starts the runs it hands over on: `make run`
        starts it first)."""
        try:
            cluster = demo_cluster_ensure()
        except ClusterUnreachable as exc:
            self.stderr.write(f"Demo cluster not added: {exc}")
            return
        root = BudgetNode.objects.get(parent=None, name=DEMO_TREE["name"])
        days = settings.ALLOT_DEMO_BACKFILL_DAYS
        if days > 0:
            counts = demo_backfill(root=root, cluster=cluster, days=days)
            if "skipped" not in counts:
                self.stdout.write(
                    f"Demo history: {days:g} days of {cluster.name} back-filled through the "
                    f"simulator ({counts['jobs']} jobs, {counts['attempts']} runs) in "
                    f"{counts['seconds']:.1f} s; handed over to the live cluster: "
                    f"{counts['started']} jobs running, {counts['pending']} waiting."
                )
