"""The gate server follows the frozen checkpoint (issue 20, blocker 2), over real HTTP against a
FAKE vLLM server process (a TEST DOUBLE with vLLM 0.32's weight endpoints, no model).

With `EVALUATOR_LOAD_CHECKPOINT`, the evaluator loads each job's checkpoint (its registry uri)
into the server before the runner exists, and every batch of rollouts starts and ends with the
server reporting that checkpoint; anything else refuses the job.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.evaluator.runtime import agent_runner_factory
from services.evaluator.settings import EvaluatorSettings
from shared.runtime.vllm_weights import WeightLoadError
from tests.trainer.test_weight_sync import FakeServer, _sha, _weights, running_fake_server


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with running_fake_server() as fake:
        yield fake


@pytest.fixture
def factory(server):
    server.restart()
    settings = EvaluatorSettings(
        backend="procedural",  # the TEST DOUBLE policy rolls out; the fake server holds weights
        env_preset="test",
        openai_base_url=server.url,
        load_checkpoint=True,
    )
    return agent_runner_factory(settings)


def test_the_jobs_checkpoint_is_loaded_before_any_rollout(server, factory, tmp_path) -> None:
    weights = _weights(tmp_path, seed=3)
    runner = factory("run-r1", weights.as_uri(), "val")
    state = server.state()
    assert state["version"] == "run-r1"
    assert state["weights_path"] == str(weights) and state["weights_sha"] == _sha(weights)
    assert state["calls"] == ["pause:wait", "rpc:reload_weights", "version:run-r1", "resume"]
    assert runner.run([], {}) == []  # the server still serves it: the batch may run


def test_a_server_that_restarted_refuses_the_next_batch(server, factory, tmp_path) -> None:
    runner = factory("run-r1", _weights(tmp_path, seed=4).as_uri(), "val")
    server.restart()  # back on its start-up weights, as a restarted pod
    with pytest.raises(WeightLoadError, match="'initial', not 'run-r1'"):
        runner.run([], {})


def test_a_failed_reload_or_a_checkpoint_without_weights_refuses_the_job(
    server, factory, tmp_path
) -> None:
    with pytest.raises(LookupError, match="no weights uri"):
        factory("run-r2", None, "val")
    server.fail_reloads()
    with pytest.raises(WeightLoadError, match="reload_weights -> 500"):
        factory("run-r2", _weights(tmp_path, seed=5).as_uri(), "val")
    assert server.state()["version"] == "initial" and not server.state()["paused"]


def test_loading_needs_a_server_url() -> None:
    with pytest.raises(ValueError, match="EVALUATOR_OPENAI_BASE_URL"):
        EvaluatorSettings(backend="procedural", load_checkpoint=True)
