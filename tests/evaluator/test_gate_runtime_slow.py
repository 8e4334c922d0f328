"""The real rollout path: settings -> agent runtime backend factory -> a gate (slow, CPU)."""

import pytest

from services.evaluator.design import online_design
from services.evaluator.gate_run import GatePlan, run_gate
from services.evaluator.runtime import agent_runner_factory
from services.evaluator.settings import EvaluatorSettings
from shared.contracts.chunks import ChunkContent, InjectedChunk


@pytest.mark.slow
def test_gate_with_the_tiny_transformers_model(tmp_path):
    from shared.runtime.agent.models import build_tiny_model

    path = build_tiny_model(tmp_path, seed=0)
    settings = EvaluatorSettings(env_preset="test", max_turns=2, concurrency=20, split="val")
    runner = agent_runner_factory(settings)("ckpt-tiny", f"file://{path}", "val")
    assert runner.identity.checkpoint_id == "ckpt-tiny"

    def chunk(slug):
        content = ChunkContent(title=slug, applies_when="a", procedure=["p"], verify="v", avoid="x")
        return InjectedChunk(chunk_id=slug, version=1, content=content)

    design = online_design(["a", "b"], current_versions={"a": "a@1", "b": "b@1"})
    tasks = tuple(runner.env.task_ids("val"))
    outcome = run_gate(
        GatePlan(design, tasks, chunks={"a@1": chunk("a"), "b@1": chunk("b")}), runner
    )
    assert outcome.status == "complete" and len(outcome.pairing.observations) == len(tasks)
    assert all(r.generated_tokens > 0 and r.prompt_tokens > 0 for r in outcome.records)
    masked = [r for r in outcome.records if r.arm == "masked" and r.injected]
    bare = [r for r in outcome.records if r.arm == "bare"]
    # the skill block lengthens the prompt: same task, as many turns, more prompt tokens (the
    # tiny model's episodes end after one or two turns, and prompt tokens add up over turns)
    by_task = {r.task_id: r for r in bare}
    same_turns = [r for r in masked if r.steps == by_task[r.task_id].steps]
    assert same_turns
    assert all(r.prompt_tokens > by_task[r.task_id].prompt_tokens for r in same_turns)
