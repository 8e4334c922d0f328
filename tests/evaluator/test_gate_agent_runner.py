"""Gate rollouts through the agent runtime's batched engine on a real ShopSim world.

The policy backend is a scripted double (no model): it searches, then keeps clicking until the
step cap, and records the prompts it saw, so the test can check what each arm injected.
"""

from collections.abc import Sequence

import pytest

from services.evaluator.design import online_design
from services.evaluator.gate_run import GatePlan, run_gate
from services.evaluator.pairing import IdentityMismatch
from services.evaluator.rollouts import AgentRolloutRunner
from shared.contracts.chunks import ChunkContent, InjectedChunk
from shared.runtime.agent.backends.base import TurnFailure, TurnOutput, TurnRequest
from shared.runtime.agent.decoding import CPU_DECODING
from shared.runtime.agent.runner import RolloutConfig
from shared.runtime.shopsim.env import ShopEnv


class ScriptedPolicyDouble:
    """Policy backend double: search on turn 0, then an invalid click; fails chosen keys once."""

    name = "scripted-double"
    model_id = "scripted"
    renderer = None

    def __init__(self, checkpoint_id: str = "ckpt-test", fail_once: Sequence[str] = ()) -> None:
        self.checkpoint_id = checkpoint_id
        self.fail_once = set(fail_once)
        self.system_prompts: dict[str, str] = {}
        self.turns: dict[str, int] = {}

    def generate(self, requests: Sequence[TurnRequest], decoding) -> list:
        outputs = []
        for request in requests:
            if request.key in self.fail_once:
                self.fail_once.discard(request.key)
                outputs.append(TurnFailure("scripted backend failure"))
                continue
            self.system_prompts[request.key] = request.messages[0]["content"]
            turn = self.turns.get(request.key, 0)
            self.turns[request.key] = turn + 1
            text = "search[shoes]" if turn == 0 else "click[no such item]"
            outputs.append(TurnOutput(text, "stop", {"role": "assistant", "content": text}))
        return outputs

    def release(self, key: str) -> None:
        pass

    def close(self) -> None:
        pass


def chunk(slug: str, version: int = 1) -> InjectedChunk:
    content = ChunkContent(
        title=f"Procedure {slug} v{version}",
        applies_when="the task names a size",
        procedure=["choose the size before buying"],
        verify="the size option is selected",
        avoid="buying without a size",
    )
    return InjectedChunk(chunk_id=slug, version=version, content=content)


@pytest.fixture(scope="module")
def env():
    return ShopEnv.from_preset("test")


def test_gate_through_the_rollout_engine(env):
    design = online_design(
        ["alpha", "beta"],
        adds=["gamma"],
        rewrites={"alpha": ["alpha@2"]},
        current_versions={"alpha": "alpha@1", "beta": "beta@1"},
        add_versions={"gamma": "gamma@1"},
    )
    chunks = {
        "alpha@1": chunk("alpha"),
        "alpha@2": chunk("alpha", 2),
        "beta@1": chunk("beta"),
        "gamma@1": chunk("gamma"),
    }
    tasks = tuple(env.task_ids("val"))
    backend = ScriptedPolicyDouble(fail_once=[f"gate:{tasks[0]}:0:masked:a0"])
    config = RolloutConfig(decoding=CPU_DECODING, concurrency=8, max_turns=2)
    runner = AgentRolloutRunner(env, backend, config, split="val")
    outcome = run_gate(GatePlan(design, tasks, chunks=chunks), runner)

    assert outcome.status == "complete"
    assert len(outcome.pairing.observations) == len(tasks) == 20
    assert outcome.pairing.failed_attempts == 1  # failed once, then retried
    retried = [r for r in outcome.records if r.attempt == 1]
    assert [(r.task_id, r.arm, r.status) for r in retried] == [(tasks[0], "masked", "completed")]
    for record in outcome.records:
        assert record.identity == runner.identity
        if record.status != "completed":
            continue
        prompt = backend.system_prompts[record.episode_id]
        if record.arm == "bare":
            assert record.injected == () and "[Optional strategy hints]" not in prompt
        for vid in record.injected:
            slug, version = vid.split("@")
            assert f'<skill id="{slug}" version="{version}">' in prompt
        assert record.termination == "action_limit" and record.steps == 2
        assert record.protocol_errors == 1  # the click on a value the page does not offer
    # every observation is an all-zero reward (the double never buys): coefficients are 0
    assert set(outcome.decision.as_json()["coefficients"].values()) == {0.0}
    assert outcome.decision.as_json()["selected"] == []


def test_another_checkpoint_cannot_reuse_the_bare_run(env):
    design = online_design(["alpha"], current_versions={"alpha": "alpha@1"})
    chunks = {"alpha@1": chunk("alpha")}
    tasks = tuple(env.task_ids("val"))
    config = RolloutConfig(decoding=CPU_DECODING, concurrency=8, max_turns=1)
    old = AgentRolloutRunner(env, ScriptedPolicyDouble("ckpt-old"), config, split="val")
    bare = [r for r in run_gate(GatePlan(design, tasks, chunks=chunks), old).records
            if r.arm == "bare"]  # fmt: skip
    new = AgentRolloutRunner(env, ScriptedPolicyDouble("ckpt-new"), config, split="val")
    with pytest.raises(IdentityMismatch, match="checkpoint_id differs"):
        run_gate(GatePlan(design, tasks, chunks=chunks), new, bare_records=bare)
    with pytest.raises(ValueError, match="not in split 'val'"):
        run_gate(GatePlan(design, tuple(env.task_ids("test")), chunks=chunks), new)
