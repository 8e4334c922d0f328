"""The policy servers' API key (`VLLM_API_KEY`, deploy/'s vllm-api-key Secret), as the trainer and
the evaluator meet it: against a FAKE vLLM server process (TEST DOUBLE) started with `--api-key`,
which checks it as vLLM 0.32 does (`/v1` paths only) and lists every call that came without it.

Every client call carries the key: the trainer's weight pushes and version checks (full and
LoRA), its rollouts' OpenAI backend, the evaluator's checkpoint loads and its checks around each
batch. Without the key a `/v1` call is refused while the weight endpoints still answer, which
is why the NetworkPolicy, not the key, guards them; the last test shows that on vLLM's own
middleware when an interpreter with vLLM is at hand.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator

import pytest

from services.evaluator.runtime import agent_runner_factory
from services.evaluator.settings import EvaluatorSettings
from services.trainer.weight_sync import ServerRollouts, WeightSync, WeightSyncError, from_config
from shared.runtime.agent.runner import RolloutConfig
from shared.runtime.agent.serve import vllm_python
from tests.trainer.test_weight_sync import FakeServer, _weights, running_fake_server

KEY = "test-vllm-key"


@pytest.fixture(scope="module")
def keyed() -> Iterator[FakeServer]:
    with running_fake_server(api_key=KEY) as fake:
        yield fake


@pytest.fixture
def server(keyed) -> FakeServer:
    keyed.restart()
    return keyed


def lora_adapter(tmp_path, name: str):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    return folder


def test_the_trainers_pushes_checks_and_rollouts_carry_the_key(server, tmp_path):
    full = WeightSync([server.url], mode="full", served_model="policy", api_key=KEY)
    full.push(_weights(tmp_path, seed=1), "run-s1")
    full.assert_current()
    lora = WeightSync([server.url], mode="lora", served_model="policy", api_key=KEY)
    lora.push(lora_adapter(tmp_path, "a1"), "run-s2")
    lora.assert_current()
    state = server.state()
    assert state["version"] == "run-s1" and "policy@run-s2" in state["adapters"]
    assert state["unkeyed"] == []
    rollouts = ServerRollouts(
        None, full, RolloutConfig(), save=lambda _: None, weights_root=tmp_path
    )
    backend = rollouts.make_backend(rollouts.urls[0], "policy", "run-s1")
    assert backend.client.headers["authorization"] == f"Bearer {KEY}"
    backend.close()
    full.close()
    lora.close()


def test_the_key_comes_from_the_trainers_environment(server, monkeypatch):
    from services.trainer.config import RolloutServersConfig

    servers = RolloutServersConfig(urls=(server.url,), weight_sync="full")
    monkeypatch.setenv("TRAINER_VLLM_API_KEY", KEY)
    assert from_config(servers).api_key == KEY
    monkeypatch.delenv("TRAINER_VLLM_API_KEY")
    assert from_config(servers).api_key is None


def test_without_the_key_v1_is_refused_and_the_weight_endpoints_still_answer(server, tmp_path):
    bare = WeightSync([server.url], mode="full", served_model="policy", retries=0)
    bare.push(_weights(tmp_path, seed=2), "run-open")  # vLLM guards /v1 only: this goes through
    assert server.state()["version"] == "run-open"
    lora = WeightSync([server.url], mode="lora", served_model="policy", retries=0)
    with pytest.raises(WeightSyncError, match="401"):
        lora.push(lora_adapter(tmp_path, "a2"), "run-s3")
    assert "POST /collective_rpc" in server.state()["unkeyed"]
    bare.close()
    lora.close()


def test_the_evaluators_loads_and_checks_carry_the_key(server, tmp_path):
    settings = EvaluatorSettings(
        backend="procedural",
        env_preset="test",
        openai_base_url=server.url,
        openai_api_key=KEY,
        load_checkpoint=True,
    )
    runner = agent_runner_factory(settings)("run-r1", _weights(tmp_path, seed=3).as_uri(), "val")
    assert runner.run([], {}) == []  # checked before and after the (empty) batch
    state = server.state()
    assert state["version"] == "run-r1" and state["unkeyed"] == []


def test_vllms_own_middleware_guards_v1_and_not_the_weight_endpoints():
    """vLLM 0.32's AuthenticationMiddleware (its `--api-key`), run from an interpreter that has
    vLLM (INTRASKILL_VLLM_PYTHON or .venv-vllm): the claim the NetworkPolicy rests on."""
    python = vllm_python()
    probe = subprocess.run([python, "-c", "import vllm"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("needs an interpreter with vLLM (INTRASKILL_VLLM_PYTHON or .venv-vllm)")
    script = textwrap.dedent(
        """
        from starlette.applications import Starlette
        from starlette.responses import PlainTextResponse
        from starlette.routing import Route
        from starlette.testclient import TestClient
        from vllm.entrypoints.serve.middleware.authenticate import AuthenticationMiddleware

        async def ok(request):
            return PlainTextResponse("ok")

        paths = ["/v1/chat/completions", "/v1/load_lora_adapter", "/pause", "/collective_rpc",
                 "/update_weight_version", "/resume", "/weight_info", "/health", "/metrics"]
        app = Starlette(routes=[Route(p, ok, methods=["POST"]) for p in paths])
        app.add_middleware(AuthenticationMiddleware, tokens=["k"])
        client = TestClient(app)
        for path in paths:
            print(path, client.post(path).status_code)
        """
    )
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    status = dict(line.split() for line in done.stdout.splitlines())
    assert {path for path, code in status.items() if code == "401"} == {
        "/v1/chat/completions",
        "/v1/load_lora_adapter",
    }
