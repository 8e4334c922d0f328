"""The policy's log-probs and the sampler/trainer correction, on the tiny model.

Rules from issue 19: logits only where the loss needs them (generated tokens), with the same
log-probs as a full log_softmax(logits / T) over every position; with rollout servers the loss
carries TRL's truncated importance weights exp(trainer - sampler), capped at clip_max, and the
step logs the mismatch; without servers it carries none.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from services.trainer.config import RolloutServersConfig, TrainerConfig
from services.trainer.policy import Policy
from shared.runtime.agent.advantage import TrainingSample
from shared.runtime.agent.models import resolve_model
from shared.runtime.agent.trajectory import Segment

TEMPERATURE = 0.7


def config(**changes) -> TrainerConfig:
    # 4 episodes of one group, one update, so a step's loss is one update's
    return TrainerConfig(
        model="tiny",
        group_size=4,
        groups_per_wave=1,
        groups_admitted=1,
        global_batch=4,
        lr=1e-3,
        **changes,
    )


SERVERS = RolloutServersConfig(urls=("http://127.0.0.1:9/v1",), weight_sync="full")


def episodes(vocab: int, seed: int = 0) -> list[list[TrainingSample]]:
    """Multi-turn-shaped samples: context, a reply (mask 1), an observation, another reply."""
    rng = random.Random(seed)
    out = []
    for index in range(4):
        parts = [(rng.randint(20, 40), 0), (rng.randint(3, 6), 1), (rng.randint(10, 20), 0)]
        parts.append((rng.randint(2, 5), 1))
        ids, mask = [], []
        for length, generated in parts:
            ids += [rng.randrange(3, vocab) for _ in range(length)]
            mask += [generated] * length
        segment = Segment(turns=[0, 1], token_ids=ids, loss_mask=mask, logprobs=[0.0] * len(ids))
        advantage = [1.5, -0.5, 0.75, -1.25][index]  # they do not sum to 0: a loss != 0
        out.append([TrainingSample(f"e{index}", "g", segment, advantage)])
    return out


def with_sampling_logprobs(batch, logprobs_of) -> list[list[TrainingSample]]:
    """The same samples with sampling log-probs = logprobs_of(trainer log-prob) on generated
    tokens (a sampler whose numerics differ from the trainer's by a known amount)."""
    out = []
    for [sample], row in zip(batch, trainer_logprobs(batch), strict=True):
        segment = sample.segment.model_copy(
            update={
                "logprobs": [
                    logprobs_of(value) if mask else 0.0
                    for value, mask in zip(row, sample.segment.loss_mask, strict=True)
                ]
            }
        )
        out.append([TrainingSample(sample.episode_id, sample.group_id, segment, sample.advantage)])
    return out


_POLICY: dict[str, Policy] = {}


def fresh_policy(trainer_config: TrainerConfig) -> Policy:
    torch.manual_seed(0)
    return Policy.load(resolve_model("tiny"), trainer_config, temperature=TEMPERATURE)


def trainer_logprobs(batch) -> list[list[float]]:
    """Full-vocabulary log_softmax(logits / T) at every position, written here independently."""
    policy = _POLICY.setdefault("reference", fresh_policy(config()))
    out = []
    for [sample] in batch:
        ids = torch.tensor([sample.segment.token_ids])
        with torch.no_grad():
            logits = policy.model(input_ids=ids).logits[0].double()
        table = torch.log_softmax(logits / TEMPERATURE, -1)
        row = [0.0] + [float(table[t - 1, ids[0, t]]) for t in range(1, ids.shape[1])]
        out.append(row)
    return out


def test_logprobs_at_generated_tokens_equal_the_full_computation_and_logits_are_cut():
    policy = fresh_policy(config())
    vocab = policy.model.get_input_embeddings().weight.shape[0]
    batch = episodes(vocab)
    samples = [sample for [sample] in batch]
    projected: list[int] = []
    hook = policy.model.get_output_embeddings().register_forward_hook(
        lambda module, inputs, output: projected.append(output.shape[:-1].numel())
    )
    try:
        got, _ = policy.logprobs(samples)
    finally:
        hook.remove()
    expected = trainer_logprobs(batch)
    for sample, row, want in zip(samples, got, expected, strict=True):
        for mask, value, reference in zip(sample.segment.loss_mask, row, want, strict=True):
            if mask:
                assert value == pytest.approx(reference, abs=1e-5)
    generated = sum(sample.segment.generated_tokens for sample in samples)
    total = sum(len(sample.segment.token_ids) for sample in samples)
    # the vocabulary projection saw one position per generated token, not every position
    assert sum(projected) == generated < total / 3


def test_gradients_flow_only_from_generated_tokens():
    policy = fresh_policy(config())
    vocab = policy.model.get_input_embeddings().weight.shape[0]
    [sample] = episodes(vocab)[0]
    rows, masks = [sample.segment.token_ids], [sample.segment.loss_mask]
    logprobs, _ = policy.forward(rows, masks)
    context = torch.tensor(masks[0]) == 0
    assert torch.all(logprobs[0, context] == 0)
    logprobs.sum().backward()
    assert policy.model.get_output_embeddings().weight.grad.abs().sum() > 0


def test_server_samples_get_capped_importance_weights_and_the_mismatch_is_logged():
    policy = fresh_policy(config(rollout_servers=SERVERS))
    vocab = policy.model.get_input_embeddings().weight.shape[0]
    # the sampler gave every generated token log(2) less than the trainer: weight exp(log 2) = 2;
    # and a second batch 2 nats less: exp(2) = 7.39, capped at clip_max 3
    halved = with_sampling_logprobs(episodes(vocab), lambda value: value - math.log(2))
    stats = policy.train_step(halved)
    assert stats.logprob_mismatch == pytest.approx(math.log(2), abs=1e-5)
    assert stats.logprob_mismatch_max == pytest.approx(math.log(2), abs=1e-5)
    assert stats.importance_weight["mean"] == pytest.approx(2.0, abs=1e-4)
    far = with_sampling_logprobs(episodes(vocab, seed=1), lambda value: value - 2.0)
    capped = fresh_policy(config(rollout_servers=SERVERS)).train_step(far)
    assert capped.importance_weight["max"] == pytest.approx(3.0, abs=1e-6)
    assert capped.importance_weight["min"] == pytest.approx(3.0, abs=1e-6)


def test_the_weight_scales_the_loss_and_is_off_without_servers():
    vocab = fresh_policy(config()).model.get_input_embeddings().weight.shape[0]
    batch = with_sampling_logprobs(episodes(vocab), lambda value: value - math.log(2))
    corrected = fresh_policy(config(rollout_servers=SERVERS)).train_step(batch)
    plain = fresh_policy(config()).train_step(batch)
    assert plain.importance_weight is None
    assert corrected.importance_weight["mean"] == pytest.approx(2.0, abs=1e-4)
    assert abs(plain.loss) > 1e-3
    # first update: ratio 1 everywhere, so each token's loss is -A, times its weight 2
    assert corrected.loss == pytest.approx(2 * plain.loss, rel=1e-4)
    assert plain.logprob_mismatch == pytest.approx(math.log(2), abs=1e-5)  # logged either way
    servers_off = RolloutServersConfig(
        urls=SERVERS.urls, weight_sync="full", importance_sampling=False
    )
    switched_off = fresh_policy(config(rollout_servers=servers_off)).train_step(batch)
    assert switched_off.importance_weight is None
    assert switched_off.loss == pytest.approx(plain.loss, rel=1e-6)
