"""The trainer config: presets load, impossible combinations fail before any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.trainer.config import ConfigError, TrainerConfig, config_help

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_paper_preset_has_the_methods_numbers():
    config = TrainerConfig.from_toml(CONFIGS / "paper.toml")
    # reference implementation, section 1
    assert (config.rounds, config.steps_per_round, config.group_size) == (4, 20, 8)
    assert (config.groups_per_wave, config.groups_admitted, config.global_batch) == (32, 16, 64)
    assert config.updates_per_step == 2
    assert (config.clip_low, config.clip_high, config.aggregation) == (0.2, 0.28, "sample_mean")
    assert (config.lr, config.weight_decay, config.betas, config.grad_clip) == (
        1e-6,
        0.1,
        (0.9, 0.98),
        1.0,
    )
    assert (config.q, config.rho_min, config.rho_max) == (0.2, 0.2, 0.9)
    assert (config.gate.val_tasks, config.gate.budget, config.gate.max_candidates) == (400, 10, 6)
    assert (config.kl_coef, config.entropy_coef) == (0.0, 0.0)
    # the release totals follow from the counts
    assert config.total_steps * config.groups_per_wave * config.group_size == 20_480
    assert config.total_steps * config.episodes_admitted_per_step == 10_240
    assert config.total_steps * config.updates_per_step == 160


def test_cpu_preset_loads_and_keeps_two_updates_per_step():
    config = TrainerConfig.from_toml(CONFIGS / "cpu.toml")
    assert config.model == "smollm2" and config.warm_start.enabled
    assert config.updates_per_step == 2


def test_importance_sampling_is_on_with_servers_only():
    assert TrainerConfig().importance_sampling is False  # in-process rollouts: no correction
    servers = {"urls": ["http://x:8000/v1"], "weight_sync": "full"}
    config = TrainerConfig.from_dict({"rollout_servers": servers})
    assert config.importance_sampling is True  # on by default with servers
    assert config.rollout_servers.importance_sampling_mode == "token_truncate"
    off = TrainerConfig.from_dict({"rollout_servers": {**servers, "importance_sampling": False}})
    assert off.importance_sampling is False


def test_overrides_win_and_none_keeps_the_file():
    config = TrainerConfig.from_toml(CONFIGS / "paper.toml", policy="simulated", rounds=None)
    assert (config.policy, config.rounds) == ("simulated", 4)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"global_batch": 60}, "multiple of group_size"),
        ({"groups_admitted": 33}, "admit more than it generates"),
        ({"groups_admitted": 12}, "multiple of global_batch"),  # 96 episodes, batch 64
        ({"group_size": 1, "global_batch": 16}, "group_size must be >= 2"),
        ({"rho_min": 0.95}, "rho_min <= rho_max"),
        ({"q": 1.5}, "q must be a probability"),
        ({"clip_low": 1.0}, "clip_low"),
        ({"policy": "oracle"}, "policy must be one of"),
        ({"aggregation": "seq_sum"}, "aggregation"),
        ({"split": "val"}, "train split only"),
        ({"lr": 0.0}, "lr must be > 0"),
        ({"rollout_servers": {"urls": ["http://x:8000"]}}, "stale policy"),
        ({"rollout_servers": {"importance_sampling_mode": "token_clip"}}, "sampling_mode"),
        ({"rollout_servers": {"importance_sampling_clip_max": 0.0}}, "clip_min <"),
        ({"gate": {"val_tasks": 0}}, "val_tasks"),
        ({"gate": {"admit": "optimistic"}}, "gate.admit must be gate, lower_bound or all"),
        ({"bogus": 1}, "unknown config keys: bogus"),
        ({"gate": {"bogus": 1}}, "gate.bogus"),
    ],
)
def test_impossible_combinations_are_rejected(changes, message):
    with pytest.raises(ConfigError, match=message):
        TrainerConfig.from_dict(changes)


def test_every_field_has_help_text():
    text = config_help()
    for line in text.splitlines():
        assert "#" in line or line.startswith("["), line
        assert not line.rstrip().endswith("#"), f"no help text: {line}"


def test_gate_admit_takes_the_lower_bound_rule_and_the_cpu_preset_gates_on_100_tasks():
    assert TrainerConfig.from_dict({"gate": {"admit": "lower_bound"}}).gate.admit == "lower_bound"
    assert TrainerConfig.from_dict({}).gate.admit == "gate"  # the method's rule by default
    assert TrainerConfig.from_toml("configs/cpu.toml").gate.val_tasks >= 100
