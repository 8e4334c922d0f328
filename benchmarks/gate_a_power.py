"""Why did Gate A keep no draft in SmolLM2 demo runs? A simulation with the gate's own code.

The CPU demo runs Gate A on 16 validation tasks: one bare and one masked rollout per task,
each draft present with probability 1/2, OLS of delta = R - B on the mask with no intercept,
keep strictly positive coefficients (at most K_init = 10). This replays that decision
(`services.evaluator.simulation.simulate_gate` + `services.evaluator.decision.decide`, the
evaluator's own fit and selection) with the simulated policy, a TEST DOUBLE whose bare
success rate and per-draft effects are set by hand, and counts per scenario:

- kept none: the gate completed and selected nothing (S_0 empty);
- not identifiable: the 16 masks cannot identify the drafts (the gate refuses: a 422);
- a helpful draft kept: at least one draft with a positive true effect was selected.

Scenarios: the bare success rate of the SmolLM2 demo (about 0.125: 4 of 32 bare cold-start
runs) and lower ones, drafts that change nothing (effect 0), help (+0.05 / +0.10 / +0.20
each) or hurt (-0.05 each), at 16 / 100 / 400 tasks, with 3 drafts (what the rules cold start
gave SmolLM2).

    python benchmarks/gate_a_power.py                     # minutes: statsmodels fits
    python benchmarks/gate_a_power.py --replicates 50

Writes gate_a_power.json (and prints the table) under --out
(default runs/benchmarks/gate_a_power/).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from services.evaluator.decision import decide
from services.evaluator.design import GateDesign, gate_a_design
from services.evaluator.simulation import SimulatedPolicy, simulate_gate

REPO = Path(__file__).resolve().parents[1]
# (bare success rate, true effect of each of the 3 drafts on P(success), validation tasks)
SCENARIOS = (
    *((0.125, effect, 16) for effect in (0.0, -0.05, 0.05, 0.10, 0.20)),
    (0.125, 0.10, 100),
    (0.125, 0.10, 400),
    *((base, effect, 16) for base in (0.05, 0.0) for effect in (0.0, 0.10)),
)


def replicate_gate(drafts, effects, base, *, n_tasks, replicate, seed) -> str:
    """One Gate A: 'kept none', 'not identifiable', 'kept helpful' or 'kept other'."""
    template = gate_a_design(drafts)
    design = GateDesign(template.kind, template.slots, mask_seed=seed * 1_000_003 + replicate,
                        split=template.split, budget=template.budget)  # fmt: skip
    policy = SimulatedPolicy(effects, lambda _task: base, seed=seed * 7919 + replicate, clip=True)
    tasks = [f"task-{i:06d}" for i in range(n_tasks)]
    try:
        decision = decide(design, simulate_gate(design, policy, tasks))
    except ValueError:  # rank-deficient masks: the evaluator answers 422, no decision
        return "not identifiable"
    kept = set(decision.selection.selected)
    if not kept:
        return "kept none"
    return "kept helpful" if any(effects[v] > 0 for v in kept) else "kept other"


def scenario(base, effect, n_tasks, *, drafts=3, replicates=200, seed=0) -> dict:
    ids = [f"draft-{i}" for i in range(1, drafts + 1)]
    effects = dict.fromkeys(ids, effect)
    outcomes = [
        replicate_gate(ids, effects, base, n_tasks=n_tasks, replicate=r, seed=seed)
        for r in range(replicates)
    ]
    names = ("kept none", "not identifiable", "kept helpful", "kept other")
    share = {name: outcomes.count(name) / replicates for name in names}
    return {"bare_success": base, "effect_per_draft": effect, "drafts": drafts,
            "n_tasks": n_tasks, "replicates": replicates, **share}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "runs/benchmarks/gate_a_power")
    args = parser.parse_args()
    rows = []
    for base, effect, n_tasks in SCENARIOS:
        row = scenario(base, effect, n_tasks, replicates=args.replicates, seed=args.seed)
        rows.append(row)
        print(f"bare {base:5.3f} effect {effect:+.2f} tasks {n_tasks:3d}: "
              f"kept none {row['kept none']:.2f}, not identifiable "
              f"{row['not identifiable']:.2f}, helpful kept {row['kept helpful']:.2f}",
              flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gate_a_power.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {args.out / 'gate_a_power.json'}")


if __name__ == "__main__":
    main()
