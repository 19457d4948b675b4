"""What-if previews stored before the p90 replay wait got its own key (commit 5845754:
`p90_wait_s_before` / `_after` became `p90_replay_wait_s_before` / `_after`) keep their
figures: their result rows are rewritten to the new keys, so the page, the API and every
reader find them under the one name (docs/concepts.md#replay-wait)."""

from django.db import migrations

OLD_TO_NEW = {
    "p90_wait_s_before": "p90_replay_wait_s_before",
    "p90_wait_s_after": "p90_replay_wait_s_after",
}


def renamed_rows(result, old_to_new=OLD_TO_NEW):
    """The result with each project row's old keys renamed (a new key already there
    wins); None when nothing changed. Migration 0015 renames its keys with it too."""
    if not isinstance(result, dict) or not isinstance(result.get("projects"), list):
        return None
    changed = False
    rows = []
    for row in result["projects"]:
        if isinstance(row, dict) and any(old in row for old in old_to_new):
            row = dict(row)
            for old, new in old_to_new.items():
                if old in row:
                    value = row.pop(old)
                    row.setdefault(new, value)
            changed = True
        rows.append(row)
    return {**result, "projects": rows} if changed else None


def rename_preview_keys(apps, schema_editor, old_to_new=OLD_TO_NEW):
    Preview = apps.get_model("scheduler", "Preview")
    stale = Preview.objects.filter(result__isnull=False).only("pk", "result")
    for preview in stale.iterator(chunk_size=200):
        result = renamed_rows(preview.result, old_to_new)
        if result is not None:
            Preview.objects.filter(pk=preview.pk).update(result=result)


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0011_utilization"),
    ]

    operations = [
        migrations.RunPython(rename_preview_keys, migrations.RunPython.noop),
    ]
