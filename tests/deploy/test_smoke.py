"""`intraskill deploy smoke`: the rendered manifests run as local processes.

The whole run (one round with a gate, every IntraSkill container from its image's venv) takes
many minutes on two cores, so it is a slow test (`--run-slow`, or `make deploy-smoke`); the
default suite checks the smoke's mappings, its Postgres, its memory limits and image venvs'
recipes, and runs one rendered container, the analyst, as the smoke starts it (on this Python's
environment: building the analyst's image venv takes minutes).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.apps.deploy import image_venvs, sandbox
from shared.apps.deploy.manifests import REPO, parse_dockerfile
from shared.apps.deploy.smoke import Smoke, SmokeFailure, Unit, plan, work_folder
from shared.apps.deploy.smoke.fake_vllm import vllm_eval_key
from shared.apps.deploy.smoke.mounts import config_with_test_double, map_paths


@pytest.fixture(scope="module")
def smoke() -> Iterator[Smoke]:
    """A smoke of dev whose containers run on this Python's environment, in a work folder the
    pods' users can reach (pytest's own temporary folders are private to root)."""
    pytest.importorskip("yaml")
    with work_folder(None) as work:
        yield Smoke("dev", work, image_venvs=False)


def unit_of(smoke: Smoke, kind: str, name: str) -> Unit:
    pods, _ = plan(smoke.objects.docs)
    return next(
        unit for unit in pods[name] if unit.workload["kind"] == kind and not unit.init
    )  # fmt: skip


def test_every_pod_starts_with_postgres_and_the_s0_job(smoke) -> None:
    pods, skipped = plan(smoke.objects.docs)
    assert set(pods) == {
        "postgres", "registry-migrate", "registry", "evaluator", "analyst", "console", "bank-s0",
        "trainer",
    }  # fmt: skip
    registry = [unit.label for unit in pods["registry"]]
    assert registry == ["Deployment/registry/wait-for-schema", "Deployment/registry/registry"]
    assert any("vllm" in line for line in skipped) and any("prepare-models" in s for s in skipped)


def test_service_urls_become_the_loopback_port_of_that_service_port(smoke) -> None:
    port = smoke.services.ports[("registry", 8000)]
    assert smoke.services.map_urls("--registry-url=http://registry:8000") == (
        f"--registry-url=http://127.0.0.1:{port}"
    )
    url = smoke.services.map_urls("postgresql://intraskill_app:pw@postgres:5432/intraskill")
    postgres = smoke.services.ports[("postgres", 5432)]
    assert url == f"postgresql://intraskill_app:pw@127.0.0.1:{postgres}/intraskill"
    # a pod's name that merely starts with a Service's name is not that Service
    pod_url = "http://vllm-rollout-0.vllm-rollout:8000/v1"
    assert smoke.services.map_urls(pod_url) == pod_url


@pytest.mark.parametrize("url", ["http://registry:8001", "http://registry", "http://analyst:8000"])
def test_a_url_naming_a_port_its_service_does_not_serve_fails(smoke, url) -> None:
    with pytest.raises(SmokeFailure, match="the connection would fail") as failure:
        smoke.services.map_urls(f"--registry-url={url}/v1", "Job/trainer/trainer")
    assert failure.value.container == "Job/trainer/trainer"


def test_a_port_no_service_fronts_becomes_a_free_one(smoke) -> None:
    """The trainer's metrics port (TRAINER_METRICS_PORT=9400, no Service) moves to a free port:
    two smokes on one machine must not both bind 9400."""
    trainer = unit_of(smoke, "Job", "trainer")
    assert smoke.objects.env(trainer.container)["TRAINER_METRICS_PORT"] == "9400"  # rendered
    port = smoke.containers.env(trainer)["TRAINER_METRICS_PORT"]
    assert port.isdigit() and port != "9400"
    assert int(port) not in smoke.services.ports.values()


def test_a_port_setting_becomes_its_service_ports_loopback_port(smoke) -> None:
    """REGISTRY_METRICS_PORT=9000 and `--port 8000` name container ports that the registry
    Service fronts (its `metrics` and `http` ports): each becomes that Service port's loopback
    port, where the smoke's callers reach them."""
    registry = unit_of(smoke, "Deployment", "registry")
    env = smoke.containers.env(registry)
    assert env["REGISTRY_METRICS_PORT"] == str(smoke.services.ports[("registry", 9000)])
    argv = smoke.containers.argv(registry, env)
    assert argv[argv.index("--port") + 1] == str(smoke.services.ports[("registry", 8000)])


