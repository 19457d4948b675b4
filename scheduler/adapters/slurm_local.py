"""A disposable real Slurm cluster on this machine, for tests, benchmarks and trials.

It follows the checked recipe (Debian's Slurm 22.05; `docs/slurm.md`):
one `munged`, one `slurmctld` and one ordinary `slurmd` per fake node, all on
127.0.0.1 with their own ports, each node with `gpus_per_node` GPUs whose device files
are symlinks to /dev/null. No slurmdbd, no cgroups, no slurmrestd.

Unlike the recipe's scripts, every cluster lives in its own directory and picks free
ports (or `ALLOT_SLURM_PORT_BASE`), so several test runs on one machine do not
collide. Starting needs root (the daemons run as root, as in the recipe).

    cluster = LocalSlurm.create(nodes=16, gpus_per_node=8)
    cluster.start()          # ~0.5 s
    os.environ["SLURM_CONF"] = str(cluster.conf_path)
    ...
    cluster.stop()

Plain Python: no Django.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Allot's job_submit plugin (governed sbatch), copied next to each cluster's slurm.conf
JOB_SUBMIT_LUA = Path(__file__).resolve().parents[2] / "deploy" / "slurm" / "job_submit.lua"
GOVERNED_PARTITION = "governed"

PACKAGES = ("munge", "slurmctld", "slurmd", "slurm-client")
BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")
SBIN_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def find_binary(name: str) -> str | None:
    """The path of a Slurm or munge binary (daemons live in /usr/sbin, often off PATH)."""
    found = shutil.which(name)
    if found:
        return found
    for directory in SBIN_DIRS:
        candidate = Path(directory) / name
        if candidate.exists():
            return str(candidate)
    return None


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if find_binary(name) is None]


def install_slurm(*, quiet: bool = True) -> str | None:
    """Install the recipe's Debian packages when they are missing and we are root.

    Returns None when Slurm is usable, else why not (the reason a test skip shows).
    Never installs `slurm-wlm-emulator` (it replaces the normal daemons)."""
    if not missing_binaries():
        return None
    if os.geteuid() != 0:
        return f"Slurm is not installed ({', '.join(missing_binaries())} missing) and installing it needs root"
    if shutil.which("apt-get") is None:
        return "Slurm is not installed and there is no apt-get to install it with"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    output = subprocess.DEVNULL if quiet else None
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    try:
        if subprocess.run(install, env=env, stdout=output, stderr=output).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, stdout=output, stderr=output)
            subprocess.run(install, env=env, stdout=output, stderr=output, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"apt-get could not install Slurm ({exc})"
    missing = missing_binaries()
    return f"Slurm is still missing {', '.join(missing)} after apt-get" if missing else None


def usable_reason() -> str | None:
    """None when a local cluster can be started here, else why not (nothing installed)."""
    if os.geteuid() != 0:
        return "starting a local Slurm cluster needs root (its daemons run as root)"
    missing = missing_binaries()
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing)"
    return None


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port_block(count: int, *, low: int = 20000, high: int = 30000) -> int:
    """The first port of `count` consecutive free ports, looked for from a random base
    (so that concurrent test runs pick different blocks)."""
    start: int = low + int.from_bytes(os.urandom(2), "big") % (high - low - count)
    candidates: list[int] = [*range(start, high - count, count + 1), *range(low, start, count + 1)]
    for base in candidates:
        if all(_port_free(port) for port in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports between {low} and {high}")


@dataclass
class LocalSlurm:
    """One local cluster: its directory, ports and shape (see the module docstring)."""

    base_dir: Path
    ctld_port: int
    nodes: int = 16
    gpus_per_node: int = 8
    # How long slurmctld waits for a silent slurmd before marking its node DOWN (and
    # failing its jobs). Production clusters use minutes; tests want it quick.
    slurmd_timeout_s: int = 10
    min_job_age_s: int = 300
    accounts: tuple[str, ...] = ()

    @classmethod
    def create(
        cls, *, base_dir: Path | None = None, port_base: int | None = None, **kwargs: Any
    ) -> LocalSlurm:
        """A cluster in a new directory under /tmp (short: munge's socket path must fit
        in 108 bytes) on free ports; `ALLOT_SLURM_PORT_BASE` fixes the ports."""
        nodes = kwargs.get("nodes", 16)
        if port_base is None and os.environ.get("ALLOT_SLURM_PORT_BASE"):
            port_base = int(os.environ["ALLOT_SLURM_PORT_BASE"])
        if port_base is None:
            port_base = free_port_block(nodes + 1)
        base_dir = Path(base_dir or tempfile.mkdtemp(prefix="allot-slurm-", dir="/tmp"))
        return cls(base_dir=base_dir, ctld_port=port_base, **kwargs)

    @classmethod
    def open(cls, base_dir: Path) -> LocalSlurm:
        """The cluster whose files are in `base_dir` (written by `write_config`)."""
        data = json.loads((Path(base_dir) / "cluster.json").read_text())
        data["accounts"] = tuple(data.get("accounts", ()))
        return cls(base_dir=Path(base_dir), **data)

    def describe(self) -> dict[str, Any]:
        return {
            "ctld_port": self.ctld_port,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "slurmd_timeout_s": self.slurmd_timeout_s,
            "min_job_age_s": self.min_job_age_s,
            "accounts": list(self.accounts),
        }

    # -- layout --------------------------------------------------------------------
    @property
    def conf_path(self) -> Path:
        return self.base_dir / "etc" / "slurm.conf"

    @property
    def node_names(self) -> list[str]:
        return [self.node_name(i) for i in range(1, self.nodes + 1)]

    def node_name(self, index: int) -> str:
        return f"gpu{index:02d}"

    @property
    def client_env(self) -> dict[str, str]:
        """The environment for Slurm's client commands against this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf_path)}

    def _path(self, *parts: str) -> Path:
        return self.base_dir.joinpath(*parts)

    def write_config(self) -> None:
        """slurm.conf and gres.conf for this directory, ports and shape."""
        b = self.base_dir
        for sub in ("etc", "state/ctld", "log", "munge", "fakedev"):
            self._path(*sub.split("/")).mkdir(parents=True, exist_ok=True)
        for name in self.node_names:
            self._path("state", "d", name).mkdir(parents=True, exist_ok=True)
        os.chmod(self._path("munge"), 0o711)
        # jobs of other users (sbatch --uid, governed sbatch tests) read their batch
        # script in the spool directory under here (mkdtemp makes it 0700)
        os.chmod(b, 0o755)
        for i in range(self.gpus_per_node):
            link = self._path("fakedev", f"nvidia{i}")
            if not link.is_symlink():
                link.symlink_to("/dev/null")
        last = self.nodes
        node_range = f"gpu[01-{last:02d}]" if last > 1 else "gpu01"
        port_range = (
            f"[{self.ctld_port + 1}-{self.ctld_port + last}]"
            if last > 1
            else str(self.ctld_port + 1)
        )
        gpu_range = f"[0-{self.gpus_per_node - 1}]" if self.gpus_per_node > 1 else "0"
        self.conf_path.write_text(
            SLURM_CONF_TEMPLATE.format(
                base=b,
                ctld_port=self.ctld_port,
                node_range=node_range,
                port_range=port_range,
                gpus=self.gpus_per_node,
                slurmd_timeout=self.slurmd_timeout_s,
                min_job_age=self.min_job_age_s,
                # Without slurmdbd the partition's AllowAccounts is where the config
                # names its accounts (see scheduler.adapters.slurm.SlurmClient.accounts).
                allow_accounts=f" AllowAccounts={','.join(self.accounts)}" if self.accounts else "",
                extra_partitions=_small_partitions(last),
            )
        )
        (b / "cluster.json").write_text(json.dumps(self.describe(), indent=1))
        self._path("etc", "job_submit.lua").write_text(
            JOB_SUBMIT_LUA.read_text().replace(
                'local GOVERNED_PARTITIONS = "governed"',
                f'local GOVERNED_PARTITIONS = "{GOVERNED_PARTITION}"',
            )
        )
        (b / "etc" / "gres.conf").write_text(
            f"NodeName={node_range} Name=gpu File={b}/fakedev/nvidia{gpu_range}\n"
        )

    # -- processes -----------------------------------------------------------------
    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), env=self.client_env, capture_output=True, text=True, check=check, timeout=60
        )

    def start(self, *, clean: bool = True, timeout_s: float = 60.0) -> None:
        """munged, slurmctld (`-i`: a fresh state when `clean`), then every slurmd;
        returns once every node is idle."""
        if clean:
            for sub in ("state", "log"):
                shutil.rmtree(self._path(sub), ignore_errors=True)
        self.write_config()
        key = self._path("munge", "munge.key")
        if not key.exists():
            self._run(find_binary("mungekey") or "mungekey", "--create", f"--keyfile={key}")
        os.chmod(key, 0o600)
        if not self._alive("munge/munged.pid"):
            m = self._path("munge")
            self._run(
                find_binary("munged") or "munged",
                "--force",
                f"--socket={m}/munge.socket",
                f"--key-file={key}",
                f"--pid-file={m}/munged.pid",
                f"--log-file={m}/munged.log",
                f"--seed-file={m}/munged.seed",
            )
        self.start_ctld(clean=clean)
        for name in self.node_names:
            self.start_slurmd(name)
        self.wait_nodes_idle(timeout_s=timeout_s)

    def start_ctld(self, *, clean: bool = False, timeout_s: float = 20.0) -> None:
        """Start slurmctld (keeping its saved state unless `clean`) and wait for its ping."""
        args = [find_binary("slurmctld") or "slurmctld", "-f", str(self.conf_path)]
        if clean:
            args.insert(1, "-i")
        self._run(*args)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "is UP" in self._run("scontrol", "ping", check=False).stdout:
                return
            time.sleep(0.1)
        raise RuntimeError(f"slurmctld did not come up: {self.log_tail('slurmctld.log')}")

    def start_slurmd(self, node: str) -> None:
        self._run(find_binary("slurmd") or "slurmd", "-N", node, "-f", str(self.conf_path))

    def wait_nodes_idle(self, *, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = self._run("sinfo", "-h", "-N", "-t", "idle", "-o", "%N", check=False).stdout
            if len(set(out.split())) >= self.nodes:
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"nodes not idle after {timeout_s} s: {self._run('sinfo', '-N', check=False).stdout}"
        )

    def log_tail(self, name: str, lines: int = 5) -> str:
        path = self._path("log", name)
        return "\n".join(path.read_text().splitlines()[-lines:]) if path.exists() else "(no log)"

    def _pid(self, pid_file: str) -> int | None:
        path = self._path(*pid_file.split("/"))
        try:
            return int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _alive(self, pid_file: str) -> bool:
        pid = self._pid(pid_file)
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return not _is_zombie(pid)

    def _kill(self, pid_file: str, sig: signal.Signals, *, wait_s: float = 10.0) -> None:
        pid = self._pid(pid_file)
        if pid is None or not self._alive(pid_file):
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and self._alive(pid_file):
            time.sleep(0.05)
        if self._alive(pid_file):
            os.kill(pid, signal.SIGKILL)

    def kill_slurmd(self, node: str) -> None:
        """SIGKILL one node's slurmd (its jobs' processes stay, as after a crash)."""
        self._kill(f"state/slurmd-{node}.pid", signal.SIGKILL)

    def stop_ctld(self) -> None:
        self._kill("state/slurmctld.pid", signal.SIGTERM)

    def restart_ctld(self) -> None:
        """Stop slurmctld and start it again from its saved state (jobs survive)."""
        self.stop_ctld()
        self.start_ctld(clean=False)

    def reset(self, *, timeout_s: float = 60.0) -> None:
        """Back to a clean cluster between tests: every daemon running, no job running
        or pending, every node resumed and idle (ended jobs stay listed for MinJobAge)."""
        if not self._alive("state/slurmctld.pid"):
            self.start_ctld()
        for name in self.node_names:
            if not self._alive(f"state/slurmd-{name}.pid"):
                self.start_slurmd(name)
        self._cancel_every_job(timeout_s)
        out = self._run("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout
        for line in out.splitlines():
            node, _, state = line.partition(" ")
            if any(word in state for word in ("drain", "down", "fail")):
                self._run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
        self.wait_nodes_idle(timeout_s=timeout_s)

    def _cancel_every_job(self, timeout_s: float) -> None:
        """Cancel jobs until squeue lists none: a job completing when it is cancelled
        (a requeue in progress, as a preemption test leaves one) comes back pending
        and held, and the next test's cycle would find it (polled, not slept)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._run("scancel", "--user=root", check=False)
            left = self._run("squeue", "--noheader", "--format=%A", check=False).stdout.split()
            if not left or time.monotonic() > deadline:
                return
            # jobs sbatch'd as other users (governed sbatch tests), or one requeued
            self._run("scancel", *sorted(set(left)), check=False)
            time.sleep(0.2)

    def stop(self, *, remove: bool = False) -> None:
        """Stop every slurmd (their jobs' processes too), slurmctld and munged; only the
        processes named by this cluster's PID files. `remove` deletes the directory."""
        if self._path("state").exists():
            self._run("scancel", "--full", "--user=root", check=False)
        for name in self.node_names:
            self._kill(f"state/slurmd-{name}.pid", signal.SIGTERM)
        self.stop_ctld()
        self._kill("munge/munged.pid", signal.SIGTERM)
        for pid in self._stray_steps():  # of a slurmd that was killed and never came back
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for sock in self._path("munge").glob("munge.socket*"):
            sock.unlink(missing_ok=True)
        if remove:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _stray_steps(self) -> list[int]:
        """slurmstepd processes of this cluster (their environment names its slurm.conf)."""
        mine = f"SLURM_CONF={self.conf_path}".encode()
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if not (proc / "comm").read_text().startswith("slurmstepd"):
                    continue
                if mine in (proc / "environ").read_bytes().split(b"\0"):
                    pids.append(int(proc.name))
            except OSError:
                continue
        return pids


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


# The recipe's slurm.conf, with this cluster's directory, ports and shape. Differences:
# no auth/jwt (no slurmrestd here), a configurable SlurmdTimeout, and ports per cluster.
SLURM_CONF_TEMPLATE = """\
# Generated by scheduler.adapters.slurm_local (the shared recipe, per directory).
ClusterName=allot
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={base}/munge/munge.socket
StateSaveLocation={base}/state/ctld
SlurmdSpoolDir={base}/state/d/%n
SlurmctldPidFile={base}/state/slurmctld.pid
SlurmdPidFile={base}/state/slurmd-%n.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
SchedulerType=sched/builtin
# start released jobs within ~1 s instead of batching them for 3 s (the default)
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=4000
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
ReturnToService=2
GresTypes=gpu
SlurmdParameters=config_overrides
MinJobAge={min_job_age}
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout={slurmd_timeout}
MessageTimeout=10
# Allot's governed sbatch (deploy/slurm/job_submit.lua, next to this file)
JobSubmitPlugins=lua

NodeName={node_range} NodeAddr=127.0.0.1 Port={port_range} CPUs=64 Boards=1 SocketsPerBoard=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:{gpus} State=UNKNOWN
PartitionName=gpu Nodes={node_range} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1{allow_accounts}
# governed by Allot: deploy/slurm/job_submit.lua holds and tags every job sbatch'd here
PartitionName=governed Nodes={node_range} Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1{allow_accounts}
{extra_partitions}"""


def _small_partitions(nodes: int) -> str:
    """Partitions easy to fill: `pair` (gpu01-02) and `trio` (gpu03-05: a move needs a
    host held by the short-job reserve besides the two it uses), where the nodes exist."""
    small = {"pair": (1, 2), "trio": (3, 5)}
    return "".join(
        f"PartitionName={name} Nodes=gpu[{first:02d}-{last:02d}] Default=NO "
        "MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1\n"
        for name, (first, last) in small.items()
        if nodes >= last
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m scheduler.adapters.slurm_local install | start | stop` (see --help)."""
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.adapters.slurm_local", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="apt-get install the recipe's packages when missing (root)")
    start = sub.add_parser("start", help="start a cluster; prints its SLURM_CONF")
    start.add_argument("--dir", type=Path, help="its directory (default: a new one under /tmp)")
    start.add_argument(
        "--port-base", type=int, help="slurmctld's port; the nodes take the next ones"
    )
    start.add_argument("--nodes", type=int, default=16)
    start.add_argument("--gpus-per-node", type=int, default=8)
    start.add_argument(
        "--accounts", default="", help="comma-separated AllowAccounts of the partition"
    )
    stop = sub.add_parser("stop", help="stop the cluster in DIR")
    stop.add_argument("--dir", type=Path, required=True)
    stop.add_argument("--remove", action="store_true", help="delete its directory too")
    args = parser.parse_args(argv)
    if args.command == "install":
        reason = install_slurm()
        if reason:
            print(f"warning: {reason}; the Slurm tests will be skipped")
        return 0
    if args.command == "start":
        reason = usable_reason()
        if reason:
            parser.error(reason)
        accounts = tuple(a for a in args.accounts.split(",") if a)
        cluster = LocalSlurm.create(
            base_dir=args.dir,
            port_base=args.port_base,
            nodes=args.nodes,
            gpus_per_node=args.gpus_per_node,
            accounts=accounts,
        )
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf_path}")
        return 0
    LocalSlurm.open(args.dir).stop(remove=args.remove)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
