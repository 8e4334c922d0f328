"""`intraskill deploy smoke --overlay dev`: run the rendered manifests' containers as processes.

No cluster and no container engine here, so the manifests are proved by running them: the
overlay is rendered with kustomize, and every pod starts at once, as Kubernetes starts them:
the overlay's Postgres, the registry-migrate Job, the Deployments (each pod's init containers to
completion, then its containers until their readiness probes answer), the bank-s0 Job and the
trainer Job, which must finish one round with a gate. Each IntraSkill container runs with
exactly its rendered command and args (or its image's ENTRYPOINT and CMD), its rendered
environment with ConfigMap and Secret values resolved, over its image's ENV, and like its pod:

* with only its image's Python packages: a venv built from its Dockerfile's install line
  (`image_venvs.py`), at /opt/venv;
* as the pod's user (runAsUser, runAsGroup, fsGroup: uid 10001), in a memory cgroup whose
  limit is its `limits.memory` (the kernel OOM-kills it as in the pod; its peak is reported);
* in a private mount namespace whose root is read-only, with only its writable volumes
  writable (`sandbox.py`);
* reaching other pods only through a Service's own port: `http://registry:8000` becomes the
  loopback port standing for the registry Service's port 8000, and a URL naming a port the
  Service does not serve fails the smoke, as the connection would fail in the cluster;
* on the overlay's own Postgres (its rendered env, password authentication for TCP, its init
  script), which the smoke starts as the postgres image's entrypoint does.

What still differs from a cluster is printed at the start and listed, with what each could
hide, in docs/deploy.md ("What the smoke still substitutes").
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from shared.apps.deploy import image_venvs, sandbox
from shared.apps.deploy.manifests import (
    IMAGE_PREFIX,
    K8S,
    REPO,
    Objects,
    expand,
    image_of,
    pod_template,
    render,
)

# Jobs the smoke leaves out, and why (their work is the real model's, which the double replaces)
SKIPPED_JOBS = {"prepare-models": "fills the models volume for vLLM; the TEST DOUBLE loads none"}
# The evaluator's rollouts come from the procedural TEST DOUBLE (no vLLM runs here)
TEST_DOUBLE_ENV = {"evaluator": {"EVALUATOR_BACKEND": "procedural"}}
FAKE_VLLM = "shared.runtime.doubles.fake_vllm_server"
POSTGRES_ENTRYPOINT = Path(__file__).with_name("postgres_entrypoint.sh")
DEFAULT_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "postgres": 5432}
TRAINER = "trainer"
LOG_TAIL = 25

SUBSTITUTIONS = (
    "the policy is the procedural TEST DOUBLE (trainer config: procedural, CPU, one round, no "
    "rollout servers; evaluator backend: procedural); vLLM does not run: vllm-eval is a FAKE "
    "vLLM server (weight endpoints, no model) checking the rendered API key",
    "images are venvs built from each Dockerfile's install line, on this machine's Python 3.11 "
    "and OS; the code is this checkout (PYTHONPATH)",
    "Postgres is this machine's server binary run as the postgres image's entrypoint would",
    "no kube-proxy, DNS or NetworkPolicy: Service ports are loopback ports",
    "a failed container fails the smoke; Kubernetes would restart it (backoffLimit, "
    "CrashLoopBackOff)",
)


class SmokeFailure(RuntimeError):
    """A container failed; names it and carries its log's last lines."""

    def __init__(self, container: str, reason: str, log: Path | None = None) -> None:
        tail = ""
        if log is not None and log.exists():
            lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
            tail = "\n".join(f"    {line}" for line in lines)
        super().__init__(
            f"{container}: {reason}" + (f"\n  last log lines:\n{tail}" if tail else "")
        )
        self.container = container


