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
on it as the request's first statement now does."""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg import pq


def socket_quiet(fd: int) -> bool:
    """True when the socket `fd` has nothing to read and no error or hang-up, now
    (poll with no wait)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)  # POLLERR, POLLHUP: always told
    return not poller.poll(0)


class DatabaseWrapper(base.DatabaseWrapper):
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