def test_containers_run_as_their_pods_user(smoke) -> None:
    assert unit_of(smoke, "Deployment", "registry").user() == sandbox.User(10001, 10001, (10001,))
    assert unit_of(smoke, "StatefulSet", "postgres").user().uid == 999


def test_the_overlays_postgres_takes_passwords_and_runs_its_init_script(smoke) -> None:
    """The dev Postgres as the smoke starts it: its rendered superuser, the init script's
    roles with their rendered passwords over TCP, a wrong password refused, and `public`
    owned by the schema owner with CREATE revoked from PUBLIC."""
    psycopg = pytest.importorskip("psycopg")
    pods, _ = plan(smoke.objects.docs)
    port = smoke.services.ports[("postgres", 5432)]
    base = f"127.0.0.1:{port}/intraskill"
    try:
        smoke.containers.run_pod(pods["postgres"], 900)
        with psycopg.connect(f"postgresql://intraskill_app:intraskill-dev-app@{base}") as app:
            assert app.execute("SELECT current_user").fetchone() == ("intraskill_app",)
            can_create = app.execute("SELECT has_schema_privilege('public', 'CREATE')")
            assert can_create.fetchone() == (False,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(f"postgresql://intraskill_app:wrong@{base}")
        owner = "postgresql://intraskill_owner:intraskill-dev-owner@" + base
        with psycopg.connect(owner) as connection:
            row = connection.execute(
                "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'public'"
            ).fetchone()
            assert row == ("intraskill_owner",)
    finally:
        smoke.containers.stop()
        smoke.containers.reopen()


@pytest.mark.skipif(not sandbox.MemoryCgroup.supported(), reason="needs a writable memory cgroup")
def test_a_container_over_its_memory_limit_is_oom_killed_and_named(smoke, tmp_path) -> None:
    unit = copy.deepcopy(unit_of(smoke, "Job", "bank-s0"))
    unit.container["command"] = ["python3", "-c", "b = bytearray(200 * 2**20); print('lived')"]
    unit.container.pop("args")
    unit.container["resources"]["limits"]["memory"] = "64Mi"
    try:
        with pytest.raises(SmokeFailure, match=r"OOM-killed .* memory limit 64Mi"):
            smoke.containers.run_to_completion(unit, 120)
        unit.container["resources"]["limits"]["memory"] = "512Mi"
        smoke.containers.run_to_completion(unit, 120)
        peak = smoke.containers.cgroups[unit.label].peak_bytes()
        assert 200 * 2**20 <= peak <= 512 * 2**20
    finally:
        smoke.containers.stop()
        smoke.containers.reopen()


def test_each_image_venv_replays_its_dockerfiles_install_line() -> None:
    def recipe(service: str) -> list[list[str]]:
        text = (REPO / f"deploy/docker/{service}.Dockerfile").read_text()
        return [image_venvs.localize(c, "WHEEL") for c in image_venvs.install_commands(text)]

    assert recipe("registry") == recipe("evaluator") == [["--no-cache-dir", "WHEEL"]]
    assert recipe("analyst") == [
        ["--no-cache-dir", "torch==2.13.0"],
        ["--no-cache-dir", "WHEEL[train]"],
    ]
    assert recipe("trainer")[0] == ["--no-cache-dir", "WHEEL[train]"]
    mutated = (REPO / "deploy/docker/trainer.Dockerfile").read_text().replace("[train]", "")
    first = image_venvs.install_commands(mutated)[0]
    assert image_venvs.localize(first, "W") == ["--no-cache-dir", "W"]


def test_paths_map_in_one_pass(tmp_path, smoke) -> None:
    folders = {"/tmp": tmp_path / "tmp", "/scripts": tmp_path / "scripts"}
    assert map_paths("python /scripts/w.py /tmp/x /tmpx", folders) == (
        f"python {tmp_path}/scripts/w.py {tmp_path}/tmp/x /tmpx"
    )


def test_the_trainer_config_becomes_the_test_double_and_nothing_else() -> None:
    text = (REPO / "deploy/k8s/overlays/dev/trainer.toml").read_text()
    changed = config_with_test_double("trainer.toml", text)
    import tomllib

    before, after = tomllib.loads(text), tomllib.loads(changed)
    assert after["policy"] == "procedural" and after["device"] == "cpu" and after["rounds"] == 1
    assert "rollout_servers" not in after and after["warm_start"]["enabled"] is False
    keep = set(before) - {"policy", "device", "rounds", "rollout_servers", "warm_start"}
    assert {k: after[k] for k in keep} == {k: before[k] for k in keep}


def test_the_image_supplies_entrypoint_env_and_workdir() -> None:
    image = parse_dockerfile((REPO / "deploy/docker/analyst.Dockerfile").read_text())
    assert image.entrypoint == ["intraskill", "analyst"] and image.workdir == "/home/app"
    assert image.env["NUMBA_CACHE_DIR"] == "/tmp/numba"


def test_the_fake_gate_server_checks_vllm_evals_rendered_key(smoke) -> None:
    """The FAKE vllm-eval starts with the key the rendered Deployment reads from its Secret, and
    the evaluator's rendered environment sends that same key."""
    key = vllm_eval_key(smoke.objects)
    evaluator = unit_of(smoke, "Deployment", "evaluator").container
    assert key and smoke.objects.env(evaluator)["EVALUATOR_OPENAI_API_KEY"] == key


def start_analyst(smoke: Smoke, container: dict, while_up=None) -> None:
    """The analyst's rendered container as the smoke starts it, ready on /healthz (no
    registry runs in this test, so /readyz would wait for one); `while_up(process)` runs
    before it is stopped."""
    unit = unit_of(smoke, "Deployment", "analyst")
    unit = Unit(unit.workload, container, False)
    unit.container["readinessProbe"] = {"httpGet": {"path": "/healthz", "port": "http"}}
    try:
        started = smoke.containers.run_until_ready(unit, timeout_s=300)
        if while_up is not None:
            while_up(started.process)
    finally:
        smoke.containers.stop()
        smoke.containers.reopen()


def test_the_rendered_analyst_starts_with_a_read_only_working_folder(smoke) -> None:
    """The pod's root filesystem is read-only: the folder the analyst runs in has no write
    bit for anyone, and it still gets ready (its data goes to ANALYST_DATA_DIR's volume)."""
    rendered = unit_of(smoke, "Deployment", "analyst").container
    seen: dict[str, int] = {}

    def working_folder(process) -> None:
        seen["mode"] = Path(f"/proc/{process.pid}/cwd").resolve().stat().st_mode

    start_analyst(smoke, copy.deepcopy(rendered), while_up=working_folder)
    assert seen and seen["mode"] & 0o222 == 0, oct(seen.get("mode", 0))


def test_without_its_data_dir_the_analyst_dies_as_in_its_pod(smoke) -> None:
    """Blocker 1 as the platform team met it: the default relative data folder lands on the
    read-only root (here: the read-only working folder), and the application does not start."""
    container = copy.deepcopy(unit_of(smoke, "Deployment", "analyst").container)
    container["env"] = [v for v in container["env"] if v["name"] != "ANALYST_DATA_DIR"]
    with pytest.raises(SmokeFailure, match="Deployment/analyst/analyst: exited") as failure:
        start_analyst(smoke, container)
    assert "runs" in str(failure.value) and "startup failed" in str(failure.value).lower()


@pytest.mark.skipif(not sandbox.MemoryCgroup.supported(), reason="needs a writable memory cgroup")
def test_the_analyst_under_a_limit_below_its_rss_is_oom_killed_and_named(smoke) -> None:
    """The analyst's own process under a limit below what it holds when it is up (its cgroup's
    peak was 46 MiB at readiness here, 585 MiB through the smoke's compile): the kernel kills
    it before it is ready, and the smoke says so with its limit."""
    container = copy.deepcopy(unit_of(smoke, "Deployment", "analyst").container)
    container["resources"]["limits"]["memory"] = "24Mi"
    with pytest.raises(SmokeFailure, match=r"analyst/analyst: OOM-killed .* memory limit 24Mi"):
        start_analyst(smoke, container)


def with_evaluator_registry_url(tmp_path: Path, url: str) -> Path:
    """A copy of deploy/ whose evaluator calls the registry at `url`; its dev overlay."""
    shutil.copytree(REPO / "deploy", tmp_path / "deploy")
    manifest = tmp_path / "deploy/k8s/base/evaluator.yaml"
    text = manifest.read_text()
    assert text.count("value: http://registry:8000") == 1
    manifest.write_text(text.replace("value: http://registry:8000", f"value: {url}"))
    return tmp_path / "deploy/k8s/overlays/dev"


def test_a_wrong_port_in_a_service_url_fails_the_smoke_naming_the_container(tmp_path) -> None:
    """The whole smoke on a copy of dev whose evaluator names the registry's port 8001: it
    stops before the round, naming the evaluator and the Service's real ports."""
    overlay = with_evaluator_registry_url(tmp_path, "http://registry:8001")
    with work_folder(None) as work, pytest.raises(SmokeFailure) as failure:
        Smoke(str(overlay), work, image_venvs=False, say=lambda _: None).run()
    assert failure.value.container == "Deployment/evaluator/evaluator"
    assert "names port 8001, but Service registry serves 8000, 9000" in failure.value.reason


def test_every_rendered_url_and_port_of_dev_maps_onto_a_service_port(smoke) -> None:
    """The other side of the test above: no container of the shipped dev overlay names a port
    its Service does not serve (every env value and argument localizes)."""
    pods, _ = plan(smoke.objects.docs)
    for unit in (u for units in pods.values() for u in units if not u.is_postgres):
        env = smoke.containers.env(unit)
        for text in [*env.values(), *smoke.containers.argv(unit, env)]:
            smoke.services.map_urls(text, unit.label)


@pytest.mark.slow
def test_the_dev_overlay_runs_one_round_with_a_gate() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "deploy", "smoke", "--overlay", "dev"],
        cwd=REPO, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    last = run.stdout.strip().splitlines()[-1]
    print(last)  # the measured line (pytest -rP shows it)
    assert last.startswith("deploy smoke dev: ok") and "gated on" in last
    assert "with its API key" in last  # every call to vllm-eval carried the rendered key
    assert "S_0 from the deployment's bank-s0 Job" in last


