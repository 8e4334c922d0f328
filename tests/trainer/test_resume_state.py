"""Resume restores state: the policy a restarted run loads from its last checkpoint has the
checkpoint's weights and optimizer state (not the base weights and a fresh AdamW), and its KL
reference is the initial model, not the checkpoint. In process, through the trainer's own
`load_policy`, on the tiny model with the simulated TEST DOUBLE config."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rich.console import Console  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from services.trainer.config import TrainerConfig  # noqa: E402
from services.trainer.policy import OPTIMIZER_FILE  # noqa: E402
from services.trainer.policy_loading import load_policy  # noqa: E402
from services.trainer.run_context import RunContext, RunRecord, RunState  # noqa: E402
from shared.runtime.agent.models import resolve_model  # noqa: E402
from tests.trainer.run_support import CONFIGS  # noqa: E402
from tests.trainer.test_distributed import _episodes  # noqa: E402


def _context(tmp_path, **overrides) -> RunContext:
    config = TrainerConfig.from_toml(CONFIGS / "simulated-tiny.toml").with_(**overrides)
    return RunContext(config, tmp_path, RunRecord(tmp_path, config), Console(stderr=True))


def _trained_checkpoint(context: RunContext, folder):
    """A fresh policy after one rollout step, saved as a round's checkpoint; with the step's
    episodes and its number of AdamW updates."""
    policy, _ = load_policy(context, RunState(bank_id=1))
    episodes = _episodes(policy.sampling_model.get_input_embeddings().weight.shape[0])
    updates = policy.train_step(episodes).updates
    policy.save(folder)
    return policy, episodes, updates


def _weights(model) -> dict:
    return {name: p.detach() for name, p in model.state_dict().items()}


def test_a_restart_loads_the_checkpoints_weights_and_optimizer_state(tmp_path):
    context = _context(tmp_path)
    folder = tmp_path / "checkpoints" / "round-000"
    trained, episodes, updates = _trained_checkpoint(context, folder)
    resumed, _ = load_policy(context, RunState(bank_id=1, step=1, checkpoint_dir=str(folder)))

    saved = load_file(folder / "model.safetensors")
    weights = _weights(resumed.sampling_model)
    base = load_file(resolve_model("tiny") / "model.safetensors")
    assert any(not torch.equal(saved[name], base[name]) for name in saved)  # training moved them
    for name, tensor in saved.items():
        assert torch.equal(weights[name], tensor), name

    expected = torch.load(folder / OPTIMIZER_FILE, weights_only=True)
    state = resumed.optimizer.state_dict()
    assert expected["state"], "the checkpoint holds AdamW moments"
    assert state["state"].keys() == expected["state"].keys()
    for index, moments in expected["state"].items():
        assert int(moments["step"]) == updates > 0
        for key, value in moments.items():
            assert torch.equal(state["state"][index][key], value), (index, key)

    # and so the next step moves both policies identically
    trained.train_step(episodes)
    resumed.train_step(episodes)
    after, again = _weights(trained.sampling_model), _weights(resumed.sampling_model)
    for name, tensor in after.items():
        assert torch.equal(again[name], tensor), name


def test_the_kl_reference_is_the_initial_model_across_a_resume(tmp_path):
    context = _context(tmp_path, kl_coef=0.05)
    folder = tmp_path / "checkpoints" / "round-000"
    _trained_checkpoint(context, folder)
    resumed, _ = load_policy(context, RunState(bank_id=1, step=1, checkpoint_dir=str(folder)))

    base = load_file(resolve_model("tiny") / "model.safetensors")
    saved = load_file(folder / "model.safetensors")
    reference = _weights(resumed.reference)
    for name, tensor in base.items():
        assert torch.equal(reference[name], tensor), name
    assert any(not torch.equal(reference[name], saved[name]) for name in saved)
    assert all(not p.requires_grad for p in resumed.reference.parameters())
