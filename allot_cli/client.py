"""Talking to the server: where it is, the token, requests and their errors.

Requests go through the standard library, not httpx: importing httpx costs ~60-100 ms of
CPU (its own command line pulls in rich, click and pygments), more than the rest of an
`allot` call, which researchers' scripts make in loops. Like httpx's client it sends the
proxy settings of the environment (HTTP(S)_PROXY, NO_PROXY), follows no redirects and
checks an https server against certifi's certificates.

A plain-http server with no proxy for it in the environment (the usual case on a
cluster's network) is asked through http.client alone, without ssl (`_plain_http`):
urllib.request, which handles proxies and https, costs ~20 ms more CPU per call (ssl,
hashlib, tempfile); every other URL goes through urllib."""

from __future__ import annotations

import json
import os
import sys
import time
from http import HTTPStatus
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

if TYPE_CHECKING:
    import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_S = 30.0
RETRIES = 3  # transient failures (connection errors, 502/503/504) of safe requests

# Exit codes: 2 for input the server (or the CLI) refuses, 1 for everything else.
EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1

# API field -> the flag that sets it, so that errors name what the user typed.
FLAGS = {
    "project": "--project",
    "cluster": "--cluster",
    "name": "--name",
    "gpus": "--gpus",
    "min_runtime_s": "--min-runtime",
    "resumable": "--resumable",
    "priority": "--priority",
    "kind": "--kind",
    "spec": "--image/--command/--env",
    "spec.image": "--image",
    "spec.command": "--command",
    "spec.env": "--env",
    "duration_s": "--duration",
    "array": "--array",
    "step": "--step",
    "since": "--since",
    "until": "--until",
}

# The other spellings a flag takes (sbatch's own names, short flags): an error names the
# one the user typed.
ALIASES = {
    "--project": ("-A", "--account"),
    "--min-runtime": ("-t", "--time-min"),
    "--name": ("-J", "--job-name"),
    "--gpus": ("-G",),
    "--array": ("-a",),
    "--env": ("-e",),
}


def as_typed(flag: str, argv: list[str] | None = None) -> str:
    """`flag` as the command line spelled it (`--account` for `--project`), else `flag`."""
    words = sys.argv[1:] if argv is None else argv
    for spelling in ALIASES.get(flag, ()):
        if any(w == spelling or w.startswith(spelling + "=") for w in words):
            return spelling
    return flag


