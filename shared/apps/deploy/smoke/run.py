"""The smoke's run: render, build the images' venvs, start every pod at once (and the FAKE
vllm-eval), wait for the trainer Job, check its round, stop everything, say what it found."""

from __future__ import annotations

import contextlib
import json
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from shared.apps.deploy import image_venvs, sandbox
from shared.apps.deploy.manifests import K8S, Objects, render
from shared.apps.deploy.smoke.containers import Containers
from shared.apps.deploy.smoke.fake_vllm import (
    LABEL,
    check_served,
    start_fake_vllm,
    vllm_eval_key,
)
from shared.apps.deploy.smoke.mounts import PodFolders, map_paths
from shared.apps.deploy.smoke.pods import TRAINER, SmokeFailure, Unit, plan
from shared.apps.deploy.smoke.ports import ServicePorts

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
THIS_PYTHON = (
    "--this-python: every container on this Python's environment as the invoking user (a "
    "dependency missing from an image cannot show)"
)


def overlay_path(overlay: str) -> Path:
    """An overlay's name, or the path of an overlay in another copy of deploy/ (whose
    Dockerfiles then define the images: how a changed tree is tried without editing this)."""
    return Path(overlay) if "/" in overlay else K8S / "overlays" / overlay


def one_line_at_a_time(say):
    """`say` behind a lock: lines from the pods' threads never run into each other."""
    lock = threading.Lock()

    def said(line: str) -> None:
        with lock:
            say(line)

    return said


def check_reachable(work: Path) -> None:
    """The pods' users (uid 10001, 999) must reach the work folder: every folder above it
    searchable by others."""
    work.chmod(0o755)
    for folder in work.parents:
        if not folder.stat().st_mode & stat.S_IXOTH:
            raise SmokeFailure(
                "the work folder", f"{folder} is private: the pods' users cannot reach "
                f"{work}; choose a --work folder under /tmp",
            )  # fmt: skip


class Smoke:
    """`intraskill deploy smoke` on one overlay, in one work folder."""

    def __init__(
        self,
        overlay: str,
        work: Path,
        *,
        timeout_s: float = 3600.0,
        say=print,
        image_venvs: bool = True,
    ) -> None:
        self.overlay = overlay
        self.work = work
        self.timeout_s = timeout_s
        self.say = one_line_at_a_time(say)  # the pods' threads report at once
        # False: every container runs on this Python's environment (the fast tests do; the
        # smoke itself never does, since a dependency missing from an image could not show)
        self.image_venvs = image_venvs
        path = overlay_path(overlay)
        self.docker = path.resolve().parents[2] / "docker"
        self.objects = Objects(render(path))
        self.services = ServicePorts(self.objects.services)
        self.venv_lock = threading.Lock()
        check_reachable(work)
        self.containers = Containers(
            objects=self.objects, docker=self.docker, ports=self.services,
            folders=PodFolders(work, self.objects.config_maps), venv_bin=self.venv_bin,
            as_pod_user=image_venvs,
        )  # fmt: skip

    def venv_bin(self, unit: Unit) -> Path:
        if not self.image_venvs:
            return Path(sys.executable).parent
        service = image_venvs.service_of(unit.container["image"])
        with self.venv_lock:  # one build at a time; pods of one image share it
            return image_venvs.venv_for(service, docker=self.docker, say=self.say) / "bin"

    def run(self) -> str:
        """The whole smoke; its closing line, or SmokeFailure naming the failed container."""
        began = time.monotonic()
        pods, skipped = plan(self.objects.docs)
        if TRAINER not in pods:
            raise SmokeFailure("Job/trainer", "the overlay has no trainer Job")
        self.announce(skipped)
        if self.image_venvs:  # built before the clock of any pod starts
            for unit in (u for units in pods.values() for u in units if not u.is_postgres):
                self.venv_bin(unit)
        try:
            if self.services.of("vllm-eval"):
                self.start_vllm_eval()
            self.start_all(pods)
            return self.summary(pods, time.monotonic() - began)
        finally:
            self.containers.stop()

    def announce(self, skipped: list[str]) -> None:
        self.say(f"deploy smoke {self.overlay}: work folder {self.work}")
        for line in skipped:
            self.say(f"  left out: {line}")
        for line in SUBSTITUTIONS + (() if self.image_venvs else (THIS_PYTHON,)):
            self.say(f"  substituted: {line}")
        if not sandbox.MemoryCgroup.supported():
            self.say("  substituted: memory limits NOT enforced (no writable memory cgroup)")

    def start_vllm_eval(self) -> None:
        (port,) = self.services.of("vllm-eval")
        log = self.work / "logs" / "vllm-eval-FAKE.log"
        process = start_fake_vllm(port, vllm_eval_key(self.objects), log)
        double = Unit(
            {"kind": "TestDouble", "metadata": {"name": "vllm-eval"}}, {"name": "fake"}, False
        )
        self.containers.adopt(double, process, log)
        self.say(f"  ready {LABEL}")

    def start_all(self, pods: dict[str, list[Unit]]) -> None:
        """Every pod at once; returns when the trainer Job has finished, and fails on the first
        container that fails (a server that dies after it was ready included)."""
        pool = ThreadPoolExecutor(max_workers=len(pods))
        futures = {
            name: pool.submit(self.containers.run_pod, members, self.timeout_s, self.say,
                              watch=True)
            for name, members in pods.items()
        }  # fmt: skip
        try:
            pending = set(futures.values())
            while not futures[TRAINER].done():
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    if future.exception() is not None:
                        raise future.exception()
            futures[TRAINER].result()  # raises the trainer's own failure
        except BaseException:
            self.containers.stop()  # the other pods' threads wait on their processes
            raise
        finally:
            if futures[TRAINER].done():  # the servers' watches end with `stop` (in `run`)
                pool.shutdown(wait=False, cancel_futures=True)
            else:
                pool.shutdown(wait=True, cancel_futures=True)

    def round_record(self, trainer: Unit) -> dict:
        """Round 0 of the trainer's run.json (its --out folder); its gate must be complete."""
        folders = self.containers.volumes(trainer).folders
        out = next(a.split("=", 1)[1] for a in trainer.container["args"] if a.startswith("--out="))
        record = json.loads((Path(map_paths(out, folders)) / "run.json").read_text())
        first = record["rounds"][0]
        if first.get("gate_status") != "complete":
            raise SmokeFailure(trainer.label, f"round 0's gate: {first.get('gate_status')}")
        return first

    def summary(self, pods: dict[str, list[Unit]], seconds: float) -> str:
        first = self.round_record(next(u for u in pods[TRAINER] if not u.init))
        if self.services.of("vllm-eval"):
            check_served(self.services.of("vllm-eval")[0], first["checkpoint_id"])
        for label, (peak, limit) in self.containers.peaks().items():
            self.say(f"  memory {label}: peak {peak:.0f} MiB of {limit}")
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


@contextlib.contextmanager
def work_folder(keep: Path | None) -> Iterator[Path]:
    """`keep`, or a temporary folder removed afterwards (read-only parts included)."""
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
        shutil.rmtree(folder, ignore_errors=True)
