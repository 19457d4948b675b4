"""gunicorn's access log with each atom computed when the line's format asks for it.

gunicorn builds every atom for every request before formatting its line: the request
line and times, and one entry per request header, response header and WSGI environ
variable (~50), each copied again to escape its quotes (`SafeAtoms`), while the line
(config/gunicorn.py `access_log_format`) uses six. `AccessLogger` hands the logging
call a mapping that computes the atoms of the common format (`h r s b M` and the
response headers, `{name}o`) on demand, with gunicorn's definitions and escaping, and
falls back to gunicorn's own atoms for any other; the lines are the same
(tests/ops/test_access_log.py)."""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Mapping
from typing import Any

from gunicorn.glogging import Logger, SafeAtoms


def _escaped(value: Any) -> Any:
    """`SafeAtoms`' escaping of one value."""
    return value.replace('"', '\\"') if isinstance(value, str) else value


class LazyAtoms(Mapping):
    """What `SafeAtoms(logger.atoms(...))` maps, computed per key when read."""

    def __init__(self, logger: Logger, resp, req, environ, request_time) -> None:
        self._logger = logger
        self._args = (resp, req, environ, request_time)
        self._all: SafeAtoms | None = None
        self._out: dict[str, Any] | None = None

    def _everything(self) -> SafeAtoms:
        if self._all is None:
            self._all = SafeAtoms(self._logger.atoms(*self._args))
        return self._all

    def _response_header(self, key: str) -> Any:
        if self._out is None:  # later headers of one name win, as in gunicorn's dict
            self._out = {name.lower(): value for name, value in self._args[0].headers}
        return _escaped(self._out.get(key[1:-2], "-"))

    def __getitem__(self, key: str) -> Any:
        resp, _, environ, request_time = self._args
        if key == "h":
            return _escaped(environ.get("REMOTE_ADDR", "-"))
        if key == "r":
            method, uri, protocol = (
                environ["REQUEST_METHOD"],
                environ["RAW_URI"],
                environ["SERVER_PROTOCOL"],
            )
            return _escaped(f"{method} {uri} {protocol}")
        if key == "s":
            status = resp.status
            return _escaped(status.split(None, 1)[0] if isinstance(status, str) else status)
        if key == "b":
            sent = getattr(resp, "sent", None)
            return sent is not None and str(sent) or "-"
        if key == "M":
            return request_time.seconds * 1000 + int(request_time.microseconds / 1000)
        if key.startswith("{") and key.lower().endswith("}o"):
            return self._response_header(key.lower())
        return self._everything()[key]

    def __bool__(self) -> bool:  # logging asks; the length would build every atom
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._everything())

    def __len__(self) -> int:
        return len(self._everything()) or 1


class AccessLogger(Logger):
    """gunicorn's logger, its access lines formatted from `LazyAtoms`."""

    def access(self, resp, req, environ, request_time) -> None:
        if not self.access_log_enabled:
            return
        try:
            self.access_log.info(
                self.cfg.access_log_format, LazyAtoms(self, resp, req, environ, request_time)
            )
        except Exception:
            self.error(traceback.format_exc())
