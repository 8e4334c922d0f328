"""The `intraskill` console script: one entry point that hands each command to its owner.

Owners are loaded lazily, so `intraskill registry serve` never imports torch and no service
imports another. Each owner exposes `main(argv: list[str]) -> int | None`.
"""

from __future__ import annotations

import importlib
import sys

# command -> (module exposing main(argv), one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "registry": ("services.registry.cli", "run or migrate the SkillBank registry"),
    "env": ("shared.runtime.shopsim.cli", "ShopSim environment: build catalogs, score reward cases"),
    "gate": ("services.evaluator.cli", "validation gates: refit, cold-start, serve"),
    "evaluate": ("services.evaluator.evaluate_cli", "test-set evaluation of the four conditions"),
    "agent": ("shared.runtime.agent.cli", "agent runtime: models, rollouts"),
    "train": ("services.trainer.cli", "GRPO training with the skill bank"),
    "analyst": ("services.analyst.cli", "slow loop: failure analysis and candidates"),
    "console": ("services.console.cli", "operator console: banks, gates, review, audit (web)"),
    "demo": ("shared.apps.demo.cli", "the whole system end to end on this machine, in one command"),
    "experiment": ("shared.apps.experiment.cli", "ablation arms x seeds, compared on the same tasks"),
    "report": ("shared.apps.report.cli", "a run's report: plots, gates, bank lineage, test table"),
    "bank": ("shared.apps.operator.bank_cli", "operator: show, diff, history, rollback, promote banks"),
    "chunk": ("shared.apps.operator.chunk_cli", "operator: show a chunk and its version history"),
    "deploy": ("shared.apps.deploy.cli", "deployment: run the rendered manifests locally (smoke)"),
}


def usage() -> str:
    lines = ["usage: intraskill COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help", "help"}:
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"intraskill: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module_name = COMMANDS[name][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            print(f"intraskill: command {name!r} is not built yet ({module_name})", file=sys.stderr)
            return 2
        raise  # a missing dependency inside the command: let the real error show
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
