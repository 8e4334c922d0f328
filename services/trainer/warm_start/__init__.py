"""Warm start: a short SFT on heuristic-agent trajectories, so GRPO starts from a policy that acts.

Out of the box SmolLM2-135M-Instruct cannot shop (a handful of valid actions in dozens of turns,
success 0), and GRPO learns nothing from groups whose eight siblings all score 0. The paper's base
model already acts validly (51.75 % success); this gives the CPU preset a base that does too.

How:

1. **Teacher trajectories.** ShopSim's `HeuristicAgent` plays train tasks through the agent
   runtime's own `RolloutEngine`, behind `HeuristicTeacherBackend`: a scripted policy backend
   (not a model) that answers each turn with the heuristic's action, tokenized by the policy's
   own chat renderer. So every example is exactly what the runtime would record for the policy:
   the same prompt layout (instructions, persona, observations as user turns), the same token
   ids, and a loss mask that is 1 exactly on the tokens the policy must generate (the action and
   its end-of-turn token). Only successful episodes are kept (rejection sampling).
2. **SFT** with TRL's `SFTTrainer` on the pre-tokenized examples: `assistant_masks` = the
   runtime's loss mask, so prompts and observations carry no loss.
3. **Cache.** The result is saved (HF format, safetensors) under a folder named by a fingerprint
   of the settings, the exact training tokens and the base model's checkpoint id; a second call
   returns it at once. An interrupted SFT resumes from its last TRL checkpoint.
4. **Before/after.** Valid-action rate (turns whose reply was one well-formed action that the
   shop accepted) and success rate on validation tasks, base vs warm-started, with the trainer's
   decoding, prompt and step cap; written to `warm_start.json` beside the weights.

    intraskill train warm-start --config configs/cpu.toml --json

Modules, one job each: `plan` (the settings), `teacher` (step 1), `demonstrations` (examples and
the fingerprint), `sft` (step 2), `evaluation` (step 4), `build` (the whole warm start and its
cache, step 3), `cli` (the command).
"""

from services.trainer.warm_start.build import WarmStartResult, warm_start
from services.trainer.warm_start.cli import main
from services.trainer.warm_start.plan import SUMMARY_FILE, WARM_START_SCHEMA, WarmStartPlan

__all__ = [
    "SUMMARY_FILE",
    "WARM_START_SCHEMA",
    "WarmStartPlan",
    "WarmStartResult",
    "main",
    "warm_start",
]
