"""One way to trust reverse proxies: how many stand in front of the app, and where the
nearest one connects from.

    ALLOT_TRUSTED_PROXIES=1                        # the number of proxies every request passes
    ALLOT_PROXY_NETWORKS=10.0.0.5/32               # where the nearest one connects from

The pair feeds everything that reads a forwarded header:
- gunicorn's `forwarded_allow_ips` (config/gunicorn.py) is ALLOT_PROXY_NETWORKS when
  ALLOT_TRUSTED_PROXIES > 0, nothing otherwise;
- Django's `SECURE_PROXY_SSL_HEADER` (X-Forwarded-Proto) is set when
  ALLOT_TRUSTED_PROXIES > 0, and `ForwardedHeadersMiddleware` removes X-Forwarded-* from
  any request whose peer is not in ALLOT_PROXY_NETWORKS, so a client that reaches the
  app directly cannot claim HTTPS or an address;
- `client_address(request)`, the one reader of client addresses (the sign-in lockout,
  the /metrics allow-list): the peer itself without trusted proxies, else the entry of
  X-Forwarded-For that the outermost trusted proxy appended, counted from the right
  (entries to its left are whatever the client sent).

The parsing below reads plain environment variables, so gunicorn's configuration uses it
without Django.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
DEFAULT_PROXY_NETWORKS = ("127.0.0.0/8", "::1/128")
FORWARDED_HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_REAL_IP",
    "HTTP_FORWARDED",
    "HTTP_X_REQUEST_ID",  # a request id is the proxy's to give (config/middleware.py)
)
# Variables of earlier releases, each a second way to trust a proxy: refused with a pointer.
RETIRED_VARIABLES = {
    "ALLOT_CLIENT_IP_HEADER": "ALLOT_TRUSTED_PROXIES",
    "ALLOT_BEHIND_TLS_PROXY": "ALLOT_TRUSTED_PROXIES",
    "FORWARDED_ALLOW_IPS": "ALLOT_PROXY_NETWORKS",
}


class ProxyConfigError(ValueError):
    """A proxy variable that cannot be read; the message names it."""


def trusted_proxies(environ: Mapping[str, str]) -> int:
    """ALLOT_TRUSTED_PROXIES as a count (0: requests come straight from clients)."""
    raw = environ.get("ALLOT_TRUSTED_PROXIES", "0").strip() or "0"
    try:
        count = int(raw)
    except ValueError:
        raise ProxyConfigError(
            f"ALLOT_TRUSTED_PROXIES must be a whole number of proxies (0 or more), not {raw!r}"
        ) from None
    if count < 0:
        raise ProxyConfigError(f"ALLOT_TRUSTED_PROXIES must be 0 or more, not {count}")
    return count


def proxy_networks(environ: Mapping[str, str]) -> list[IPNetwork]:
    """ALLOT_PROXY_NETWORKS (comma-separated addresses or CIDR networks)."""
    raw = environ.get("ALLOT_PROXY_NETWORKS", ",".join(DEFAULT_PROXY_NETWORKS))
    networks = []
    for item in raw.split(","):
        if not item.strip():
            continue
        try:
            networks.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            raise ProxyConfigError(
                f"ALLOT_PROXY_NETWORKS: {item.strip()!r} is not an address or a CIDR network"
            ) from None
    return networks


def retired_variables(environ: Mapping[str, str]) -> list[str]:
    """Messages for the retired proxy variables that are set."""
    return [
        f"{old} is no longer read: set {new} instead (docs/operations.md, 'Behind a proxy')"
        for old, new in RETIRED_VARIABLES.items()
        if environ.get(old)
    ]


def in_networks(address: str, networks: Sequence[IPNetwork]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in network for network in networks)


def forwarded_client(
    peer: str, forwarded_for: str, *, proxies: int, networks: Sequence[IPNetwork]
) -> str:
    """The client address of a request from `peer` carrying X-Forwarded-For
    `forwarded_for`, with `proxies` trusted proxies whose nearest connects from
    `networks`. A peer outside the networks is the client itself (it did not come
    through the proxy); a chain shorter than `proxies` gives its leftmost entry."""
    if proxies <= 0 or not in_networks(peer, networks):
        return peer
    chain = [entry.strip() for entry in forwarded_for.split(",") if entry.strip()]
    if not chain:
        return peer
    return chain[-min(proxies, len(chain))]


def gunicorn_forwarded_allow_ips(environ: Mapping[str, str]) -> str:
    """gunicorn's `forwarded_allow_ips` from the same two variables."""
    if trusted_proxies(environ) == 0:
        return ""
    return ",".join(str(n) for n in proxy_networks(environ))