@dataclass
class Unit:
    """One container of one pod, as the smoke starts it."""

    workload: dict
    container: dict
    init: bool

    @property
    def pod(self) -> str:
        return self.workload["metadata"]["name"]

    @property
    def label(self) -> str:
        return f"{self.workload['kind']}/{self.pod}/{self.container['name']}"

    @property
    def is_postgres(self) -> bool:
        return self.container["image"].split(":")[0] in ("postgres", "docker.io/library/postgres")


def plan(docs: list[dict]) -> tuple[dict[str, list[Unit]], list[str]]:
    """The pods to start (each its containers, init containers first), and what is left out
    (with why)."""
    pods: dict[str, list[Unit]] = {}
    skipped = []
    for doc in docs:
        template = pod_template(doc)
        if template is None:
            continue
        name = doc["metadata"]["name"]
        if name in SKIPPED_JOBS:
            skipped.append(f"{doc['kind']}/{name} ({SKIPPED_JOBS[name]})")
            continue
        spec = template["spec"]
        units = [Unit(doc, c, True) for c in spec.get("initContainers", [])]
        units += [Unit(doc, c, False) for c in spec["containers"]]
        ours = all(u.container["image"].startswith(IMAGE_PREFIX) for u in units)
        if not ours and not all(u.is_postgres for u in units):
            skipped.append(f"{doc['kind']}/{name} (not an IntraSkill image)")
            continue
        pods[name] = units
    return pods, skipped


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Smoke:
    overlay: str
    work: Path
    timeout_s: float = 3600.0
    say: object = print
    # False: every container runs on this Python's environment (the fast tests do; the smoke
    # itself never does, since a dependency missing from an image could not show)
    image_venvs: bool = True
    objects: Objects = field(init=False)
    ports: dict[tuple[str, int], int] = field(default_factory=dict)
    processes: list[tuple[Unit, subprocess.Popen, Path]] = field(default_factory=list)
    cgroups: dict[str, sandbox.MemoryCgroup] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # an overlay's name, or the path of an overlay in another copy of deploy/ (whose
        # Dockerfiles then define the images: how a changed tree is tried without editing this)
        path = Path(self.overlay) if "/" in self.overlay else K8S / "overlays" / self.overlay
        self.docker = path.resolve().parents[2] / "docker"
        self.objects = Objects(render(path))
        # one loopback port per port of each Service
        self.ports = {
            (name, int(port["port"])): free_port()
            for name, service in self.objects.services.items()
            for port in service["spec"]["ports"]
        }
        self.lock = threading.Lock()
        self.reachable()

    # -- mappings --------------------------------------------------------------------------

    def map_urls(self, text: str, where: str = "") -> str:
        """Each URL naming a Service -> the loopback port of that Service port; a port the
        Service does not serve fails, as its connection would in the cluster."""
        names = "|".join(sorted(map(re.escape, self.objects.services), key=len, reverse=True))
        if not names:
            return text

        def service(match: re.Match) -> str:
            scheme, userinfo, name, port = match.group(1, 2, 3, 4)
            number = int(port) if port else DEFAULT_PORTS.get(scheme, 80)
            if (name, number) not in self.ports:
                served = sorted(p for n, p in self.ports if n == name)
                raise SmokeFailure(
                    where or "a rendered value",
                    f"{match.group(0)!r} names port {number}, but Service {name} serves "
                    f"{', '.join(map(str, served))}: the connection would fail in the cluster",
                )
            return f"{scheme}://{userinfo or ''}127.0.0.1:{self.ports[(name, number)]}"

        pattern = rf"(\w+)://([^@/\s]+@)?({names})(?![\w-])(?:\.[\w.-]+)?(?::(\d+))?"
        return re.sub(pattern, service, text)

    def mounts(self, unit: Unit) -> tuple[dict[str, Path], list[str], list[str]]:
        """Container path -> local folder (its mounts and the image's paths), and the folders
        it may write and those mounted read-only."""
        spec = pod_template(unit.workload)["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        claims = {
            t["metadata"]["name"]
            for t in unit.workload["spec"].get("volumeClaimTemplates", [])
        }  # fmt: skip
        pod = self.work / "pods" / unit.pod
        out = {"/app/configs": REPO / "configs"}
        if not unit.is_postgres:
            out["/opt/venv/bin"] = self.venv_bin(unit)
        writable: list[str] = []
        read_only: list[str] = []
        for mount in unit.container.get("volumeMounts", []):
            volume = volumes.get(mount["name"], {})
            if "persistentVolumeClaim" in volume:
                folder = self.work / "claims" / volume["persistentVolumeClaim"]["claimName"]
            elif mount["name"] in claims:
                folder = self.work / "claims" / f"{mount['name']}-{unit.pod}-0"
            else:
                folder = pod / mount["name"]
            with self.lock:
                if "configMap" in volume and not folder.exists():
                    self.write_config_map(volume["configMap"]["name"], folder)
                if not folder.exists():
                    folder.mkdir(parents=True)
                    self.own(folder, unit)
            out[mount["mountPath"]] = folder
            read_only_volume = "configMap" in volume or "secret" in volume
            (read_only if mount.get("readOnly") or read_only_volume else writable).append(
                str(folder)
            )
        return out, writable, read_only

    def folders(self, unit: Unit) -> dict[str, Path]:
        return self.mounts(unit)[0]

    def venv_bin(self, unit: Unit) -> Path:
        if not self.image_venvs:
            return Path(sys.executable).parent
        service = image_venvs.service_of(unit.container["image"])
        with self.lock:  # one build at a time; pods of one image share it
            return image_venvs.venv_for(service, docker=self.docker, say=self.say) / "bin"

    def user(self, unit: Unit) -> sandbox.User:
        """The container's user: runAsUser and runAsGroup (container over pod), and fsGroup."""
        pod = pod_template(unit.workload)["spec"].get("securityContext", {})
        own = unit.container.get("securityContext", {})
        uid = own.get("runAsUser", pod.get("runAsUser", 0))
        gid = own.get("runAsGroup", pod.get("runAsGroup", uid))
        groups = tuple(g for g in (pod.get("fsGroup"),) if g is not None)
        return sandbox.User(int(uid), int(gid), groups)

    def own(self, folder: Path, unit: Unit) -> None:
        """A volume as the kubelet hands it over: the pod's user (or fsGroup) may write it."""
        user = self.user(unit)
        if os.geteuid() == 0:
            os.chown(folder, user.uid, user.groups[0] if user.groups else user.gid)
        folder.chmod(0o770 | stat.S_ISGID)

    def write_config_map(self, name: str, folder: Path) -> None:
        folder.mkdir(parents=True)
        for key, value in self.objects.config_maps[name].items():
            path = folder / key
            path.write_text(self.test_double_config(key, value))
            path.chmod(0o444)
        folder.chmod(0o555)

    @staticmethod
    def test_double_config(key: str, text: str) -> str:
        """The trainer's config with the TEST DOUBLE substitutions (see the module doc)."""
        if key != "trainer.toml":
            return text
        for field_name, value in (
            ("policy", '"procedural"'), ("device", '"cpu"'), ("rounds", "1"),
        ):  # fmt: skip
            text = re.sub(rf"(?m)^{field_name} = .*$", f"{field_name} = {value}", text)
        text = re.sub(r"(?ms)^\[rollout_servers\].*?(?=^\[|\Z)", "", text)
        return re.sub(r"(?ms)(^\[warm_start\].*?^enabled = )true", r"\1false", text)

    def map_paths(self, text: str, folders: dict[str, Path]) -> str:
        """Container paths to local folders, in one pass (a mapped folder may itself lie under
        a container path such as /tmp), the longest prefix first."""
        prefixes = "|".join(re.escape(p) for p in sorted(folders, key=len, reverse=True))
        pattern = rf"(?<![\w.-])({prefixes})(?![\w.-])"
        return re.sub(pattern, lambda match: str(folders[match.group(1)]), text)

    def localize(self, text: str, folders: dict[str, Path], where: str = "") -> str:
        return self.map_paths(self.map_urls(text, where), folders)

    # -- ports -----------------------------------------------------------------------------

    def services_of(self, unit: Unit) -> list[dict]:
        labels = pod_template(unit.workload)["metadata"]["labels"]
        return [
            service
            for service in self.objects.services.values()
            if service["spec"]["selector"].items() <= labels.items()
        ]

    def loopback_for(self, unit: Unit, container_port: str | int) -> int | None:
        """The loopback port standing for the Service port that forwards to this container
        port (given by name or number), if a Service fronts it."""
        declared = unit.container.get("ports", [])
        match = next(
            (p for p in declared if container_port in (p.get("name"), p["containerPort"])), None
        )
        if match is None:
            return None
        refs = {match.get("name"), match["containerPort"]}
        for service in self.services_of(unit):
            for port in service["spec"]["ports"]:
                if port.get("targetPort", port["port"]) in refs:
                    return self.ports[(service["metadata"]["name"], int(port["port"]))]
        return None

    def unfronted_ports(self, unit: Unit) -> dict[str, str]:
        """Each container port no Service selecting the pod fronts -> a free port (as text)."""
        return {
            str(port["containerPort"]): str(free_port())
            for port in unit.container.get("ports", [])
            if self.loopback_for(unit, port["containerPort"]) is None
        }

    # -- one container ---------------------------------------------------------------------

    def argv(self, unit: Unit, env: dict[str, str]) -> list[str]:
        image = image_of(unit.container["image"], self.docker)
        command = unit.container.get("command") or image.entrypoint
        args = (
            unit.container.get("args")
            if "args" in unit.container
            else (image.cmd if "command" not in unit.container else [])
        )
        argv = [expand(part, env) for part in [*command, *args]]
        for index, part in enumerate(argv[:-1]):  # the server binds its Service's loopback port
            if part == "--port" and argv[index + 1].isdigit():
                loopback = self.loopback_for(unit, int(argv[index + 1]))
                if loopback is not None:
                    argv[index + 1] = str(loopback)
            if part == "--host" and argv[index + 1] == "0.0.0.0":
                argv[index + 1] = "127.0.0.1"
        return argv

    def env(self, unit: Unit) -> dict[str, str]:
        """The container's environment as the pod has it (image ENV, then its rendered env),
        with the TEST DOUBLE settings and its unfronted ports moved to free ones."""
        image = image_of(unit.container["image"], self.docker).env if not unit.is_postgres else {}
        env = {**image, **self.objects.env(unit.container)}
        env |= TEST_DOUBLE_ENV.get(unit.pod, {})
        ports = self.unfronted_ports(unit)
        return {key: ports.get(value, value) for key, value in env.items()}

    def passwd(self, unit: Unit) -> Path:
        """This machine's /etc/passwd plus the image's user for the pod's uid (the images run
        `useradd --uid 10001 app`; the postgres image has its postgres user)."""
        user = self.user(unit)
        path = self.work / "passwd" / f"{user.uid}"
        with self.lock:
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                lines = Path("/etc/passwd").read_text().splitlines()
                if not any(line.split(":")[2:3] == [str(user.uid)] for line in lines):
                    name = "postgres" if unit.is_postgres else "app"
                    lines.append(f"{name}:x:{user.uid}:{user.gid}::/home/{name}:/usr/sbin/nologin")
                path.write_text("\n".join(lines) + "\n")
                path.chmod(0o644)
        return path

    def memory_cgroup(self, unit: Unit) -> sandbox.MemoryCgroup | None:
        limit = unit.container.get("resources", {}).get("limits", {}).get("memory")
        if limit is None or not sandbox.MemoryCgroup.supported():
            return None
        name = f"intraskill-smoke-{os.getpid()}/{unit.pod}-{unit.container['name']}"
        group = sandbox.MemoryCgroup.create(name, sandbox.parse_quantity(limit))
        self.cgroups[unit.label] = group
        return group

    def start(self, unit: Unit) -> tuple[subprocess.Popen, Path]:
        folders, writable, read_only = self.mounts(unit)
        home = self.work / "pods" / unit.pod / "home"
        workdir = (
            "/" if unit.is_postgres else image_of(unit.container["image"], self.docker).workdir
        )
        with self.lock:
            if not home.exists():
                home.mkdir(parents=True)
                home.chmod(0o555)  # the image's HOME and WORKDIR, on a read-only root filesystem
        folders.setdefault(workdir, home)
        env = {k: self.localize(v, folders, unit.label) for k, v in self.env(unit).items()}
        env["PATH"] = env.get("PATH", "$PATH").replace("$PATH", os.environ["PATH"])
        env |= {"HOME": str(home), "OMP_NUM_THREADS": "1"}
        if not unit.is_postgres:
            env["PYTHONPATH"] = str(REPO)
        if "/tmp" in folders:  # the pod's /tmp is its volume; here the real /tmp is read-only
            env["TMPDIR"] = str(folders["/tmp"])
        if unit.is_postgres:
            argv = self.postgres_argv(unit, env, folders)
        else:
            argv = [self.localize(part, folders, unit.label) for part in self.argv(unit, env)]
        group = self.memory_cgroup(unit)
        # This Python's environment (image_venvs=False) may be root's alone, so its containers
        # run as the invoking user; an image venv and Postgres run as the pod's user.
        user = self.user(unit) if self.image_venvs or unit.is_postgres else None
        argv = sandbox.wrap(
            argv, writable, read_only, user=user, passwd=self.passwd(unit),
            cgroup=group.path if group else None,
        )  # fmt: skip
        log = self.work / "logs" / f"{unit.pod}-{unit.container['name']}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        # No PR_SET_PDEATHSIG: pods start from worker threads, and the signal fires when the
        # forking thread ends; `stop` (also on SIGTERM, see cli.py) ends every process.
        with log.open("w") as out:
            process = subprocess.Popen(
                argv, cwd=folders[workdir], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        with self.lock:
            self.processes.append((unit, process, log))
        return process, log

    def postgres_argv(self, unit: Unit, env: dict[str, str], folders: dict[str, Path]) -> list:
        """The postgres image's entrypoint: initdb with the rendered user and password (local
        socket trust, TCP scram-sha-256), the init scripts, then the server on the Service's
        loopback port with its socket in the pod's /var/run/postgresql volume."""
        port = self.loopback_for(unit, unit.container["ports"][0]["containerPort"])
        env |= {
            "PGPORT": str(port),
            "PGHOST": str(folders["/var/run/postgresql"]),
            "INITDB_DIR": str(folders["/docker-entrypoint-initdb.d"]),
        }
        return ["bash", str(POSTGRES_ENTRYPOINT)]

    def exited(self, unit: Unit, code: int, log: Path) -> SmokeFailure:
        group = self.cgroups.get(unit.label)
        if group is not None and group.oom_kills():
            limit = unit.container["resources"]["limits"]["memory"]
            return SmokeFailure(
                unit.label,
                f"OOM-killed (exit {code}): over its memory limit {limit} "
                f"(peak {group.peak_bytes() / 2**20:.0f} MiB)",
                log,
            )
        return SmokeFailure(unit.label, f"exited with code {code}", log)

    def run_to_completion(self, unit: Unit, timeout_s: float) -> Path:
        process, log = self.start(unit)
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SmokeFailure(unit.label, f"still running after {timeout_s:.0f} s", log) from None
        if code != 0:
            raise self.exited(unit, code, log)
        return log

    def run_until_ready(self, unit: Unit, timeout_s: float = 900.0) -> None:
        process, log = self.start(unit)
        probe = unit.container.get("readinessProbe", {})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise self.exited(unit, process.returncode, log)
            if self.ready(unit, probe):
                return
            time.sleep(1)
        raise SmokeFailure(unit.label, f"not ready after {timeout_s:.0f} s", log)

    def ready(self, unit: Unit, probe: dict) -> bool:
        if "httpGet" in probe:
            port = self.loopback_for(unit, probe["httpGet"]["port"])
            url = f"http://127.0.0.1:{port}{probe['httpGet']['path']}"
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(url, timeout=5).status_code == 200
            return False
        if unit.is_postgres:  # its exec probe, pg_isready, on the Service's loopback port
            port = self.loopback_for(unit, unit.container["ports"][0]["containerPort"])
            command = ["pg_isready", "-h", "127.0.0.1", "-p", str(port), "-q"]
            return subprocess.run(command, capture_output=True).returncode == 0
        raise SmokeFailure(unit.label, "no readiness probe the smoke can run")

    # -- the run ---------------------------------------------------------------------------

    def vllm_eval_key(self) -> str:
        """The API key the rendered vllm-eval container starts with (its VLLM_API_KEY)."""
        (server,) = [
            container
            for doc in self.objects.docs
            if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "vllm-eval"
            for container in doc["spec"]["template"]["spec"]["containers"]
        ]
        key = self.objects.env(server).get("VLLM_API_KEY", "")
        if not key:
            raise SmokeFailure("Deployment/vllm-eval", "starts without an API key (VLLM_API_KEY)")
        return key

    def vllm_eval_port(self) -> int:
        (port,) = [p for (name, _), p in self.ports.items() if name == "vllm-eval"]
        return port

    def start_fake_vllm(self) -> Path:
        """The vllm-eval Service: a FAKE vLLM server (TEST DOUBLE), if this overlay has one,
        checking vllm-eval's API key as vLLM does."""
        log = self.work / "logs" / "vllm-eval-FAKE.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        port = self.vllm_eval_port()
        argv = [sys.executable, "-m", FAKE_VLLM, "--port", str(port), "--served-model", "policy"]
        with log.open("w") as out:
            process = subprocess.Popen(
                [*argv, "--api-key", self.vllm_eval_key()],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        fake = Unit(
            {"kind": "TestDouble", "metadata": {"name": "vllm-eval"}}, {"name": "fake"}, False
        )
        self.processes.append((fake, process, log))
        deadline = time.monotonic() + 900  # its imports take minutes on a loaded machine
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    return log
            if process.poll() is not None:
                break
            time.sleep(0.5)
        raise SmokeFailure("TestDouble/vllm-eval", "the fake vLLM server did not start", log)

    def run_pod(self, members: list[Unit]) -> None:
        """One pod as the kubelet runs it: init containers in order, each to completion, then
        its containers; a Job's run to completion, a server's until its readiness probe."""
        for unit in members:
            self.say(f"  start {unit.label}")
            job = unit.workload["kind"] == "Job"
            if unit.init:
                self.run_to_completion(unit, 900)
            elif job:
                deadline = unit.workload["spec"].get("activeDeadlineSeconds", self.timeout_s)
                self.run_to_completion(unit, min(deadline, self.timeout_s))
                self.say(f"  done  {unit.label}")
            else:
                self.run_until_ready(unit)
                self.say(f"  ready {unit.label}")

    def run(self) -> str:
        began = time.monotonic()
        pods, skipped = plan(self.objects.docs)
        if TRAINER not in pods:
            raise SmokeFailure("Job/trainer", "the overlay has no trainer Job")
        self.say(f"deploy smoke {self.overlay}: work folder {self.work}")
        for line in skipped:
            self.say(f"  left out: {line}")
        for line in SUBSTITUTIONS:
            self.say(f"  substituted: {line}")
        if not self.image_venvs:
            self.say(
                "  substituted: --this-python: every container on this Python's environment as "
                "the invoking user (a dependency missing from an image cannot show)"
            )
        if not sandbox.MemoryCgroup.supported():
            self.say("  substituted: memory limits NOT enforced (no writable memory cgroup)")
        if self.image_venvs:  # built before the clock of any pod starts
            for units in pods.values():
                for unit in units:
                    if not unit.is_postgres:
                        self.venv_bin(unit)
        try:
            if any(name == "vllm-eval" for name, _ in self.ports):
                self.start_fake_vllm()
            self.start_all(pods)
            return self.summary(pods, time.monotonic() - began)
        finally:
            self.stop()

    def reachable(self) -> None:
        """The pods' users (uid 10001, 999) must reach the work folder: every folder above it
        searchable by others."""
        self.work.chmod(0o755)
        for folder in self.work.parents:
            if not folder.stat().st_mode & stat.S_IXOTH:
                raise SmokeFailure(
                    "the work folder", f"{folder} is private: the pods' users cannot reach "
                    f"{self.work}; choose a --work folder under /tmp",
                )  # fmt: skip

    def start_all(self, pods: dict[str, list[Unit]]) -> None:
        """Every pod at once; returns when the trainer Job has finished, and fails on the
        first container that fails."""
        pool = ThreadPoolExecutor(max_workers=len(pods))
        futures = {pool.submit(self.run_pod, members): name for name, members in pods.items()}
        try:
            # FIRST_EXCEPTION: back at the first failure, else once every pod is ready or done
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    raise future.exception()
        finally:
            self.stop()
            pool.shutdown(wait=True, cancel_futures=True)

    def summary(self, pods: dict[str, list[Unit]], seconds: float) -> str:
        import json

        trainer = next(u for u in pods[TRAINER] if not u.init)
        folders = self.folders(trainer)
        out = next(a.split("=", 1)[1] for a in trainer.container["args"] if a.startswith("--out="))
        record = json.loads((Path(self.map_paths(out, folders)) / "run.json").read_text())
        first = record["rounds"][0]
        if first.get("gate_status") != "complete":
            raise SmokeFailure(trainer.label, f"round 0's gate: {first.get('gate_status')}")
        state = f"http://127.0.0.1:{self.vllm_eval_port()}/fake/state"
        served = httpx.get(state).json()
        if served["version"] != first["checkpoint_id"]:
            raise SmokeFailure("Deployment/evaluator", f"vllm-eval serves {served['version']}")
        if served["unkeyed"]:
            raise SmokeFailure(
                "Deployment/evaluator", f"called vllm-eval without its API key: {served['unkeyed']}"
            )
        for label, group in sorted(self.cgroups.items()):
            unit = next(u for units in pods.values() for u in units if u.label == label)
            limit = unit.container["resources"]["limits"]["memory"]
            self.say(f"  memory {label}: peak {group.peak_bytes() / 2**20:.0f} MiB of {limit}")
        count = sum(len(units) for units in pods.values())
        how = (
            "each from its image's venv as its pod's user"
            if self.image_venvs
            else "on THIS PYTHON's environment (--this-python: not the images' venvs)"
        )
        return (
            f"deploy smoke {self.overlay}: ok, {count} containers from the rendered manifests, "
            f"started together, {how}, under their memory limits; "
            f"S_0 from the deployment's bank-s0 Job; round 0 gated on "
            f"{first['checkpoint_id']} (loaded into vllm-eval, a TEST DOUBLE, with its API key), "
            f"bank {first['bank_id']} -> {first['next_bank_id']}, {seconds:.0f} s"
        )

    def stop(self) -> None:
        with self.lock:
            processes = list(self.processes)
        for _, process, _ in reversed(processes):
            if process.poll() is None:
                process.terminate()
        for _, process, _ in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for group in self.cgroups.values():
            group.remove()
        if self.cgroups:
            with contextlib.suppress(OSError):
                next(iter(self.cgroups.values())).path.parent.rmdir()


@contextlib.contextmanager
def work_folder(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    folder = Path(tempfile.mkdtemp(prefix="intraskill-smoke-"))
    try:
        yield folder
    finally:
        for path in folder.rglob("*"):  # read-only folders first become removable
            if path.is_dir() and not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        folder.chmod(folder.stat().st_mode | stat.S_IWUSR)
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
