import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from budgets.services import budget_tree_import
from config.errors import ApplicationError


class Command(BaseCommand):
    help = "Create or update the budget tree from a JSON file (atomic: an invalid file changes nothing)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--reason", default="Imported budget tree")

    def handle(self, *args, file: Path, reason: str, **options):
        try:
            data = json.loads(file.read_text())
        except FileNotFoundError:
            raise CommandError(f"{file}: no such file") from None
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from None
        try:
            root = budget_tree_import(data=data, reason=reason)
        except ApplicationError as exc:
            raise CommandError(f"{file}: {exc.message}") from None
        self.stdout.write(self.style.SUCCESS(f"Imported tree '{root.name}'."))
