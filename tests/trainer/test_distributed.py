"""The update through `accelerate.Accelerator` (the FSDP code path) equals a bare PyTorch update.

The bare update below is written from the method's definition, independently of `Policy`:
log-probs of log_softmax(logits / T), the clipped surrogate with clip 0.2 / 0.28 averaged per
sample then over samples, backward, gradient-norm clip 1.0, one AdamW step.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from services.trainer.config import TrainerConfig  # noqa: E402
from services.trainer.policy import Policy  # noqa: E402
from shared.runtime.agent.advantage import TrainingSample  # noqa: E402
from shared.runtime.agent.models import resolve_model  # noqa: E402
from shared.runtime.agent.trajectory import Segment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TEMPERATURE, PROMPT, GENERATED = 0.6, 14, 6
ADVANTAGES = (1.0, -1.0, 0.5, -0.5)


def _config() -> TrainerConfig:
    return TrainerConfig(
        model="tiny",
        lr=1e-3,
        weight_decay=0.1,
        group_size=2,
        groups_per_wave=2,
        groups_admitted=2,
        global_batch=2,  # two updates per step; the second sees ratios != 1
    )


def _episodes(vocab: int) -> list[list[TrainingSample]]:
    generator = torch.Generator().manual_seed(0)
    episodes = []
    for index, advantage in enumerate(ADVANTAGES):
        ids = torch.randint(0, vocab, (PROMPT + GENERATED,), generator=generator).tolist()
        segment = Segment(
            turns=[0],
            token_ids=ids,
            loss_mask=[0] * PROMPT + [1] * GENERATED,
            logprobs=[0.0] * (PROMPT + GENERATED),
        )
        episodes.append([TrainingSample(f"e{index}", f"g{index // 2}", segment, advantage)])
    return episodes


def _bare_update(model, episodes, config: TrainerConfig) -> list[float]:
    """The step's GRPO updates in plain PyTorch, from the definition; returns their losses."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=config.betas, weight_decay=config.weight_decay
    )

    def logprobs(ids):
        logits = model(input_ids=ids).logits[:, :-1].float() / TEMPERATURE
        return torch.log_softmax(logits, -1).gather(2, ids[:, 1:, None]).squeeze(2)

    every = torch.tensor([episode[0].segment.token_ids for episode in episodes])
    with torch.no_grad():
        old = logprobs(every)  # once, before the first update: both updates use it
    losses = []
    for start in range(0, len(episodes), config.global_batch):
        batch = episodes[start : start + config.global_batch]
        ids = every[start : start + config.global_batch]
        mask = torch.tensor([e[0].segment.loss_mask for e in batch])[:, 1:].float()
        advantages = torch.tensor([e[0].advantage for e in batch])[:, None]
        ratio = torch.exp(logprobs(ids) - old[start : start + config.global_batch])
        clipped = ratio.clamp(1 - config.clip_low, 1 + config.clip_high)
        per_token = -torch.min(ratio * advantages, clipped * advantages)
        loss = ((per_token * mask).sum(1) / mask.sum(1)).mean()  # sample_mean
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def _tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model("tiny")
    return (
        AutoModelForCausalLM.from_pretrained(path, local_files_only=True),
        AutoTokenizer.from_pretrained(path, local_files_only=True),
    )


def test_update_through_accelerate_equals_a_bare_torch_update():
    model, tokenizer = _tiny()
    bare = copy.deepcopy(model)
    config = _config()
    policy = Policy(model, tokenizer, config, temperature=TEMPERATURE)
    episodes = _episodes(model.get_input_embeddings().weight.shape[0])
    stats = policy.train_step(episodes)
    bare_losses = _bare_update(bare, episodes, config)
    assert stats.updates == 2
    assert stats.loss == pytest.approx(sum(bare_losses) / 2, abs=1e-6)
    assert bare_losses[1] != 0.0  # the second update's ratios moved: a non-trivial loss
    trained = dict(policy.accelerator.unwrap_model(policy.model).named_parameters())
    moved = 0
    for name, parameter in bare.named_parameters():
        # Adam's first steps are nearly sign(g) * lr: a gradient within rounding of zero may
        # step either way, so compare at 1 % of the step size
        assert torch.allclose(trained[name], parameter, atol=config.lr / 100), name
        moved += int(not torch.equal(parameter, dict(_tiny()[0].named_parameters())[name]))
    assert moved > 0  # the update changed weights (else equality would prove nothing)


