"""The experiment's arms: each a named, documented override of the trainer config.

An arm shares everything it does not override with the others (model, warm start, S_0, task
order, seeds, test tasks); its effective config is the base TOML with its override merged in.

| arm          | override                                       | initial bank            |
| ------------ | ---------------------------------------------- | ----------------------- |
| `intraskill` | none: the method as configured                 | S_0                     |
| `grpo`       | `skill_loop = false`                           | the empty bank          |
| `fixed-s0`   | `skill_loop = false`                           | S_0                     |
| `no-mask`    | `mask = false` (q = 0, every rho = 1)          | S_0                     |
| `no-gate`    | `gate.admit = "all"`                           | S_0                     |
| `q=<value>`  | none on the trainer (the bank carries q)       | S_0 with q = value      |

q lives on the bank (a gate's next bank keeps its parent's q), so the `q=` arm starts from a
copy of S_0 with its own q rather than overriding the trainer's config.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Literal

InitialBank = Literal["s0", "empty"]


class ArmError(ValueError):
    """An unknown or malformed arm name."""


@dataclass(frozen=True)
class Arm:
    name: str
    doc: str
    overrides: dict[str, Any] = field(default_factory=dict)
    initial_bank: InitialBank = "s0"
    q: float | None = None  # the initial bank's q, when the arm sets it

    @property
    def slug(self) -> str:
        """The arm's name where only [a-z0-9.-] may appear (folders, aliases, conditions)."""
        return re.sub(r"[^a-z0-9.-]+", "", self.name.lower())

    def config(self, base: dict[str, Any]) -> dict[str, Any]:
        """The base TOML mapping with this arm's override merged in (tables merged by key)."""
        merged = copy.deepcopy(base)
        for key, value in self.overrides.items():
            if isinstance(value, dict):
                merged.setdefault(key, {}).update(value)
            else:
                merged[key] = value
        if self.q is not None:
            merged["q"] = self.q  # the trainer checks its q against the bank's
        return merged


FIXED = {
    "intraskill": Arm("intraskill", "the method as configured"),
    "grpo": Arm(
        "grpo",
        "plain GRPO: never a skill block (the empty bank), no slow loop, no gates",
        {"skill_loop": False},
        initial_bank="empty",
    ),
    "fixed-s0": Arm(
        "fixed-s0",
        "S_0 with the usual masks (q, rho); no slow loop, no gates",
        {"skill_loop": False},
    ),
    "no-mask": Arm(
        "no-mask",
        "the bank always whole in the prompt (q = 0, every rho = 1); gates as usual",
        {"mask": False},
    ),
    "no-gate": Arm(
        "no-gate",
        "every compiled candidate joins the bank without a gate (rewrites replace their target)",
        {"gate": {"admit": "all"}},
    ),
}
DEFAULT_ARMS = ("intraskill", "grpo", "fixed-s0", "no-mask", "no-gate", "q=0.5")


def arm(name: str) -> Arm:
    """The arm called `name`: one of FIXED, or `q=<value>` with 0 <= value <= 1."""
    if name in FIXED:
        return FIXED[name]
    match = re.fullmatch(r"q=([0-9]*\.?[0-9]+)", name)
    if match:
        q = float(match.group(1))
        if not 0.0 <= q <= 1.0:
            raise ArmError(f"{name}: q must be a probability")
        return Arm(name, f"the method with skill-free probability q = {q:g}", q=q)
    known = ", ".join([*FIXED, "q=<value>"])
    raise ArmError(f"unknown arm {name!r}; the arms are {known}")


def parse_arms(text: str) -> list[Arm]:
    """A comma-separated list of arm names, each once; the first is the reference arm."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ArmError("no arm given")
    arms = [arm(name) for name in names]
    slugs = [a.slug for a in arms]
    if len(set(slugs)) != len(slugs):
        raise ArmError(f"an arm is named twice: {names}")
    return arms
