"""Which validation tasks each gate uses, and which are held out to confirm the final bank.

The method runs every gate on the same validation split, so round after round the bank is
selected on the tasks it is scored on (selection dependence). `gate.val_policy = "rotate"`
gives each round's gate a fresh subset of a larger pool, disjoint from every other round's:
each gate's estimate is then independent of the earlier selections, at the price of a larger
pool (or fewer tasks, so less power, per gate). The confirmation tasks come after every task a
gate may use; no gate ever sees them, so the final bank measured on them once is an unbiased
check of the gates' estimates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from services.trainer.config import ConfigError, TrainerConfig


def gate_task_ids(config: TrainerConfig, val_ids: Sequence[str], round_index: int) -> list[str]:
    """The validation tasks of round `round_index`'s gate (fixed: the first val_tasks)."""
    gate, pool = config.gate, _pool(config, val_ids)
    if gate.val_policy == "fixed":
        return pool
    order = np.random.default_rng(config.seed).permutation(len(pool))
    chosen = order[round_index * gate.val_tasks : (round_index + 1) * gate.val_tasks]
    return [pool[i] for i in chosen]


def confirmation_task_ids(config: TrainerConfig, val_ids: Sequence[str]) -> list[str]:
    """The held-out confirmation tasks: the `confirm_tasks` validation tasks after the pool."""
    start, count = config.validation_pool, config.gate.confirm_tasks
    if start + count > len(val_ids):
        raise ConfigError(
            f"gate.confirm_tasks ({count}) after {start} gate tasks needs {start + count} "
            f"validation tasks; the split has {len(val_ids)}"
        )
    return list(val_ids[start : start + count])


def _pool(config: TrainerConfig, val_ids: Sequence[str]) -> list[str]:
    size = config.validation_pool
    if size > len(val_ids):
        raise ConfigError(f"the gates need {size} validation tasks; the split has {len(val_ids)}")
    return list(val_ids[:size])


def val_task_ids(config: TrainerConfig) -> list[str]:
    """The environment's validation split, in its order."""
    from shared.shopsim.env import ShopEnv

    return list(ShopEnv.from_preset(config.env_preset).task_ids("val"))
