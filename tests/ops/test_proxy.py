"""One way to trust a reverse proxy (config/proxy.py): ALLOT_TRUSTED_PROXIES and
ALLOT_PROXY_NETWORKS decide the client address for /metrics and the sign-in lockout,
whether Django believes X-Forwarded-Proto, and what gunicorn believes."""

import datetime as dt
import ipaddress
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.http import HttpResponse
from django.test import RequestFactory
from gunicorn.config import Config

from config import proxy
from config.middleware import ForwardedHeadersMiddleware, client_address
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.fixture
def one_proxy(settings):
    """One TLS-terminating proxy in front, connecting from 127.0.0.1."""
    settings.ALLOT_TRUSTED_PROXIES = 1
    settings.ALLOT_PROXY_NETWORKS = [ipaddress.ip_network("127.0.0.1/32")]
    settings.METRICS_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]


def test_metrics_refuse_a_client_that_writes_an_allowed_address_into_x_forwarded_for(
    client, one_proxy
):
    # the client sent "X-Forwarded-For: 10.1.2.3"; the proxy appended the real address
    spoofed = client.get(
        "/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.1.2.3, 203.0.113.7"
    )
    assert spoofed.status_code == 403
    # a scraper at 10.1.2.3 behind the same proxy (whatever it claims to its left)
    scraper = client.get(
        "/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7, 10.1.2.3"
    )
    assert scraper.status_code == 200 and b"allot_budget_nodes" in scraper.content


def test_forwarded_addresses_count_only_from_the_proxy_networks(client, one_proxy):
    """A client that reaches the app directly cannot name an address."""
    direct = client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="10.1.2.3")
    assert direct.status_code == 403


def test_without_trusted_proxies_x_forwarded_for_is_ignored(client, settings):
    settings.ALLOT_TRUSTED_PROXIES = 0
    settings.METRICS_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.1.2.3")
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("proxies", "peer", "chain", "client"),
    [
        (0, "10.0.0.1", "1.1.1.1", "10.0.0.1"),
        (1, "127.0.0.1", "1.1.1.1", "1.1.1.1"),
        (1, "127.0.0.1", "6.6.6.6, 1.1.1.1", "1.1.1.1"),
        (2, "127.0.0.1", "6.6.6.6, 1.1.1.1, 10.9.9.9", "1.1.1.1"),
        (2, "127.0.0.1", "1.1.1.1", "1.1.1.1"),  # a shorter chain: its leftmost entry
        (1, "127.0.0.1", "", "127.0.0.1"),
        (1, "192.0.2.1", "1.1.1.1", "192.0.2.1"),  # not from the proxy
    ],
)
def test_client_address_counts_trusted_proxies_from_the_right(
    settings, proxies, peer, chain, client
):
    settings.ALLOT_TRUSTED_PROXIES = proxies
    settings.ALLOT_PROXY_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    request = RequestFactory().get("/", REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=chain)
    assert client_address(request) == client


def test_the_sign_in_lockout_counts_the_address_the_proxy_saw(api_client, one_proxy, settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = dt.timedelta(seconds=60)
    UserFactory(username="ann")

    def sign_in(password: str, chain: str) -> int:
        return api_client.post(
            "/api/v1/auth/token/",
            {"username": "ann", "password": password},
            format="json",
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR=chain,
        ).status_code

    # an attacker at 203.0.113.7 who writes a new address to the left each time
    statuses = [sign_in("wrong", f"10.0.0.{n}, 203.0.113.7") for n in range(4)]
    assert statuses == [400, 400, 429, 429]
    assert sign_in("pw", "198.51.100.4") == 200  # ann from another address is not locked out


def test_django_believes_x_forwarded_proto_only_from_the_proxy(settings):
    settings.ALLOT_TRUSTED_PROXIES = 1
    settings.ALLOT_PROXY_NETWORKS = [ipaddress.ip_network("10.0.0.5/32")]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    seen = {}

    def view(request):
        seen["secure"] = request.is_secure()
        seen["for"] = request.META.get("HTTP_X_FORWARDED_FOR")
        return HttpResponse()

    middleware = ForwardedHeadersMiddleware(view)
    factory = RequestFactory()
    headers = {"HTTP_X_FORWARDED_PROTO": "https", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}
    middleware(factory.get("/", REMOTE_ADDR="10.0.0.5", **headers))
    assert seen == {"secure": True, "for": "1.2.3.4"}
    middleware(factory.get("/", REMOTE_ADDR="10.0.0.6", **headers))
    assert seen == {"secure": False, "for": None}


def _gunicorn_settings(**environ: str) -> Config:
    """config/gunicorn.py read by gunicorn itself, in the environment given."""
    saved = dict(os.environ)
    os.environ.update(environ)
    try:
        cfg = Config()
        namespace: dict = {"__file__": str(ROOT / "config" / "gunicorn.py")}
        exec(
            compile((ROOT / "config" / "gunicorn.py").read_text(), "gunicorn.py", "exec"), namespace
        )
        for key, value in namespace.items():
            if key in cfg.settings:
                cfg.set(key, value)
        return cfg
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_gunicorn_trusts_the_same_proxies_as_django():
    cfg = _gunicorn_settings(ALLOT_TRUSTED_PROXIES="1", ALLOT_PROXY_NETWORKS="10.0.0.5,10.1.0.0/16")
    assert cfg.forwarded_allow_ips == ["10.0.0.5/32", "10.1.0.0/16"]
    assert _gunicorn_settings(ALLOT_TRUSTED_PROXIES="0").forwarded_allow_ips == []


def test_the_retired_proxy_variables_are_refused_naming_their_replacement():
    env = {**os.environ, "ALLOT_BEHIND_TLS_PROXY": "true"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "ALLOT_BEHIND_TLS_PROXY is no longer read: set ALLOT_TRUSTED_PROXIES" in done.stderr


def test_proxy_variables_that_cannot_be_read_name_themselves():
    with pytest.raises(proxy.ProxyConfigError, match="ALLOT_TRUSTED_PROXIES"):
        proxy.trusted_proxies({"ALLOT_TRUSTED_PROXIES": "yes"})
    with pytest.raises(proxy.ProxyConfigError, match="ALLOT_PROXY_NETWORKS: 'proxy.lan'"):
        proxy.proxy_networks({"ALLOT_PROXY_NETWORKS": "proxy.lan"})