def test_saved_weights_are_the_trained_ones(tmp_path):
    from transformers import AutoModelForCausalLM

    model, tokenizer = _tiny()
    policy = Policy(model, tokenizer, _config(), temperature=TEMPERATURE)
    policy.train_step(_episodes(model.get_input_embeddings().weight.shape[0]))
    policy.save(tmp_path / "ckpt")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt", local_files_only=True)
    trained = dict(policy.accelerator.unwrap_model(policy.model).named_parameters())
    for name, parameter in loaded.named_parameters():
        assert torch.equal(trained[name], parameter), name


def test_a_tied_head_is_saved_under_its_own_name_too(tmp_path):
    """vLLM's in-place reload repacks only the layers a folder names a weight for, and HF saves
    a tied lm_head only as the embedding (shared/runtime/vllm_weights.py): the trainer's folders name it.
    The tiny model ties them, as SmolLM2 does."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from services.trainer.saving import saved_names
    from shared.runtime.vllm_weights import TIED_HEAD_FILE

    model, tokenizer = _tiny()
    policy = Policy(model, tokenizer, _config(), temperature=TEMPERATURE)
    folder = tmp_path / "pushed"
    policy.save_weights(folder)  # a resumed run may save again into a folder
    policy.train_step(_episodes(model.get_input_embeddings().weight.shape[0]))
    policy.save_weights(folder)
    trained = policy.accelerator.unwrap_model(policy.model)
    assert "lm_head.weight" not in saved_names(folder, without=TIED_HEAD_FILE)  # HF's own save
    head = load_file(folder / TIED_HEAD_FILE)["lm_head.weight"]
    assert torch.equal(head, trained.get_input_embeddings().weight.detach())  # the new weights
    loaded = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    assert loaded.lm_head.weight is loaded.get_input_embeddings().weight  # still one tied tensor
    assert torch.equal(loaded.lm_head.weight, head)


def test_a_sharded_save_lists_the_tied_head_in_its_index(tmp_path):
    import json

    from transformers import AutoModelForCausalLM

    from services.trainer.saving import tied_head
    from shared.runtime.vllm_weights import INDEX_FILE, TIED_HEAD_FILE, write_tied_head

    model, _ = _tiny()
    model.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="100KB")
    write_tied_head(tmp_path, *tied_head(model))
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    assert index["weight_map"]["lm_head.weight"] == TIED_HEAD_FILE
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True)
    for name, parameter in model.named_parameters():
        assert torch.equal(dict(loaded.named_parameters())[name], parameter), name


def test_the_optimizer_state_resumes_from_a_checkpoint(tmp_path):
    """Unsharded (one process) the checkpoint's optimizer.pt is torch's own
    `optimizer.state_dict()`, as before FSDP checkpoints existed, and a policy loaded from the
    checkpoint resumes with the same moments and step count."""
    model, tokenizer = _tiny()
    config = _config()
    policy = Policy(model, tokenizer, config, temperature=TEMPERATURE)
    policy.train_step(_episodes(model.get_input_embeddings().weight.shape[0]))
    policy.save(tmp_path / "ckpt")
    before = policy.optimizer.state_dict()

    written = torch.load(tmp_path / "ckpt" / "optimizer.pt", weights_only=True)
    assert sorted(written["state"]) == sorted(before["state"])  # parameter indices, as before
    resumed = Policy.load(tmp_path / "ckpt", config, temperature=TEMPERATURE)
    resumed.load_optimizer(tmp_path / "ckpt")
    after = resumed.optimizer.state_dict()
    assert after["param_groups"] == before["param_groups"]
    assert before["state"] and after["state"].keys() == before["state"].keys()
    for index, moments in before["state"].items():
        assert int(moments["step"]) == 2  # the step's two updates
        for moment in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(after["state"][index][moment], moments[moment]), (index, moment)
