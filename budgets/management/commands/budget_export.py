import json

from django.core.management.base import BaseCommand, CommandError

from budgets.services import budget_tree_export
from config.errors import ApplicationError


class Command(BaseCommand):
    help = "Print the budget tree as JSON in the import format."

    def add_arguments(self, parser):
        parser.add_argument(
            "--root", default=None, help="name of the tree to export (default: the first)"
        )

    def handle(self, *args, root: str | None, **options):
        try:
            data = budget_tree_export(root_name=root)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(json.dumps(data, indent=2))
