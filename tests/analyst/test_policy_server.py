"""The analyst on a GPU pool (issue 30, item 2): with ANALYST_POLICY_SERVER_URL every job's
frozen checkpoint runs on that OpenAI-compatible vLLM server, whatever backend the request
names, over real HTTP against a FAKE vLLM server process (a TEST DOUBLE: the weight endpoints,
no model). The checkpoint is loaded into the server first; nothing loads a model in-process.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.analyst.settings import AnalystSettings
from services.analyst.slow_loop import make_policy
from shared.contracts.analyst_api.schemas import PolicySpec
from shared.runtime.vllm_weights import WeightLoadError
from tests.trainer.test_weight_sync import FakeServer, _sha, _weights, running_fake_server

KEY = "test-vllm-key"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with running_fake_server(api_key=KEY) as fake:
        yield fake


def settings_for(server: FakeServer) -> AnalystSettings:
    return AnalystSettings(
        policy_server_url=f"{server.root}/v1", policy_server_api_key=KEY, _env_file=None
    )


def test_a_transformers_request_runs_on_the_server_after_its_checkpoint_is_loaded(
    server, tmp_path
) -> None:
    server.restart()
    weights = _weights(tmp_path, seed=7)
    # the trainer names the transformers backend; the analyst's settings override it
    spec = PolicySpec(checkpoint_id="run-r3", weights_uri=weights.as_uri(), backend="transformers")
    policy = make_policy(spec, settings_for(server))
    try:
        assert policy.name == "openai" and policy.model_id == "policy"
        assert policy.checkpoint_id == "run-r3" and policy.root_url == server.root
        policy.check()  # the server serves it: a batch may run
    finally:
        policy.close()
    state = server.state()
    assert state["calls"] == ["pause:wait", "rpc:reload_weights", "version:run-r3", "resume"]
    assert state["weights_path"] == str(weights) and state["weights_sha"] == _sha(weights)
    assert state["unkeyed"] == []  # the server's API key went with every call


def test_a_server_reloaded_by_someone_else_refuses_the_next_batch(server, tmp_path) -> None:
    server.restart()
    spec = PolicySpec(checkpoint_id="run-r5", weights_uri=_weights(tmp_path, seed=9).as_uri())
    policy = make_policy(spec, settings_for(server))
    server.restart()  # back on its start-up weights (a restart, or a gate of another round)
    with pytest.raises(WeightLoadError, match="'initial', not 'run-r5'"):
        policy.generate([], None)
    policy.close()


def test_a_failed_load_or_no_weights_refuses_the_job(server, tmp_path) -> None:
    server.restart()
    with pytest.raises(LookupError, match="no weights uri"):
        make_policy(PolicySpec(checkpoint_id="run-r4"), settings_for(server))
    server.fail_reloads()
    spec = PolicySpec(checkpoint_id="run-r4", weights_uri=_weights(tmp_path, seed=8).as_uri())
    with pytest.raises(WeightLoadError, match="reload_weights -> 500"):
        make_policy(spec, settings_for(server))
