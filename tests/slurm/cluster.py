"""A real single-node SLURM cluster for the SLURM tier, from Debian's packages (`tests/slurm/install.sh`).

Five daemons, each with a configuration of its own under one directory, started in this order and
stopped by the pids they wrote, in reverse:

- ``munged``: authentication, on its own socket (not the system's ``/run/munge``), with a fresh key;
- ``mariadbd`` + ``slurmdbd``: job accounting. submitit reads every job's state with ``sacct``,
  which a cluster without slurmdbd cannot answer: a cancelled or failed job would be waited for forever;
- ``slurmctld`` and ``slurmd``: the controller and the one compute node, this machine under its own
  hostname at 127.0.0.1, declared with 8 CPUs (``SlurmdParameters=config_overrides``, so four shards
  run at once on a 2-core machine) and two GPUs whose device files are character devices made with
  ``mknod`` (the same device as ``/dev/null``): a job asking for GPUs gets ``CUDA_VISIBLE_DEVICES``
  set by SLURM's gres plugin, as on a GPU node, though no GPU is there.

Partitions: ``debug`` (the default) and ``gpu`` (the same node). A requeued job may start again after
10 s (``cred_expire``; SLURM's default is 120 s). Processes are tracked by
``proctrack/linuxproc`` and tasks are not bound (``task/none``): no cgroups, which a container may
not let slurmd use. Ports are free ones picked at start. Client commands (``sbatch``, ``squeue``,
``sacct``, ``scancel``) reach this cluster through ``SLURM_CONF=<dir>/slurm.conf``.

    python -m tests.slurm.cluster start DIR    # prints the SLURM_CONF to export
    python -m tests.slurm.cluster stop DIR     # cancels every job, then stops the daemons
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

DAEMONS = ("munged", "mysqld", "slurmdbd", "slurmctld", "slurmd")   # start order; stopped in reverse
BINARIES = ("munged", "munge", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld", "slurmd",
            "sbatch", "squeue", "sacct", "sacctmgr", "scontrol", "scancel", "sinfo")
INSTALL = "bash tests/slurm/install.sh   (apt-get install slurmctld slurmd slurm-client slurmdbd munge mariadb-server)"
CLUSTER = "arktest"
N_CPUS, MEM_MB, N_GPUS = 8, 16000, 2
DB_USER, DB_PASS, DB_NAME = "slurm", "ark-test-only", "slurm_acct_db"


class ClusterError(RuntimeError):
    """A daemon did not start or the node did not become idle (the message names its log)."""


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class Cluster:
    """The cluster whose files live in ``root`` (see the module doc)."""

    def __init__(self, root: Path | str):
        self.root = Path(root).resolve()
        self.conf = self.root / "slurm.conf"
        self.host = socket.gethostname().split(".")[0]

    @property
    def env(self) -> dict[str, str]:
        """The environment for client commands and jobs: this process's, with SLURM_CONF set to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([_which(cmd[0]), *cmd[1:]], env=self.env, capture_output=True, text=True,
                              check=check, timeout=timeout)

    # -- configuration -------------------------------------------------------------------------------
    def _write_config(self) -> None:
        r = self.root
        for d in ("state", "spool", "db", "log"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r, 0o755)            # munged wants every directory up to its socket searchable
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        for i in range(N_GPUS):       # character devices, as slurmd's gres plugin requires of a GPU's file
            dev = r / f"gpu{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        ports = {k: _free_port() for k in ("mysql", "dbd", "ctld", "slurmd")}
        (r / "gres.conf").write_text(f"AutoDetect=off\nNodeName={self.host} Name=gpu File={r}/gpu[0-{N_GPUS - 1}]\n")
        (r / "slurmdbd.conf").write_text(f"""\
AuthType=auth/munge
AuthInfo=socket={r}/munge.sock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports['dbd']}
SlurmUser=root
LogFile={r}/log/slurmdbd.log
PidFile={r}/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports['mysql']}
StorageUser={DB_USER}
StoragePass={DB_PASS}
StorageLoc={DB_NAME}
""")
        os.chmod(r / "slurmdbd.conf", 0o600)   # slurmdbd refuses a config others can read (it holds a password)
        self.conf.write_text(f"""\
ClusterName={CLUSTER}
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={ports['ctld']}
SlurmdPort={ports['slurmd']}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge.sock,cred_expire=10
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=3
MinJobAge=600
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports['dbd']}
AccountingStoragePass={r}/munge.sock
AccountingStorageTRES=gres/gpu
GresTypes=gpu
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={N_CPUS} RealMemory={MEM_MB} Gres=gpu:{N_GPUS} State=UNKNOWN
PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={self.host} MaxTime=INFINITE State=UP
""")

    # -- start ---------------------------------------------------------------------------------------
    def start(self, timeout_s: float = 120) -> "Cluster":
        """Write the configuration, start the five daemons and wait until the node is idle."""
        missing = missing_binaries()
        if missing:
            raise ClusterError(f"SLURM is not installed here (missing {', '.join(missing)}); install it with: {INSTALL}")
        self._write_config()
        r = self.root
        try:
            self._daemon("munged", ["--force", "-S", f"{r}/munge.sock", f"--key-file={r}/munge.key",
                                    f"--log-file={r}/log/munged.log", f"--pid-file={r}/munged.pid",
                                    f"--seed-file={r}/munged.seed"])
            self._wait(lambda: self.run("munge", "-S", f"{r}/munge.sock", "-n", check=False).returncode == 0,
                       "munged", "log/munged.log", timeout_s)
            self._start_database(timeout_s)
            self._daemon("slurmdbd", [])
            self._wait(self._cluster_registered, "slurmdbd", "log/slurmdbd.log", timeout_s)
            self._daemon("slurmctld", [])
            self._wait(lambda: "UP" in self.run("scontrol", "ping", check=False).stdout, "slurmctld",
                       "log/slurmctld.log", timeout_s)
            self._daemon("slurmd", [])
            self._wait(lambda: self.node_state() == "idle", "slurmd (node idle)", "log/slurmd.log", timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _daemon(self, name: str, args: list[str]) -> None:
        """Start a daemon that forks into the background and writes its pid file."""
        done = subprocess.run([_which(name), *args], env=self.env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ClusterError(f"{name} did not start (exit {done.returncode}): {(done.stderr or done.stdout).strip()}")

    def _start_database(self, timeout_s: float) -> None:
        r = self.root
        if not (r / "db" / "mysql").exists():
            done = subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={r}/db", "--user=root",
                                   "--auth-root-authentication-method=normal", "--skip-test-db"],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise ClusterError(f"mariadb-install-db failed: {done.stderr.strip()[-500:]}")
        port = next(line.split("=")[1] for line in (r / "slurmdbd.conf").read_text().splitlines()
                    if line.startswith("StoragePort="))
        with open(r / "log" / "mysqld.out", "ab") as out:   # mariadbd stays in the foreground: detach it
            subprocess.Popen([_which("mariadbd"), "--no-defaults", f"--datadir={r}/db", f"--socket={r}/mysql.sock",
                              "--bind-address=127.0.0.1", f"--port={port}", "--user=root", f"--pid-file={r}/mysqld.pid",
                              f"--log-error={r}/log/mysqld.err", "--innodb-buffer-pool-size=32M",
                              "--skip-name-resolve"], stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        sql = (f"CREATE USER IF NOT EXISTS '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASS}'; "
               f"CREATE DATABASE IF NOT EXISTS {DB_NAME}; GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';")
        self._wait(lambda: self.run("mariadb", "--no-defaults", "-S", f"{r}/mysql.sock", "-uroot", "-e", sql,
                                    check=False).returncode == 0, "mariadbd", "log/mysqld.err", timeout_s)

    def _cluster_registered(self) -> bool:
        listed = self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster", check=False)
        if listed.returncode != 0:
            return False
        if CLUSTER in listed.stdout.split():
            return True
        self.run("sacctmgr", "-i", "add", "cluster", CLUSTER, check=False)
        return False

    def node_state(self) -> str:
        """The node's state as sinfo shows it ("idle", "mix", "alloc", "down", ...; "" when unreachable)."""
        done = self.run("sinfo", "-h", "-N", "-n", self.host, "-o", "%t", check=False)
        states = {line.strip().rstrip("*~#!%$@^-") for line in done.stdout.splitlines() if line.strip()}
        return states.pop() if done.returncode == 0 and len(states) == 1 else ""   # one line per partition

    def _wait(self, ready, what: str, log: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > deadline:
                tail = ""
                if (self.root / log).exists():
                    tail = "\n".join((self.root / log).read_text(errors="replace").splitlines()[-15:])
                raise ClusterError(f"{what} not ready after {timeout_s:g}s; the end of {self.root / log}:\n{tail}")
            time.sleep(0.25)

    # -- stop ----------------------------------------------------------------------------------------
    def stop(self, timeout_s: float = 30) -> None:
        """Cancel every job of this cluster, wait for them to go, then stop the daemons (SIGTERM, then
        SIGKILL after ``timeout_s``), each by the pid in its pid file. Safe to call twice."""
        if (self.root / "slurmctld.pid").exists() and self.conf.exists():
            jobs = self.run("squeue", "-h", "-o", "%A", check=False).stdout.split()
            if jobs:
                self.run("scancel", *jobs, check=False)
                deadline = time.monotonic() + timeout_s
                while self.run("squeue", "-h", "-o", "%A", check=False).stdout.split() and time.monotonic() < deadline:
                    time.sleep(0.5)
        for name in reversed(DAEMONS):
            pid_file = self.root / f"{name}.pid"
            try:
                pid = int(pid_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            _terminate(pid, timeout_s)
            pid_file.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:   # a zombie child of this process counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _terminate(pid: int, timeout_s: float) -> None:
    if not _alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("start", "stop"):
        raise SystemExit("usage: python -m tests.slurm.cluster start|stop DIR")
    cluster = Cluster(args[1])
    # a SIGTERM (a CI timeout) while starting unwinds through start(), which stops what it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args[0] == "start":
        t = time.monotonic()
        cluster.start()
        print(f"SLURM cluster {CLUSTER} up in {time.monotonic() - t:.1f}s: export SLURM_CONF={cluster.conf}")
    else:
        cluster.stop()


if __name__ == "__main__":
    main()
