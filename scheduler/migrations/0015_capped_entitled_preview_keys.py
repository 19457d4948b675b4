"""What-if previews stored before the demand-capped entitlement got its own name
(`entitled_gpu_h_before` / `_after` / `_recorded` became `capped_entitled_gpu_h_*`, so
that "entitled GPU-hours" is only the budget tree's uncapped figure) keep their figures:
their result rows are rewritten to the new keys (docs/concepts.md#demand-capped-entitlement)."""

import importlib

from django.db import migrations

OLD_TO_NEW = {
    "entitled_gpu_h_before": "capped_entitled_gpu_h_before",
    "entitled_gpu_h_after": "capped_entitled_gpu_h_after",
    "entitled_gpu_h_recorded": "capped_entitled_gpu_h_recorded",
}
_keys = importlib.import_module("scheduler.migrations.0012_preview_keys")


def renamed_rows(result):
    """The result with each project row's old keys renamed (a new key already there
    wins); None when nothing changed."""
    return _keys.renamed_rows(result, OLD_TO_NEW)


def rename_preview_keys(apps, schema_editor):
    _keys.rename_preview_keys(apps, schema_editor, OLD_TO_NEW)


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0014_share_floor"),
    ]

    operations = [
        migrations.RunPython(rename_preview_keys, migrations.RunPython.noop),
    ]