class CliError(Exception):
    """A failure to report to the user: `message` names the field; `code` is the exit code."""

    def __init__(self, message: str, *, code: int = EXIT_FAILURE, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.flag: str | None = None

    def with_flag(self, flag: str) -> CliError:
        """The same error, naming the command-line flag it is about."""
        self.flag = flag
        return self

    def __str__(self) -> str:
        if self.flag:
            return f"{as_typed(self.flag)}: {self.message}"
        if self.field:
            flag = FLAGS.get(self.field)
            if flag is None and self.field.startswith("spec.env."):
                flag = "--env"
            label = f"{as_typed(flag)} ({self.field})" if flag else self.field
            return f"{label}: {self.message}"
        return self.message


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "allot" / "config.json"


def load_config() -> dict[str, Any]:
    path = config_path()
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None


def save_config(data: dict[str, Any]) -> Path:
    """Write the config file readable by its owner only (it holds a token)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.chmod(path, 0o600)  # also when the file existed with wider permissions
    return path


class Settings:
    """Where the server is and the token to show it (None: none known)."""

    def __init__(self, url: str, token: str | None):
        self.url = url
        self.token = token


def settings(url: str | None = None) -> Settings:
    """Server URL and token: ALLOT_URL/ALLOT_TOKEN first, then `allot login`'s file."""
    stored = load_config()
    return Settings(
        url=(url or os.environ.get("ALLOT_URL") or stored.get("url") or DEFAULT_URL).rstrip("/"),
        token=os.environ.get("ALLOT_TOKEN") or stored.get("token"),
    )


class Answer:
    """The server's answer to one request: status, reason, body and the path asked.
    (A plain class: dataclasses' import is ~10 ms of CPU, a tenth of a call.)"""

    def __init__(self, status: int, reason: str, content: bytes, path: str):
        self.status = status
        self.reason = reason
        self.content = content
        self.path = path

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return json.loads(self.content)


def _error_from(response: Answer) -> CliError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    detail = body.get("detail") if isinstance(body, dict) else None
    field = body.get("field") if isinstance(body, dict) else None
    status = response.status
    if detail and field and detail.startswith(f"{field}: "):
        detail = detail[len(field) + 2 :]
    if status in (400, 422):
        return CliError(detail or f"refused ({status})", code=EXIT_BAD_INPUT, field=field)
    if status == 401:
        return CliError(
            f"not signed in ({detail or 'no valid token'}): run `allot login` or set ALLOT_TOKEN"
        )
    if 300 <= status < 400:  # no redirect is followed: a URL to fix, not an answer
        return CliError(
            f"the server redirects {response.path} (HTTP {status}): give its address as it "
            "serves it (https:// where plain http is redirected) with allot --url, or ALLOT_URL"
        )
    if status == 404 and not detail:
        return CliError(f"{response.path} does not exist on this server")
    if status == 404 and field in FLAGS:  # a flag's value names nothing: bad input, as 400
        return CliError(detail or "not found", code=EXIT_BAD_INPUT, field=field)
    return CliError(f"{detail or response.reason} (HTTP {status})", field=field)


def _query(params: dict[str, Any]) -> str:
    """Query parameters as httpx wrote them: None left out, booleans 'true'/'false'."""
    pairs = {
        k: ("true" if v else "false") if isinstance(v, bool) else v
        for k, v in params.items()
        if v is not None
    }
    return f"?{urlencode(pairs, doseq=True)}" if pairs else ""


def _opener(url: str) -> urllib.request.OpenerDirector:
    """A urllib opener that follows no redirect (a 3xx is an answer, as with httpx) and
    checks an https server against certifi's certificates (httpx's trust store)."""
    # urllib and ssl are imported here, not at the top: `allot --help` and the checks
    # that fail before any request never load the HTTP stack (start-up time).
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    handlers: list[urllib.request.BaseHandler] = [NoRedirect()]
    if url.startswith("https:"):
        import ssl

        try:
            import certifi

            context = ssl.create_default_context(cafile=certifi.where())
        except ImportError:  # pragma: no cover - certifi comes with the dependencies
            context = ssl.create_default_context()
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def _plain_http(url: str) -> bool:
    """Whether requests to `url` may skip urllib: plain http, and no proxy that urllib
    would send them through (an `http_proxy` variable in any case; on macOS and Windows,
    where urllib also reads the system's proxy settings, never)."""
    if not url.startswith("http:") or sys.platform in ("darwin", "win32"):
        return False
    return not any(k.lower() == "http_proxy" and v for k, v in os.environ.items())


def _http_client(plain: bool) -> ModuleType:
    """http.client; for plain http, one imported without ssl when none is loaded yet."""
    if plain and "http.client" not in sys.modules:
        return _http_client_without_ssl()
    import http.client

    return http.client


def _http_client_without_ssl() -> ModuleType:
    """A copy of http.client imported without ssl: it imports ssl only to offer
    HTTPSConnection, ~13 ms of CPU that a plain-http call never uses. The copy is the
    caller's alone (taken out of sys.modules again; an `Api` keeps it), so that anything
    else importing http.client or urllib later in the process gets them whole, https
    included."""
    blocked = "ssl" not in sys.modules
    if blocked:
        sys.modules["ssl"] = None  # type: ignore[assignment]  # `import ssl` fails
    try:
        import http.client as client
    finally:
        if blocked:
            del sys.modules["ssl"]
        sys.modules.pop("http.client", None)
    return client


def _send_plain(
    client: ModuleType, method: str, url: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, bytes]:
    """One request to a plain-http server through http.client, as urllib sends it (the
    same headers, `Connection: close`, no redirect followed)."""
    parts = urlsplit(url)
    target = f"{parts.path}?{parts.query}" if parts.query else parts.path
    connection = client.HTTPConnection(parts.hostname or "", parts.port, timeout=TIMEOUT_S)
    try:
        connection.request(method, target, body=body, headers={**headers, "Connection": "close"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class Api:
    """A thin HTTP client for /api/v1/ with the token and error mapping."""

    def __init__(self, conf: Settings, *, need_token: bool = True):
        if need_token and not conf.token:
            raise CliError("no API token: run `allot login` or set ALLOT_TOKEN")
        headers = {"Accept": "application/json", "User-Agent": "allot-cli"}
        if conf.token:
            headers["Authorization"] = f"Token {conf.token}"
        if not conf.url.startswith(("http://", "https://")):
            raise CliError(
                f"the server's URL must start with http:// or https://, got {conf.url!r} "
                "(allot --url, or ALLOT_URL)",
                code=EXIT_BAD_INPUT,
            )
        self.url = conf.url
        self.base = f"{conf.url}/api/v1/"
        self.headers = headers
        plain = _plain_http(self.base)
        self.opener = None if plain else _opener(self.base)  # None: http.client directly
        self.http_client = _http_client(plain)

    def send(
        self, method: str, path: str, *, query: str, body: bytes | None, headers: dict[str, str]
    ) -> Answer:
        """One request; an HTTP error status is an answer, a failure to talk raises OSError
        (refused, unreachable, timed out) or http.client.HTTPException (a broken answer)."""
        url = f"{self.base}{path}{query}"
        all_headers = {**self.headers, **headers}
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        if self.opener is None:
            status, content = _send_plain(self.http_client, method, url, body, all_headers)
        else:
            status, content = self._send_urllib(method, url, body, all_headers)
        return Answer(status, _reason(status), content, urlsplit(url).path)

    def _send_urllib(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """One request through the urllib opener (proxies, https)."""
        import urllib.error  # loaded with the opener's urllib.request (start-up time)
        import urllib.request

        assert self.opener is not None
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with self.opener.open(request, timeout=TIMEOUT_S) as response:
                status, content = response.status, response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                status, content = exc.code, exc.read()
        return status, content

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        retry: bool = False,
    ) -> Any:
        """The decoded JSON answer; raises CliError. `retry` for requests that are safe
        to repeat (reads, and submissions carrying an Idempotency-Key)."""
        http_client = self.http_client
        query = _query(params or {})
        body = None if json_body is None else json.dumps(json_body).encode()
        attempts = RETRIES if retry else 1
        for attempt in range(attempts):
            try:
                response = self.send(method, path, query=query, body=body, headers=headers or {})
            except (OSError, http_client.HTTPException) as exc:
                if attempt + 1 < attempts:
                    time.sleep(0.5 * 2**attempt)
                    continue
                raise CliError(f"cannot reach {self.url}: {_why(exc)}") from None
            if response.status in (502, 503, 504) and attempt + 1 < attempts:
                time.sleep(0.5 * 2**attempt)
                continue
            if response.is_success:
                return response.json() if response.content else None
            raise _error_from(response)
        raise CliError("no answer")  # pragma: no cover - the loop always returns or raises

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params, retry=True)

    def get_all(self, path: str, *, limit: int | None = None, **params: Any) -> list[dict]:
        """Every row of a paginated list (or the first `limit`)."""
        return self.get_all_with_head(path, limit=limit, **params)[1]

    def get_all_with_head(
        self, path: str, *, limit: int | None = None, **params: Any
    ) -> tuple[dict, list[dict]]:
        """The first page's fields besides its rows (such as the window the rows cover)
        and every row of a paginated list (or the first `limit`)."""
        rows: list[dict] = []
        head: dict | None = None
        offset = 0
        while True:
            page_size = 500 if limit is None else min(500, limit - len(rows))
            page = self.get(path, limit=page_size, offset=offset, **params)
            if isinstance(page, list):
                return {}, page
            if head is None:
                head = {k: v for k, v in page.items() if k != "results"}
            rows.extend(page["results"])
            offset += len(page["results"])
            if not page.get("next") or not page["results"] or (limit and len(rows) >= limit):
                return head, rows

    def submit(self, body: dict[str, Any], *, dry_run: bool) -> Any:
        """POST jobs/ with a fresh Idempotency-Key, so retries never submit twice."""
        import uuid  # here: its import (with platform's) is ~2-3 ms of CPU of other calls

        return self.request(
            "POST",
            "jobs/",
            params={"dry_run": "true"} if dry_run else None,
            json_body=body,
            headers={"Idempotency-Key": str(uuid.uuid4())},
            retry=True,
        )


def _reason(status: int) -> str:
    """The standard phrase of a status ('Service Unavailable'), as httpx gave it."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _why(exc: Exception) -> str:
    """A failure to talk in the words of its cause ('[Errno 111] Connection refused'),
    not urllib's wrapping ('<urlopen error ...>')."""
    reason = getattr(exc, "reason", None)
    return str(reason if isinstance(reason, BaseException) else exc) or type(exc).__name__
