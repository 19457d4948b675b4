"""Django's PostgreSQL backend, its health check without a statement on a quiet
connection.

Persistent connections (CONN_MAX_AGE) are checked when a request first uses one
(CONN_HEALTH_CHECKS). Django's check runs `SELECT 1`: a round trip, about as much of a
request's CPU as any of its statements, on every request. A connection that PostgreSQL
closed (a restart, a failover, a terminated backend, an idle timeout) has something to
read on its socket while it sits idle between requests: the server's FATAL message or
the end of the stream. So the check looks at the socket first, without waiting: nothing
to read, the connection is idle and not broken -> usable, no statement; anything to read
(or any doubt) -> Django's `SELECT 1`, which answers as before. A server that vanished
without closing (no FIN) shows nothing to read either way: `SELECT 1` would have waited
on it as the request's first statement now does.

Prepared statements (`DatabaseWrapper.prepared_cursor`, `config.plainsql`'s
`prepared=True`): the few plain statements every submission or API request runs are
parsed and planned once per connection instead of on each request (PostgreSQL spent more
CPU parsing and planning a submission's three statements than running them). Django keeps
psycopg's automatic preparation off (`prepare_threshold` None, for connection poolers)
and binds the ORM's parameters client-side; that stays so. A prepared cursor binds
server-side and asks
psycopg to prepare its statement, switching psycopg's preparation on only while it
runs, so no ORM statement is counted or prepared. `ALLOT_DB_PREPARED=false` (the
settings' `PREPARED_STATEMENTS`) runs them unprepared, for a pooler that cannot keep
prepared statements (PgBouncer in transaction mode before 1.21)."""

from __future__ import annotations

import select

from django.db.backends.postgresql import base, operations
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.utils.asyncio import async_unsafe
from psycopg import pq
from psycopg.pq import Format

# psycopg's preparation threshold while a prepared cursor runs: any value switches its
# statement cache on; the cursor asks for its statement to be prepared at once.
_PREPARING = 1


class PreparedCursor(base.ServerBindingCursor):
    """Django's server-side binding cursor; each statement is prepared on the connection
    the first time it runs and executed by name afterwards (psycopg keeps the names, up
    to its `prepared_max`)."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        conn = self.connection
        if conn.prepare_threshold is not None:  # preparation on for the connection already
            return super().execute(query, params, prepare=True, binary=binary)
        conn.prepare_threshold = _PREPARING
        try:
            return super().execute(query, params, prepare=True, binary=binary)
        finally:
            conn.prepare_threshold = None


def socket_quiet(fd: int) -> bool:
    """True when the socket `fd` has nothing to read and no error or hang-up, now
    (poll with no wait)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)  # POLLERR, POLLHUP: always told
    return not poller.poll(0)


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor, sql, params):
        """A prepared statement's text with its parameters in place (as Django gives
        it for server-side binding), for the debug log and CaptureQueriesContext."""
        if isinstance(cursor, PreparedCursor):
            try:
                return self.compose_sql(sql, params)
            except base.Database.DataError:
                return None
        return super().last_executed_query(cursor, sql, params)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    @async_unsafe
    def prepared_cursor(self):
        """A cursor like `cursor()` (health check, error wrapping, execute wrappers and
        the debug log alike) whose statements are prepared once per connection; an
        ordinary one where the settings say `PREPARED_STATEMENTS: False`
        (`ALLOT_DB_PREPARED=false`)."""
        if not self.settings_dict.get("PREPARED_STATEMENTS", True):
            return self.cursor()
        self.close_if_health_check_failed()
        self.ensure_connection()
        with self.wrap_database_errors:
            cursor = PreparedCursor(self.connection)
            tzloader = self.connection.adapters.get_loader(base.TIMESTAMPTZ_OID, Format.TEXT)
            if self.timezone != tzloader.timezone:
                register_tzloader(self.timezone, cursor)
            return self._prepare_cursor(cursor)

    def is_usable(self) -> bool:
        """Usable without a statement when the connection is open, idle outside a
        transaction and nothing arrived on its socket since its last answer; else
        Django's check (`SELECT 1`)."""
        conn = self.connection
        if conn is None:
            return False
        try:
            pgconn = conn.pgconn
            quiet = (
                not conn.closed
                and pgconn.status == pq.ConnStatus.OK
                and pgconn.transaction_status == pq.TransactionStatus.IDLE
                and socket_quiet(pgconn.socket)
            )
        except (OSError, ValueError, base.Database.Error):
            quiet = False
        return True if quiet else super().is_usable()
