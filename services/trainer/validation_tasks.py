"""Which validation tasks each gate uses, and which are held out to confirm the final bank.

The validation split is cut, in its own order, into consecutive slices that never overlap:

    | Gate A: val_tasks | online gate pool (rotate only): val_pool | confirmation: confirm_tasks |

* Gate A (the cold start's gate, which admits S_0) takes the first `val_tasks` tasks.
* `gate.val_policy = "fixed"` (the method): every online gate reuses Gate A's slice, so round
  after round the bank is selected on the tasks it is scored on (selection dependence), by the
  method's design.
* `gate.val_policy = "rotate"`: each round's gate takes a fresh `val_tasks` subset of the pool
  slice after Gate A's, disjoint from every other round's and from Gate A's: each gate's estimate
  is then independent of the earlier selections (S_0's included), at the price of a larger
  split (or fewer tasks, so less power, per gate).
* The confirmation tasks come after every task a gate may use; no gate ever sees them, so the
  final bank measured on them once is an unbiased check of the gates' estimates.

The test split is another split of the environment: disjoint from all of these by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.trainer.config import ConfigError, TrainerConfig


@dataclass(frozen=True)
class ValidationSlices:
    """Half-open [start, stop) ranges of the validation split, in its order."""

    gate_a: range
    online_pool: range  # the fixed policy's online gates use gate_a instead
    confirmation: range


def validation_slices(config: TrainerConfig) -> ValidationSlices:
    gate = config.gate
    gate_a = range(0, gate.val_tasks)
    pool_size = 0 if gate.val_policy == "fixed" else config.validation_pool
    pool = range(gate_a.stop, gate_a.stop + pool_size)
    return ValidationSlices(gate_a, pool, range(pool.stop, pool.stop + gate.confirm_tasks))


def gate_a_task_ids(config: TrainerConfig, val_ids: Sequence[str]) -> list[str]:
    """Gate A's tasks: the first val_tasks of the split (the cold start's `gate_a_tasks`)."""
    return _take(val_ids, validation_slices(config).gate_a, "Gate A")


def gate_task_ids(config: TrainerConfig, val_ids: Sequence[str], round_index: int) -> list[str]:
    """The validation tasks of round `round_index`'s online gate (fixed: Gate A's)."""
    gate, slices = config.gate, validation_slices(config)
    if gate.val_policy == "fixed":
        return gate_a_task_ids(config, val_ids)
    pool = _take(val_ids, slices.online_pool, "the rotated gates' pool")
    order = np.random.default_rng(config.seed).permutation(len(pool))
    chosen = order[round_index * gate.val_tasks : (round_index + 1) * gate.val_tasks]
    return [pool[i] for i in chosen]


def confirmation_task_ids(config: TrainerConfig, val_ids: Sequence[str]) -> list[str]:
    """The held-out confirmation tasks: the `confirm_tasks` validation tasks after every gate's."""
    return _take(val_ids, validation_slices(config).confirmation, "gate.confirm_tasks")


def _take(val_ids: Sequence[str], span: range, what: str) -> list[str]:
    if span.stop > len(val_ids):
        raise ConfigError(
            f"{what} needs validation tasks {span.start}..{span.stop - 1}; the split has "
            f"{len(val_ids)} validation tasks"
        )
    return list(val_ids[span.start : span.stop])


def val_task_ids(config: TrainerConfig) -> list[str]:
    """The environment's validation split, in its order."""
    from shared.runtime.shopsim.env import ShopEnv

    return list(ShopEnv.from_preset(config.env_preset).task_ids("val"))
