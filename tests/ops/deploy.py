"""Run Allot the way its systemd units do (deploy/systemd/*.service): each unit's
ExecStart and Environment lines, the environment-file template with the test's values,
through deploy/allot-run, as a non-root user.

- `unit_command(unit, instance)` / `unit_environment(...)`: what a unit runs and with what;
- `runtime_user()`: who runs it: the current user, or `nobody` when the tests run as root
  (with an interpreter that user can execute: `python_for`);
- `Deployment`: starts units' commands, waits for them, stops them; logs in a directory.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
INSTALLED_APP = "/opt/allot/app"  # where the units expect the application


def unit_lines(unit: str, key: str) -> list[str]:
    """The values of `key=` lines in the [Service] section of deploy/systemd/`unit`."""
    values, section = [], ""
    for line in (UNITS / unit).read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line.startswith(f"{key}="):
            values.append(line.split("=", 1)[1])
    return values


def unit_command(unit: str, instance: str = "") -> list[str]:
    """The unit's ExecStart, with this repository in place of /opt/allot/app."""
    (command,) = unit_lines(unit, "ExecStart")
    command = command.replace("%i", instance).replace(INSTALLED_APP, str(ROOT))
    return command.split()


def env_file(name: str) -> dict[str, str]:
    """deploy/systemd/`name` (an environment-file template) as a dict."""
    values = {}
    for line in (UNITS / name).read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def unit_environment(unit: str, instance: str = "", **overrides: str) -> dict[str, str]:
    """What the unit's process sees: its EnvironmentFile templates, then its Environment
    lines (with %i), then `overrides` (the test's database, Redis, ports, directories)."""
    env: dict[str, str] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    for path in unit_lines(unit, "EnvironmentFile"):
        env.update(env_file(Path(path.lstrip("-")).name.replace(".env", ".env.example")))
    for line in unit_lines(unit, "Environment"):
        key, value = line.replace("%i", instance).split("=", 1)
        env[key] = value
    env.update(overrides)
    return env


@dataclass(frozen=True)
class RuntimeUser:
    uid: int
    gid: int
    name: str
    venv: Path  # a virtualenv this user can run, with the project's packages

    @property
    def popen_kwargs(self) -> dict:
        if os.geteuid() != 0:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def _venv_for(user: str, directory: Path) -> tuple[Path, bool]:
    """A virtualenv `user` can run with this project's packages: .venv itself when its
    interpreter is reachable, else one on the system's Python 3 that adds .venv's
    site-packages (same minor version, same ABI). Returns it and whether it is foreign."""
    own = ROOT / ".venv"
    probe = subprocess.run(
        ["runuser", "-u", user, "--", str(own / "bin" / "python"), "-c", "pass"]
        if os.geteuid() == 0
        else [str(own / "bin" / "python"), "-c", "pass"],
        capture_output=True,
    )
    if probe.returncode == 0:
        return own, False
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists():
        raise RuntimeError(f"{user} cannot run {own}/bin/python and there is no {system}")
    venv = directory / "venv"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (own / "lib").glob("python3.*/site-packages")
    (target,) = (venv / "lib").glob("python3.*/site-packages")
    (target / "allot-dev.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    return venv, True


def runtime_user(directory: Path) -> tuple[RuntimeUser, bool]:
    """Who runs the units' commands: `nobody` when the tests run as root, else the
    current user; and whether the virtualenv is a foreign interpreter's."""
    name = "nobody" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    entry = pwd.getpwnam(name)
    venv, foreign = _venv_for(name, directory)
    return RuntimeUser(entry.pw_uid, entry.pw_gid, name, venv), foreign


def shared_tempdir_root() -> Path:
    """A directory under /tmp that any user can read (for the runtime user's venv)."""
    path = Path(tempfile.mkdtemp(prefix="allot-venv-"))
    path.chmod(0o755)
    return path


def shared_tempdir(owner: RuntimeUser) -> Path:
    """A directory under /tmp the runtime user owns (pytest's own are root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="allot-deploy-"))
    path.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(path, owner.uid, owner.gid)
    return path


@dataclass
class Process:
    name: str
    command: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Deployment:
    """Processes started from the units' command lines, as `user`, logs in `logs`."""

    user: RuntimeUser
    logs: Path
    base_env: dict[str, str]
    processes: dict[str, Process] = field(default_factory=dict)

    def start(self, name: str, unit: str, instance: str = "", **env: str) -> Process:
        environment = unit_environment(unit, instance, **{**self.base_env, **env})
        process = Process(
            name, unit_command(unit, instance), environment, self.logs / f"{name}.log"
        )
        self.processes[name] = process
        return self.restart(name)

    def restart(self, name: str) -> Process:
        process = self.processes[name]
        self.stop(name)
        with process.log_path.open("ab") as log:
            process.popen = subprocess.Popen(
                process.command,
                env=process.env,
                cwd="/",
                stdout=log,
                stderr=subprocess.STDOUT,
                **self.user.popen_kwargs,
            )
        return process

    def run(self, unit: str, instance: str = "", **env: str) -> subprocess.CompletedProcess:
        """A one-shot unit's command, to its end."""
        environment = unit_environment(unit, instance, **{**self.base_env, **env})
        return subprocess.run(
            unit_command(unit, instance),
            env=environment,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=600,
            **self.user.popen_kwargs,
        )

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout_s: float = 30) -> int | None:
        process = self.processes[name]
        if process.popen is None or process.popen.poll() is not None:
            return None if process.popen is None else process.popen.returncode
        process.popen.send_signal(sig)
        return self._wait(name, sig, timeout_s)

    def _wait(self, name: str, sig: int, timeout_s: float) -> int | None:
        process = self.processes[name]
        if process.popen is None:
            return None
        try:
            return process.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.popen.kill()
            process.popen.wait()
            raise AssertionError(
                f"{name} did not stop on signal {sig}:\n{process.log()[-3000:]}"
            ) from None

    def stop_all(self, timeout_s: float = 30) -> dict[str, int | None]:
        """SIGTERM to every running process at once, then wait for each (stopped one
        after another, each shutdown waited in turn, it took 11-18 s of a teardown)."""
        for process in self.processes.values():
            if process.popen is not None and process.popen.poll() is None:
                process.popen.send_signal(signal.SIGTERM)
        return {name: self._wait(name, signal.SIGTERM, timeout_s) for name in self.processes}

    def alive(self, name: str) -> bool:
        popen = self.processes[name].popen
        return popen is not None and popen.poll() is None

    def logs_of_failed(self) -> str:
        return "\n".join(f"--- {name}\n{p.log()[-2000:]}" for name, p in self.processes.items())


def http(
    port: int,
    path: str,
    *,
    method: str = "GET",
    body=None,
    token: str = "",
    client: str = "198.51.100.10",
    timeout=10,
) -> tuple[int, dict | str, dict]:
    """A request from `client` as the TLS proxy in front would pass it on: (status, body,
    headers)."""
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-For": client}
    if token:
        headers["Authorization"] = f"Token {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw, got = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        status, raw, got = exc.code, exc.read(), dict(exc.headers)
    text = raw.decode(errors="replace")
    try:
        return status, json.loads(text), got
    except ValueError:
        return status, text, got


def wait_until(predicate, *, timeout_s: float, what: str, deployment: Deployment | None = None):
    """Poll `predicate` until it returns something truthy (returned)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            logs = deployment.logs_of_failed() if deployment else ""
            raise AssertionError(f"timed out waiting for {what}\n{logs}")
        time.sleep(0.25)


def secret_key() -> str:
    return secrets.token_urlsafe(50)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
