"""pghistory_context (who made each recorded change of nodes, memberships and authority)
becomes append-only: a row is never deleted, and an update may only add keys to its
metadata (pghistory's upsert when a context gains metadata) and move updated_at. Issue 32.
A plain trigger, not a pgtrigger one: the table is pghistory's, and pgtrigger.ignore must
not reach it. Its name says append_only, as the other audited tables' triggers do."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION allot_history_context_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'pghistory_context is append-only: its rows cannot be deleted'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.id IS DISTINCT FROM OLD.id
        OR NEW.created_at IS DISTINCT FROM OLD.created_at
        OR jsonb_typeof(OLD.metadata) IS DISTINCT FROM 'object'
        OR jsonb_typeof(NEW.metadata) IS DISTINCT FROM 'object'
        OR EXISTS (
            SELECT 1 FROM jsonb_each(OLD.metadata) AS kept
            WHERE NEW.metadata -> kept.key IS DISTINCT FROM kept.value
        )
    THEN
        RAISE EXCEPTION 'pghistory_context is append-only: an update may only add keys to its metadata (context %)', OLD.id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS allot_history_context_append_only ON pghistory_context;
CREATE TRIGGER allot_history_context_append_only
    BEFORE UPDATE OR DELETE ON pghistory_context
    FOR EACH ROW EXECUTE FUNCTION allot_history_context_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS allot_history_context_append_only ON pghistory_context;
DROP FUNCTION IF EXISTS allot_history_context_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0001_initial"),
        ("pghistory", "0007_auto_20250421_0444"),
    ]

    operations = [migrations.RunSQL(CREATE, DROP)]
