"""Learning: on a toy single-turn task the tiny model's mean reward rises under the trainer's own
update (the loss, the masks and the optimizer train, they do not just run).

The task: after a fixed prompt, generate 6 tokens; the reward is the share of them in a fixed
quarter of the vocabulary (a random model scores about 0.25). Prompt tokens carry no loss; the
advantage is the group-relative one of `shared/runtime/agent/advantage.py`.
"""

from __future__ import annotations

import torch

from services.trainer.config import TrainerConfig
from services.trainer.policy import Policy
from shared.runtime.agent.advantage import TrainingSample, normalized_advantages
from shared.runtime.agent.models import resolve_model
from shared.runtime.agent.trajectory import Segment

GROUP, GROUPS, NEW_TOKENS, STEPS = 8, 4, 6, 12


def sample_group(policy: Policy, prompt: list[int], generator: torch.Generator, target: set[int]):
    """G completions sampled from the policy at temperature 1, with their sampling log-probs."""
    model = policy.model
    ids = torch.tensor([prompt] * GROUP)
    logprobs = []
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            logits = model(input_ids=ids).logits[:, -1].float()
            dist = torch.log_softmax(logits, -1)
            token = torch.multinomial(dist.exp(), 1, generator=generator)
            logprobs.append(dist.gather(1, token))
            ids = torch.cat([ids, token], 1)
    generated = ids[:, len(prompt) :]
    rewards = [sum(int(t) in target for t in row) / NEW_TOKENS for row in generated]
    advantages = normalized_advantages(rewards)
    samples = []
    for row, (ids_row, lp_row, advantage) in enumerate(
        zip(ids.tolist(), torch.cat(logprobs, 1).tolist(), advantages, strict=True)
    ):
        segment = Segment(
            turns=[0],
            token_ids=ids_row,
            loss_mask=[0] * len(prompt) + [1] * NEW_TOKENS,
            logprobs=[0.0] * len(prompt) + lp_row,
        )
        samples.append([TrainingSample(f"e{row}", "g", segment, advantage)])
    return samples, sum(rewards) / GROUP


def test_mean_reward_rises_on_a_toy_task():
    torch.manual_seed(0)
    config = TrainerConfig(
        model="tiny",
        lr=1e-2,  # a toy task and 12 steps: far above the paper's 1e-6 on a 4B model
        weight_decay=0.0,
        group_size=GROUP,
        groups_per_wave=GROUPS,
        groups_admitted=GROUPS,
        global_batch=GROUP * GROUPS // 2,  # two updates per step, as the paper
    )
    policy = Policy.load(resolve_model("tiny"), config, temperature=1.0)
    vocab = policy.model.get_input_embeddings().weight.shape[0]
    target = set(range(vocab // 4))
    generator = torch.Generator().manual_seed(1)
    prompt = policy.tokenizer.encode("pick a token")
    curve = []
    for _ in range(STEPS):
        groups = [sample_group(policy, prompt, generator, target) for _ in range(GROUPS)]
        curve.append(sum(mean for _, mean in groups) / GROUPS)
        stats = policy.train_step([episode for samples, _ in groups for episode in samples])
        assert stats.updates == 2
    first, last = sum(curve[:3]) / 3, sum(curve[-3:]) / 3
    assert first < 0.4, curve  # a random model: about a quarter
    assert last > first + 0.25, curve
