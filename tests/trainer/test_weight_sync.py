"""Weight sync over real HTTP against FAKE vLLM server processes (fake_vllm_server.py here).

The fake servers keep the state vLLM does (weight version, reloaded folder, adapters); the
expected behaviour comes from the issue: every server serves the pushed weights after a push, and
a rollout step never starts while any server serves other weights.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from services.trainer.weight_sync import (
    StaleWeightsError,
    WeightSync,
    WeightSyncError,
    adapter_name,
)
from shared.runtime.agent.serve import free_port

ROOT = Path(__file__).resolve().parents[2]
FAKE_SERVER = "shared.runtime.doubles.fake_vllm_server"


class FakeServer:
    """One fake vLLM server process on a free loopback port."""

    def __init__(self, api_key: str | None = None) -> None:
        self.port = free_port()
        key = ["--api-key", api_key] if api_key else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", FAKE_SERVER, "--port", str(self.port), *key], cwd=ROOT
        )
        self.root = f"http://127.0.0.1:{self.port}"

    def wait_healthy(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "fake server exited"
            try:
                if httpx.get(f"{self.root}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise TimeoutError("fake server did not start")

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def state(self) -> dict:
        return httpx.get(f"{self.root}/fake/state").json()

    def restart(self) -> None:
        httpx.post(f"{self.root}/fake/restart").raise_for_status()

    def fail_reloads(self) -> None:
        httpx.post(f"{self.root}/fake/fail-reload", json={"on": True}).raise_for_status()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@contextmanager
def running_fake_server(api_key: str | None = None) -> Iterator[FakeServer]:
    """One fake server, healthy, stopped on the way out (the module fixtures' body)."""
    fake = FakeServer(api_key=api_key)
    try:
        fake.wait_healthy()
        yield fake
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def fleet() -> Iterator[list[FakeServer]]:
    """Four fake servers started together: three serve, the fourth is there to be killed."""
    started = [FakeServer() for _ in range(4)]
    try:
        for server in started:
            server.wait_healthy()
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def servers(fleet) -> list[FakeServer]:
    for server in fleet[:3]:
        server.restart()
    return fleet[:3]


def _weights(folder: Path, seed: int) -> Path:
    """An HF-shaped weights folder (config.json + safetensors) with seed-dependent contents."""
    import numpy as np
    from safetensors.numpy import save_file

    out = folder / f"weights-{seed}"
    out.mkdir()
    (out / "config.json").write_text('{"model_type": "llama"}')
    save_file({"w": np.full((4, 4), seed, dtype=np.float32)}, str(out / "model.safetensors"))
    return out


def _sha(folder: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(folder.glob("*.safetensors")):
        digest.update(file.read_bytes())
    return digest.hexdigest()


def test_full_push_reaches_every_server_in_order(servers, tmp_path):
    sync = WeightSync([s.url for s in servers], mode="full", served_model="policy")
    first, second = _weights(tmp_path, 1), _weights(tmp_path, 2)
    sync.push(first, "u1")
    sync.assert_current("u1")
    sync.push(second, "u2")
    sync.assert_current()
    for server in servers:
        state = server.state()
        assert state["version"] == "u2"
        assert state["weights_sha"] == _sha(second)  # the new folder, not the old one
        assert state["paused"] is False  # serving again
        # paused while the workers reload; the version moves only after the reload
        assert state["calls"][-4:] == ["pause:wait", "rpc:reload_weights", "version:u2", "resume"]
    assert sync.request_model() == "policy"


def test_a_restarted_server_stops_the_next_rollout_step(servers, tmp_path):
    sync = WeightSync([s.url for s in servers], mode="full", served_model="policy")
    sync.push(_weights(tmp_path, 1), "u7")
    servers[1].restart()  # came back on its original weights
    with pytest.raises(StaleWeightsError) as caught:
        sync.assert_current()
    assert servers[1].root in str(caught.value)
    assert servers[0].root not in str(caught.value)


def test_nothing_is_current_before_the_first_push(servers):
    sync = WeightSync([s.url for s in servers], mode="full", served_model="policy")
    with pytest.raises(StaleWeightsError):
        sync.assert_current()


def test_a_failed_reload_fails_the_push_and_leaves_the_server_serving(servers, tmp_path):
    healthy, broken = servers[0], servers[1]
    broken.fail_reloads()
    sync = WeightSync([healthy.url, broken.url], mode="full", served_model="policy", backoff_s=0)
    with pytest.raises(WeightSyncError) as caught:
        sync.push(_weights(tmp_path, 1), "u1")
    assert broken.root in str(caught.value) and healthy.root not in str(caught.value)
    assert broken.state()["paused"] is False  # resumed even though the reload failed
    assert sync.version is None  # a failed push is not recorded as served
    with pytest.raises(StaleWeightsError):
        sync.assert_current("u1")


def test_a_server_that_died_is_stale(fleet, tmp_path):
    doomed = fleet[3]
    sync = WeightSync([doomed.url], mode="full", served_model="policy", retries=0)
    sync.push(_weights(tmp_path, 1), "u1")
    sync.assert_current()
    doomed.stop()
    with pytest.raises(StaleWeightsError, match="unreachable"):
        sync.assert_current()


def _adapter(folder: Path, seed: int) -> Path:
    """A peft-shaped adapter folder (adapter_config.json + safetensors)."""
    out = _weights(folder, seed)
    (out / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 2}')
    return out


def test_lora_push_names_the_version_and_drops_the_old_adapter(servers, tmp_path):
    sync = WeightSync([s.url for s in servers], mode="lora", served_model="policy")
    sync.push(_adapter(tmp_path, 1), "u1")
    sync.push(_adapter(tmp_path, 2), "u2")
    sync.assert_current()
    assert sync.request_model() == adapter_name("policy", "u2")
    for server in servers:
        served = [card["id"] for card in httpx.get(f"{server.url}/models").json()["data"]]
        assert adapter_name("policy", "u2") in served
        assert adapter_name("policy", "u1") not in served
    servers[2].restart()
    with pytest.raises(StaleWeightsError) as caught:
        sync.assert_current()
    assert servers[2].root in str(caught.value)


class RecordingBackend:
    """Test double of the openai backend: records which server and model each turn went to and
    fails the turn (the episode ends unscored), so no model is needed."""

    name, renderer = "recording-test-double", None

    def __init__(self, url: str, model: str, version: str, log: list) -> None:
        self.url, self.model_id, self.checkpoint_id, self.log = url, model, version, log

    def generate(self, requests, decoding):
        from shared.runtime.agent.backends.base import TurnFailure

        self.log += [(self.url, self.model_id, request.key) for request in requests]
        return [TurnFailure("recording test double") for _ in requests]

    def release(self, key: str) -> None:
        pass

    def close(self) -> None:
        pass


def test_server_rollouts_push_after_each_step_and_never_sample_a_stale_policy(servers, tmp_path):
    from services.trainer.weight_sync import ServerRollouts
    from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig
    from shared.runtime.shopsim.env import ShopEnv

    def save(folder: Path) -> None:  # the policy's weights as the trainer writes them
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(folder.name.encode())

    log: list = []
    env = ShopEnv.from_preset("test")
    source = ServerRollouts(
        env,
        WeightSync([s.url for s in servers], mode="full", served_model="policy"),
        RolloutConfig(),
        save,
        tmp_path / "weights",
        make_backend=lambda url, model, version: RecordingBackend(url, model, version, log),
    )
    source.weights_changed("run-s0")  # the starting weights
    task = env.task_ids("train")[0]
    specs = [
        EpisodeSpec(task, 0, group_id=f"g{group}", episode_id=f"g{group}-e{sibling}")
        for group in range(3)
        for sibling in range(2)
    ]
    trajectories = source.run(specs)
    assert [t.episode_id for t in trajectories] == [spec.episode_id for spec in specs]
    server_of = {key: url for url, _, key in log}
    for group in range(3):  # siblings on one server; the three groups on three servers
        assert server_of[f"g{group}-e0"] == server_of[f"g{group}-e1"]
    assert len({server_of[f"g{group}-e0"] for group in range(3)}) == 3

    servers[2].restart()  # back on its original weights between two steps
    log.clear()
    with pytest.raises(StaleWeightsError):
        source.run(specs)
    assert log == []  # no episode reached any server

    source.weights_changed("run-s1")  # the next step's push brings every server current
    source.run(specs)
    assert {server.state()["version"] for server in servers} == {"run-s1"}
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == ["run-s1"]