ANALYST_RESOURCES = '{requests: {cpu: 250m, memory: 512Mi}, limits: {cpu: "1", memory: 2Gi}}'
# Each breakage issue 30 names: (file under deploy/, text there, its replacement, what the
# smoke must then say). The analyst's cgroup peaked at 585 MiB through the dev round.
BREAKAGES = {
    "wrong-port": (
        "k8s/base/evaluator.yaml",
        "value: http://registry:8000",
        "value: http://registry:8001",
        "Deployment/evaluator/evaluator: 'http://registry:8001' names port 8001",
    ),
    "dependency-removed": (
        "docker/trainer.Dockerfile",
        '"$(ls /wheels/intraskill-*.whl)[train]"',
        '"$(ls /wheels/intraskill-*.whl)"',
        "Job/trainer/trainer: exited with code 127",
    ),
    "analyst-memory-below-rss": (
        "k8s/overlays/dev/kustomization.yaml",
        ANALYST_RESOURCES,
        ANALYST_RESOURCES.replace("512Mi", "256Mi").replace("2Gi", "256Mi"),
        "Deployment/analyst/analyst: after it was ready: OOM-killed",
    ),
    "s0-job-removed": (
        "k8s/overlays/dev/kustomization.yaml",
        "  - bank-s0.yaml\n",
        "",
        "no bank behind alias 'current'",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_each_breakage_fails_the_smoke(tmp_path, breakage) -> None:
    """The whole smoke (image venvs, as `make deploy-smoke`) on a copy of deploy/ with one
    breakage: it exits 1 saying what broke (minutes each; the S_0 one waits the trainer's 600 s)."""
    path, text, replacement, said = BREAKAGES[breakage]
    shutil.copytree(REPO / "deploy", tmp_path / "deploy")
    target = tmp_path / "deploy" / path
    assert target.read_text().count(text) == 1
    target.write_text(target.read_text().replace(text, replacement))
    overlay = tmp_path / "deploy/k8s/overlays/dev"
    run = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "deploy", "smoke", "--overlay", str(overlay)],
        cwd=REPO, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert said in run.stderr, run.stderr[-3000:]


def test_the_work_folder_is_removed_even_with_read_only_parts(tmp_path) -> None:
    with work_folder(None) as folder:
        (folder / "ro").mkdir()
        (folder / "ro").chmod(0o555)
    assert not folder.exists()


def test_an_image_venv_without_its_entrypoint_command_is_refused(tmp_path) -> None:
    """A venv whose install left out the project (as pip did while PYTHONPATH held the
    checkout's egg-info: "already satisfied") has no `intraskill`: the build fails naming it,
    not each container later with a bare "Permission denied" from exec."""
    dockerfile = (REPO / "deploy/docker/registry.Dockerfile").read_text()
    (tmp_path / "bin").mkdir()
    with pytest.raises(image_venvs.ImageVenvError, match="no 'intraskill'"):
        image_venvs.check_entrypoint(tmp_path, dockerfile)
    (tmp_path / "bin" / "intraskill").touch()
    image_venvs.check_entrypoint(tmp_path, dockerfile)


def test_pip_builds_the_venvs_without_the_checkout_on_its_path(monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    environment = image_venvs.pip_environment()
    assert "PYTHONPATH" not in environment and environment["PATH"] == os.environ["PATH"]


def test_a_command_the_image_lacks_fails_as_the_kubelet_says_it(smoke) -> None:
    """A dependency left out of an image's install line leaves its command out of /opt/venv/bin
    (the trainer's torchrun without `[train]`): the container fails with the kubelet's
    "executable file not found in $PATH", naming the command."""
    unit = copy.deepcopy(unit_of(smoke, "Job", "bank-s0"))
    unit.container["command"] = ["torchrun-not-installed"]
    unit.container.pop("args")
    try:
        with pytest.raises(SmokeFailure, match="exited with code 127") as failure:
            smoke.containers.run_to_completion(unit, 120)
    finally:
        smoke.containers.stop()
        smoke.containers.reopen()
    assert 'exec: "torchrun-not-installed": executable file not found in $PATH' in str(
        failure.value
    )


SERVER_THAT_DIES = """
import http.server, os, sys, threading
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[-1])), Ok)
threading.Timer(4, lambda: os._exit(3)).start()
server.serve_forever()
"""


def test_a_server_that_dies_after_it_was_ready_fails_the_smoke_naming_it(smoke) -> None:
    """The analyst OOM-killed mid-compile was seen only as the trainer's "analyst unreachable":
    a watched server that exits after its readiness probe passed fails, named, with its code."""
    unit = copy.deepcopy(unit_of(smoke, "Deployment", "console"))
    unit.container["command"] = ["python3", "-c", SERVER_THAT_DIES, "--port", "8300"]
    unit.container.pop("args")
    try:
        with pytest.raises(SmokeFailure, match="after it was ready: exited with code 3") as fail:
            smoke.containers.run_pod([unit], 60, say=lambda _: None, watch=True)
    finally:
        smoke.containers.stop()
        smoke.containers.reopen()
    assert fail.value.container == "Deployment/console/console"


def test_a_failure_names_what_the_command_said_above_a_launchers_traceback(tmp_path) -> None:
    """The trainer's "no bank behind alias 'current'" line, then torchrun's 30-line traceback:
    the failure still quotes the trainer's own line, whatever the tail shows."""
    log = tmp_path / "trainer.log"
    said = "intraskill train run: no bank behind alias 'current' after waiting 600 s"
    log.write_text("\n".join([said, *(f"  torchrun frame {n}" for n in range(30))]) + "\n")
    failure = SmokeFailure("Job/trainer/trainer", "exited with code 1", log)
    assert f"it said: {said}" in str(failure)
    assert "torchrun frame 29" in str(failure) and "torchrun frame 4\n" not in str(failure)


def test_no_container_starts_once_the_smoke_is_stopping(smoke) -> None:
    """A pod's thread between two containers (an init container just done) must not start the
    next one after `stop`: it would run unwatched, and the smoke would wait on its thread."""
    unit = copy.deepcopy(unit_of(smoke, "Job", "bank-s0"))
    unit.container["command"] = ["python3", "-c", "print('started')"]
    unit.container.pop("args")
    smoke.containers.stop()
    try:
        with pytest.raises(SmokeFailure, match="not started: the smoke is stopping"):
            smoke.containers.run_to_completion(unit, 60)
        assert smoke.containers.started == []
    finally:
        smoke.containers.reopen()
    smoke.containers.run_to_completion(unit, 60)  # reopened, it starts
    smoke.containers.stop()
    smoke.containers.reopen()
