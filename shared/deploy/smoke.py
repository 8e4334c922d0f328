"""`intraskill deploy smoke --overlay dev`: run the rendered manifests' containers as processes.

No cluster and no container engine here, so the manifests are proved by running them: the
overlay is rendered with kustomize, and every IntraSkill container (registry-migrate, the
registry's schema wait and server, evaluator, analyst, trainer) starts as a local process with
exactly its rendered command and args (or its image's ENTRYPOINT and CMD), its rendered
environment with ConfigMap and Secret values resolved, over its image's ENV, in the order the
manifests imply: one-shot Jobs (migrate), then the Deployments (init containers first, each
until its readiness probe answers), then the trainer Job, which must finish one round with a
gate. What differs from a pod, and only this (printed at the start):

* Service host names become loopback ports (`http://registry:8000` -> `http://127.0.0.1:P`,
  and the `--port`/`--host` a server binds); a container port no Service fronts (the trainer's
  metrics port) becomes a free port wherever the container's environment names it (a fixed
  9400 would collide with another run on the same machine); `postgres:5432` is the local
  Postgres, in a fresh database made as the dev Postgres's init script makes it (schema owner,
  app role).
* Mount paths become folders: each declared volume a temporary folder (a claim one folder for
  every pod that mounts it; ConfigMap volumes hold their files); the image's paths
  (/opt/venv/bin: this Python's bin; /app/configs: the repository's) likewise, and TMPDIR
  points at the pod's /tmp volume. Each process runs in a private mount namespace whose root
  is remounted read-only with only its writable volumes bind-mounted writable
  (`sandbox.py`; where that is not permitted, the folders' modes only): a write anywhere else
  fails with "Read-only file system", as in the pod. The working folder and HOME are empty
  folders on that read-only root. The image's code is this checkout (PYTHONPATH).
* Before the trainer starts, the smoke does the operator's first step, which no manifest does:
  a frozen S_0 behind alias `current` (four STAND-IN chunks, written with the dev overlay's
  operator token), where a real cluster runs the cold start.
* The policy is the procedural TEST DOUBLE, not a model: the trainer's config says
  `policy = "procedural"` on CPU for one round without rollout servers, and the evaluator's
  backend is `procedural`. vLLM and Postgres do not run; the vllm-eval Service is a FAKE vLLM
  server (TEST DOUBLE: weight endpoints, no model) started with vllm-eval's rendered API key
  (`VLLM_API_KEY`), so the evaluator's checkpoint loading runs against it and the smoke checks
  that every call carried that key. Figures from this run are a test double's, never the
  method's.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import stat
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from shared.deploy import sandbox
from shared.deploy.manifests import (
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
FAKE_VLLM = "tests.trainer.fake_vllm_server"
ADMIN_URL = os.environ.get(
    "INTRASKILL_SMOKE_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
LOG_TAIL = 25


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


def plan(docs: list[dict]) -> tuple[list[list[Unit]], list[str]]:
    """Phases of containers to start in order, and what is left out (with why)."""
    one_shot, servers, batch, skipped = [], [], [], []
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
        if not all(u.container["image"].startswith(IMAGE_PREFIX) for u in units):
            skipped.append(f"{doc['kind']}/{name} (not an IntraSkill image)")
            continue
        if doc["kind"] == "Job":
            (one_shot if "activeDeadlineSeconds" in doc["spec"] else batch).append(units)
        else:
            servers.append(units)
    return [*one_shot, [u for units in servers for u in units], *batch], skipped


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
    objects: Objects = field(init=False)
    ports: dict[str, int] = field(default_factory=dict)
    processes: list[tuple[Unit, subprocess.Popen, Path]] = field(default_factory=list)
    database: str = field(default="")

    def __post_init__(self) -> None:
        self.objects = Objects(render(K8S / "overlays" / self.overlay))
        # one loopback port per Service (the Service's port number stands for it)
        self.ports = {name: free_port() for name in self.objects.services}
        self.database = f"smoke_{os.getpid()}_{secrets.token_hex(3)}"

    # -- mappings --------------------------------------------------------------------------

    def map_urls(self, text: str) -> str:
        def service(match: re.Match) -> str:
            name = match.group(2)
            if name == "postgres":
                return f"{match.group(1)}127.0.0.1:{urlsplit(ADMIN_URL).port or 5432}"
            return f"{match.group(1)}127.0.0.1:{self.ports[name]}"

        names = "|".join(sorted(map(re.escape, self.objects.services), key=len, reverse=True))
        text = re.sub(rf"(://(?:[^@/\s]+@)?)({names})(?:\.[\w.-]+)?:\d+", service, text)
        return re.sub(r"(@127\.0\.0\.1:\d+/)intraskill\b", rf"\g<1>{self.database}", text)

    def folders(self, unit: Unit) -> dict[str, Path]:
        """Container path -> local folder: its mounts, the image's paths, HOME."""
        return self.mounts(unit)[0]

    def mounts(self, unit: Unit) -> tuple[dict[str, Path], list[str], list[str]]:
        """Container path -> local folder (its mounts and the image's paths), and the folders
        it may write and those mounted read-only."""
        spec = pod_template(unit.workload)["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        pod = self.work / "pods" / unit.pod
        out = {"/opt/venv/bin": Path(sys.executable).parent, "/app/configs": REPO / "configs"}
        writable: list[str] = []
        read_only: list[str] = []
        for mount in unit.container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            if "persistentVolumeClaim" in volume:
                folder = self.work / "claims" / volume["persistentVolumeClaim"]["claimName"]
            else:
                folder = pod / mount["name"]
            if "configMap" in volume and not folder.exists():
                self.write_config_map(volume["configMap"]["name"], folder)
            folder.mkdir(parents=True, exist_ok=True)
            out[mount["mountPath"]] = folder
            read_only_volume = "configMap" in volume or "secret" in volume
            (read_only if mount.get("readOnly") or read_only_volume else writable).append(
                str(folder)
            )
        return out, writable, read_only

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

    def localize(self, text: str, folders: dict[str, Path]) -> str:
        return self.map_paths(self.map_urls(text), folders)

    # -- one container ---------------------------------------------------------------------

    def argv(self, unit: Unit, env: dict[str, str]) -> list[str]:
        image = image_of(unit.container["image"])
        command = unit.container.get("command") or image.entrypoint
        args = (
            unit.container.get("args")
            if "args" in unit.container
            else (image.cmd if "command" not in unit.container else [])
        )
        argv = [expand(part, env) for part in [*command, *args]]
        listen = {str(p["containerPort"]): p for p in unit.container.get("ports", [])}
        for index, part in enumerate(argv[:-1]):  # the server binds its Service's loopback port
            if part == "--port" and argv[index + 1] in listen:
                argv[index + 1] = str(self.ports[self.service_of(unit)])
            if part == "--host" and argv[index + 1] == "0.0.0.0":
                argv[index + 1] = "127.0.0.1"
        return argv

    def env(self, unit: Unit) -> dict[str, str]:
        """The container's environment as the pod has it (image ENV, then its rendered env),
        with the TEST DOUBLE settings and its unfronted ports moved to free ones."""
        env = {**image_of(unit.container["image"]).env, **self.objects.env(unit.container)}
        env |= TEST_DOUBLE_ENV.get(unit.pod, {})
        ports = self.unfronted_ports(unit)
        return {key: ports.get(value, value) for key, value in env.items()}

    def unfronted_ports(self, unit: Unit) -> dict[str, str]:
        """Each container port no Service selecting the pod fronts -> a free port (as text)."""
        labels = pod_template(unit.workload)["metadata"]["labels"]
        fronted = {
            port["targetPort"]
            for service in self.objects.services.values()
            if service["spec"]["selector"].items() <= labels.items()
            for port in service["spec"]["ports"]
        }
        return {
            str(port["containerPort"]): str(free_port())
            for port in unit.container.get("ports", [])
            if port.get("name") not in fronted and port["containerPort"] not in fronted
        }

    def service_of(self, unit: Unit) -> str:
        labels = pod_template(unit.workload)["metadata"]["labels"]
        for name, service in self.objects.services.items():
            if service["spec"]["selector"].items() <= labels.items():
                return name
        raise SmokeFailure(unit.label, "no Service selects this pod")

    def start(self, unit: Unit) -> tuple[subprocess.Popen, Path]:
        folders, writable, read_only = self.mounts(unit)
        image = image_of(unit.container["image"])
        home = self.work / "pods" / unit.pod / "home"
        if not home.exists():
            home.mkdir(parents=True)
            home.chmod(0o555)  # the image's HOME and WORKDIR, on a read-only root filesystem
        folders.setdefault(image.workdir, home)
        env = {key: self.localize(value, folders) for key, value in self.env(unit).items()}
        env["PATH"] = env.get("PATH", "").replace("$PATH", os.environ["PATH"])
        env |= {"HOME": str(home), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        if "/tmp" in folders:  # the pod's /tmp is its volume; here the real /tmp is read-only
            env["TMPDIR"] = str(folders["/tmp"])
        argv = [self.localize(part, folders) for part in self.argv(unit, env)]
        argv = sandbox.wrap(argv, writable, read_only)
        log = self.work / "logs" / f"{unit.pod}-{unit.container['name']}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        # No PR_SET_PDEATHSIG: pods start from worker threads, and the signal fires when the
        # forking thread ends; `stop` (also on SIGTERM, see cli.py) ends every process.
        with log.open("w") as out:
            process = subprocess.Popen(
                argv, cwd=folders[image.workdir], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        self.processes.append((unit, process, log))
        return process, log

    def run_to_completion(self, unit: Unit, timeout_s: float) -> Path:
        process, log = self.start(unit)
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SmokeFailure(unit.label, f"still running after {timeout_s:.0f} s", log) from None
        if code != 0:
            raise SmokeFailure(unit.label, f"exited with code {code}", log)
        return log

    def run_until_ready(self, unit: Unit, timeout_s: float = 600.0) -> None:
        process, log = self.start(unit)
        probe = unit.container.get("readinessProbe", {}).get("httpGet")
        url = f"http://127.0.0.1:{self.ports[self.service_of(unit)]}{probe['path']}"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SmokeFailure(unit.label, f"exited with code {process.returncode}", log)
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=5).status_code == 200:
                    return
            time.sleep(1)
        raise SmokeFailure(unit.label, f"{probe['path']} not ready after {timeout_s:.0f} s", log)

    # -- the run ---------------------------------------------------------------------------

    def create_database(self) -> None:
        """What the dev Postgres's init script does: the roles, a database the owner owns."""
        import psycopg

        urls = [
            urlsplit(value)
            for secret in self.objects.secrets.values()
            for value in secret.values()
            if value.startswith("postgresql://")
        ]
        roles = sorted({url.username for url in urls if url.username})
        (owner,) = {
            urlsplit(value).username
            for name, secret in self.objects.secrets.items()
            if name.startswith("registry-database-owner")
            for value in secret.values()
        }
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            for role in roles:
                with contextlib.suppress(psycopg.errors.DuplicateObject):
                    admin.execute(f"CREATE ROLE {role} LOGIN")
            admin.execute(f'CREATE DATABASE "{self.database}" OWNER {owner}')
        with psycopg.connect(
            ADMIN_URL.rsplit("/", 1)[0] + f"/{self.database}", autocommit=True
        ) as db:
            db.execute(f"ALTER SCHEMA public OWNER TO {owner}")

    def drop_database(self) -> None:
        import psycopg

        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')

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

    def start_fake_vllm(self) -> Path:
        """The vllm-eval Service: a FAKE vLLM server (TEST DOUBLE), if this overlay has one,
        checking vllm-eval's API key as vLLM does."""
        log = self.work / "logs" / "vllm-eval-FAKE.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        port = self.ports["vllm-eval"]
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
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    return log
            if process.poll() is not None:
                break
            time.sleep(0.5)
        raise SmokeFailure("TestDouble/vllm-eval", "the fake vLLM server did not start", log)

    def start_pods(self, units: list[Unit]) -> None:
        """Long-running pods at once (each waits on others, as pods do): per pod its init
        containers to completion, then its containers until their readiness probes answer."""
        from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

        pods: dict[str, list[Unit]] = {}
        for unit in units:
            pods.setdefault(unit.pod, []).append(unit)

        def start_pod(members: list[Unit]) -> None:
            for unit in members:
                self.say(f"  start {unit.label}")
                if unit.init:
                    self.run_to_completion(unit, 900)
                else:
                    self.run_until_ready(unit)

        pool = ThreadPoolExecutor(max_workers=len(pods))
        started = [pool.submit(start_pod, members) for members in pods.values()]
        done, _ = wait(started, return_when=FIRST_EXCEPTION)
        failed = [future for future in done if future.exception() is not None]
        if failed:  # the first failure names its container; the others stop with the run
            self.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            raise failed[0].exception()
        pool.shutdown()

    def seed_s0(self) -> None:
        """The operator's step before a first run, which no manifest does: a frozen S_0 behind
        alias `current`. A cold start (Trace2Skill, Gate A) would make it; here the STAND-IN
        S_0 of the TEST DOUBLE run is written with the dev operator's token, with the q and rho
        bounds of the rendered trainer config."""
        from shared.registry_api.client import RegistryClient
        from shared.standin_s0 import seed_standin_s0

        token = next(
            secret["OPERATOR_TOKEN"]
            for secret in self.objects.secrets.values() if "OPERATOR_TOKEN" in secret
        )  # fmt: skip
        trainer = next(
            tomllib.loads(files["trainer.toml"])
            for files in self.objects.config_maps.values() if "trainer.toml" in files
        )  # fmt: skip
        bounds = {name: trainer[name] for name in ("q", "rho_min", "rho_max") if name in trainer}
        url = f"http://127.0.0.1:{self.ports['registry']}"
        with RegistryClient(url, token) as operator:
            bank_id = seed_standin_s0(
                operator,
                alias="current",
                key=f"deploy-smoke:{self.overlay}",
                seeded_by="the deploy smoke",
                **bounds,
            )
        self.say(f"  seeded S_0 = bank {bank_id} (stand-in, as an operator; no cold start)")

    def run(self) -> str:
        began = time.monotonic()
        phases, skipped = plan(self.objects.docs)
        self.say(f"deploy smoke {self.overlay}: work folder {self.work}")
        for line in skipped:
            self.say(f"  left out: {line}")
        self.create_database()
        try:
            if "vllm-eval" in self.ports:
                self.start_fake_vllm()
            trainer = None
            for phase in phases:
                if any(not unit.init and unit.workload["kind"] != "Job" for unit in phase):
                    self.start_pods(phase)
                    self.seed_s0()
                    continue
                for unit in phase:
                    self.say(f"  start {unit.label}")
                    deadline = unit.workload["spec"].get("activeDeadlineSeconds")
                    if deadline is None:  # the batch job: it must finish the round
                        trainer = unit
                    self.run_to_completion(unit, deadline or self.timeout_s)
            return self.summary(trainer, phases, time.monotonic() - began)
        finally:
            self.stop()
            self.drop_database()

    def summary(self, trainer: Unit | None, phases: list[list[Unit]], seconds: float) -> str:
        import json

        if trainer is None:
            raise SmokeFailure("Job/trainer", "the overlay has no trainer Job")
        folders = self.folders(trainer)
        out = next(a.split("=", 1)[1] for a in trainer.container["args"] if a.startswith("--out="))
        record = json.loads((Path(self.map_paths(out, folders)) / "run.json").read_text())
        first = record["rounds"][0]
        if first.get("gate_status") != "complete":
            raise SmokeFailure(trainer.label, f"round 0's gate: {first.get('gate_status')}")
        served = httpx.get(f"http://127.0.0.1:{self.ports['vllm-eval']}/fake/state").json()
        if served["version"] != first["checkpoint_id"]:
            raise SmokeFailure("Deployment/evaluator", f"vllm-eval serves {served['version']}")
        if served["unkeyed"]:
            raise SmokeFailure(
                "Deployment/evaluator", f"called vllm-eval without its API key: {served['unkeyed']}"
            )
        count = sum(len(phase) for phase in phases)
        return (
            f"deploy smoke {self.overlay}: ok, {count} containers from the rendered manifests; "
            f"round 0 gated on {first['checkpoint_id']} (loaded into vllm-eval, a TEST DOUBLE, "
            "with its API key), "
            f"bank {first['bank_id']} -> {first['next_bank_id']}, {seconds:.0f} s"
        )

    def stop(self) -> None:
        for _, process, _ in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for _, process, _ in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


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
