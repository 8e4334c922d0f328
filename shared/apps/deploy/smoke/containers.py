"""One container as a process, as its pod runs it: its rendered command and environment with
Service URLs and container paths made local, in its memory cgroup, sandboxed as the pod's
user; then waited for (a Job's to completion, a server's until its readiness probe answers)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from shared.apps.deploy import sandbox
from shared.apps.deploy.manifests import REPO, Objects, expand, image_of
from shared.apps.deploy.smoke.mounts import PodFolders, Volumes, map_paths
from shared.apps.deploy.smoke.pods import SmokeFailure, Unit
from shared.apps.deploy.smoke.ports import ServicePorts
from shared.apps.deploy.smoke.postgres import postgres_argv, postgres_ready

# The evaluator's rollouts come from the procedural TEST DOUBLE (no vLLM runs here)
TEST_DOUBLE_ENV = {"evaluator": {"EVALUATOR_BACKEND": "procedural"}}
INIT_TIMEOUT_S = 900.0
READY_TIMEOUT_S = 900.0


@dataclass
class Started:
    """A container's process and its log."""

    unit: Unit
    process: subprocess.Popen
    log: Path


class Containers:
    """Starts containers, waits for them and stops them all; the pods' threads share it."""

    def __init__(
        self,
        *,
        objects: Objects,
        docker: Path,
        ports: ServicePorts,
        folders: PodFolders,
        venv_bin: Callable[[Unit], Path | None],
        as_pod_user: bool,
    ) -> None:
        self.objects = objects
        self.docker = docker
        self.ports = ports
        self.folders = folders
        self.venv_bin = venv_bin
        # False: containers on this Python's environment, which may be root's alone, so they
        # run as the invoking user; Postgres always runs as its pod's user
        self.as_pod_user = as_pod_user
        self.started: list[Started] = []
        self.cgroups: dict[str, sandbox.MemoryCgroup] = {}
        self.lock = threading.Lock()
        # set by `stop` (until `reopen`): servers' exits are expected, and no container starts
        # (a pod's thread between two containers would otherwise start one after the stop)
        self.stopping = threading.Event()

    # -- what the container runs -------------------------------------------------------

    def volumes(self, unit: Unit) -> Volumes:
        return self.folders.volumes(unit, None if unit.is_postgres else self.venv_bin(unit))

    def env(self, unit: Unit) -> dict[str, str]:
        """The container's environment as the pod has it (image ENV, then its rendered env),
        with the TEST DOUBLE settings and its port settings on their loopback ports."""
        image = {} if unit.is_postgres else image_of(unit.container["image"], self.docker).env
        env = {**image, **self.objects.env(unit.container)}
        env |= TEST_DOUBLE_ENV.get(unit.pod, {})
        ports = self.ports.port_settings(unit)
        return {key: ports.get(value, value) for key, value in env.items()}

    def argv(self, unit: Unit, env: dict[str, str]) -> list[str]:
        """Its command and args (or the image's ENTRYPOINT and CMD), `$(VAR)` expanded, the
        server bound to its Service's loopback port."""
        image = image_of(unit.container["image"], self.docker)
        command = unit.container.get("command") or image.entrypoint
        if "args" in unit.container:
            args = unit.container["args"]
        else:
            args = image.cmd if "command" not in unit.container else []
        argv = [expand(part, env) for part in [*command, *args]]
        ports = self.ports.port_settings(unit)
        for index, part in enumerate(argv[:-1]):
            if part == "--port":
                argv[index + 1] = ports.get(argv[index + 1], argv[index + 1])
            if part == "--host" and argv[index + 1] == "0.0.0.0":
                argv[index + 1] = "127.0.0.1"
        return argv

    def localize(self, text: str, folders: dict[str, Path], where: str) -> str:
        return map_paths(self.ports.map_urls(text, where), folders)

    def process_env(self, unit: Unit, folders: dict[str, Path], home: Path) -> dict[str, str]:
        env = {k: self.localize(v, folders, unit.label) for k, v in self.env(unit).items()}
        env["PATH"] = env.get("PATH", "$PATH").replace("$PATH", os.environ["PATH"])
        env |= {"HOME": str(home), "OMP_NUM_THREADS": "1"}
        if not unit.is_postgres:
            env["PYTHONPATH"] = str(REPO)
        if "/tmp" in folders:  # the pod's /tmp is its volume; here the real /tmp is read-only
            env["TMPDIR"] = str(folders["/tmp"])
        return env

    # -- starting and waiting ----------------------------------------------------------

    def start(self, unit: Unit) -> Started:
        volumes = self.volumes(unit)
        folders = volumes.folders
        workdir = (
            "/" if unit.is_postgres else image_of(unit.container["image"], self.docker).workdir
        )
        folders.setdefault(workdir, self.folders.home(unit))
        env = self.process_env(unit, folders, folders[workdir])
        if unit.is_postgres:
            port = self.ports.loopback_for(unit, unit.container["ports"][0]["containerPort"])
            argv = postgres_argv(port, env, folders)
        else:
            argv = [self.localize(part, folders, unit.label) for part in self.argv(unit, env)]
        group = self.memory_cgroup(unit)
        user = unit.user() if self.as_pod_user or unit.is_postgres else None
        argv = sandbox.wrap(
            argv, volumes.writable, volumes.read_only, user=user,
            passwd=self.folders.passwd(unit), cgroup=group.path if group else None,
        )  # fmt: skip
        log = self.folders.work / "logs" / f"{unit.pod}-{unit.container['name']}.log"
        # No PR_SET_PDEATHSIG: pods start from worker threads, and the signal fires when the
        # forking thread ends; `stop` (also on SIGTERM, see cli.py) ends every process.
        return self.launch(unit, argv, log, cwd=folders[workdir], env=env)

    def launch(self, unit: Unit, argv: list[str], log: Path, **popen) -> Started:
        log.parent.mkdir(parents=True, exist_ok=True)
        with self.lock, log.open("w") as out:  # under the lock: `stop` sees it or it never starts
            if self.stopping.is_set():
                raise SmokeFailure(unit.label, "not started: the smoke is stopping")
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, **popen)
            started = Started(unit, process, log)
            self.started.append(started)
        return started

    def adopt(self, unit: Unit, process: subprocess.Popen, log: Path) -> None:
        """A process started elsewhere (the FAKE vLLM server), stopped with the others."""
        with self.lock:
            self.started.append(Started(unit, process, log))

    def memory_cgroup(self, unit: Unit) -> sandbox.MemoryCgroup | None:
        if unit.memory_limit is None or not sandbox.MemoryCgroup.supported():
            return None
        name = f"intraskill-smoke-{os.getpid()}/{unit.pod}-{unit.container['name']}"
        group = sandbox.MemoryCgroup.create(name, sandbox.parse_quantity(unit.memory_limit))
        self.cgroups[unit.label] = group
        return group

    def exited(self, unit: Unit, code: int, log: Path) -> SmokeFailure:
        group = self.cgroups.get(unit.label)
        if group is not None and group.oom_kills():
            return SmokeFailure(
                unit.label,
                f"OOM-killed (exit {code}): over its memory limit {unit.memory_limit} "
                f"(peak {group.peak_bytes() / 2**20:.0f} MiB)",
                log,
            )
        return SmokeFailure(unit.label, f"exited with code {code}", log)

    def run_to_completion(self, unit: Unit, timeout_s: float) -> Path:
        started = self.start(unit)
        try:
            code = started.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            reason = f"still running after {timeout_s:.0f} s"
            raise SmokeFailure(unit.label, reason, started.log) from None
        if code != 0:
            raise self.exited(unit, code, started.log)
        return started.log

    def run_until_ready(self, unit: Unit, timeout_s: float = READY_TIMEOUT_S) -> Started:
        started = self.start(unit)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if started.process.poll() is not None:
                raise self.exited(unit, started.process.returncode, started.log)
            if self.ready(unit):
                return started
            time.sleep(1)
        raise SmokeFailure(unit.label, f"not ready after {timeout_s:.0f} s", started.log)

    def ready(self, unit: Unit) -> bool:
        """Its readiness probe, through the Service's loopback port."""
        probe = unit.container.get("readinessProbe", {})
        if "httpGet" in probe:
            port = self.ports.loopback_for(unit, probe["httpGet"]["port"])
            url = f"http://127.0.0.1:{port}{probe['httpGet']['path']}"
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(url, timeout=5).status_code == 200
            return False
        if unit.is_postgres:  # its exec probe, pg_isready
            return postgres_ready(
                self.ports.loopback_for(unit, unit.container["ports"][0]["containerPort"])
            )
        raise SmokeFailure(unit.label, "no readiness probe the smoke can run")

    def watch(self, started: Started) -> None:
        """Until `stop`: a server that exits after it was ready (OOM-killed mid-compile, say)
        fails, named, as the kubelet would report it, not only through a caller's error."""
        while not self.stopping.wait(1):
            if started.process.poll() is not None and not self.stopping.is_set():
                code = started.process.returncode
                failure = self.exited(started.unit, code, started.log)
                raise SmokeFailure(started.unit.label, f"after it was ready: {failure.reason}",
                                   started.log)  # fmt: skip

    def run_pod(
        self, members: list[Unit], job_timeout_s: float, say=print, *, watch: bool = False
    ) -> None:
        """One pod as the kubelet runs it: init containers in order, each to completion, then
        its containers; a Job's run to completion, a server's until its readiness probe (and
        with `watch`, then watched until `stop`)."""
        for unit in members:
            say(f"  start {unit.label}")
            if unit.init:
                self.run_to_completion(unit, INIT_TIMEOUT_S)
            elif unit.is_job:
                deadline = unit.workload["spec"].get("activeDeadlineSeconds", job_timeout_s)
                self.run_to_completion(unit, min(deadline, job_timeout_s))
                say(f"  done  {unit.label}")
            else:
                started = self.run_until_ready(unit)
                say(f"  ready {unit.label}")
                if watch:
                    self.watch(started)

    def peaks(self) -> dict[str, tuple[float, str]]:
        """Each container's peak memory (MiB) and limit, where a cgroup held it."""
        units = {started.unit.label: started.unit for started in self.started}
        return {
            label: (group.peak_bytes() / 2**20, units[label].memory_limit or "")
            for label, group in sorted(self.cgroups.items())
        }

    def stop(self) -> None:
        """Every process ends (SIGTERM, then SIGKILL after 20 s) and the cgroups go."""
        self.stopping.set()
        with self.lock:
            started = list(self.started)
        for one in reversed(started):
            if one.process.poll() is None:
                one.process.terminate()
        for one in started:
            try:
                one.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                one.process.kill()
                one.process.wait()
        for group in self.cgroups.values():
            group.remove()
        if self.cgroups:
            with contextlib.suppress(OSError):
                next(iter(self.cgroups.values())).path.parent.rmdir()
        self.cgroups.clear()
        with self.lock:
            self.started.clear()

    def reopen(self) -> None:
        """After `stop`, containers may start again (the tests reuse one smoke)."""
        self.stopping.clear()
