"""Django's database sessions, the session of a page request read in one plain
statement (`config.plainsql`: the ORM query cost more than the lookup, and every signed-in
page reads its session). Same table, same rows, same expiry rule: only the read differs."""

from __future__ import annotations

from typing import Any

from django.contrib.sessions.backends import db
from django.utils import timezone

from config.plainsql import columns, fetch_one, instance


class SessionStore(db.SessionStore):
    def _get_session_from_db(self) -> Any:
        model = self.model
        sql = (
            f'SELECT {columns(model, "s")} FROM "{model._meta.db_table}" s '
            'WHERE s."session_key" = %s AND s."expire_date" > %s'
        )
        row = fetch_one(sql, [self.session_key, timezone.now()])
        if row is None:
            self._session_key = None
            return None
        return instance(model, row)[0]
