"""`make mutate`: mutation testing (mutmut) of the modules that hold the method's rules and the
registry's guarantees, one module at a time, each under a time cap; writes a kill-rate report.

    .venv/bin/python tests/mutation/mutate.py                 # every target
    .venv/bin/python tests/mutation/mutate.py reward-text leak --minutes 10

Each target runs in a scratch folder of its own under runs/mutation/<target>/ (symlinks to the
sources and a generated pyproject.toml), because mutmut reads one config per folder and writes
its mutated copy beside it: the shared working tree is never touched, and two targets never mix.
A target names the tests that guard it, so mutmut's first, unmutated pass stays short.
`functions` narrows a target to the functions that hold the rules (mutmut name patterns).

Not part of `make test`: a full run takes tens of minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs" / "mutation"
KILLED, SURVIVED, NO_TESTS, TIMEOUT = "killed", "survived", "no tests", "timeout"


@dataclass(frozen=True)
class Target:
    """One module (or a few files of one rule) and the tests that must kill its mutants."""

    files: tuple[str, ...]
    tests: tuple[str, ...]
    functions: tuple[str, ...] = field(default=())  # mutmut name patterns; empty = all


REWARD_TESTS = (
    "tests/shopsim/test_reward_rules.py",
    "tests/shopsim/test_reward_price_rules.py",
    "tests/shopsim/test_reward_cases.py",
)
TARGETS: dict[str, Target] = {
    "reward-text": Target(
        ("shared/runtime/shopsim/reward/text.py",),
        REWARD_TESTS,
    ),
    "reward-price": Target(
        ("shared/runtime/shopsim/reward/price.py",),
        REWARD_TESTS,
    ),
    "reward-rest": Target(
        tuple(
            f"shared/runtime/shopsim/reward/{name}.py"
            for name in ("attributes", "budget", "options", "score", "title_terms", "type_score")
        ),
        REWARD_TESTS,
    ),
    "leak": Target(
        (
            "shared/runtime/leak/__init__.py",
            "shared/runtime/leak/canonical.py",
            "shared/runtime/leak/numbers.py",
            "shared/runtime/leak/catalog.py",
            "shared/runtime/leak/chinese_numerals.py",
            "shared/runtime/leak/chinese_colours.py",
        ),
        (
            "tests/contracts/test_leak.py",
            "tests/contracts/test_chinese_numerals.py",
            "tests/analyst/test_firewall.py",
            "tests/analyst/test_firewall_gold_rules.py",
            "tests/analyst/test_firewall_canonical.py",
        ),
    ),
    "concurrency": Target(
        ("services/registry/concurrency.py",),
        (
            "tests/registry/test_registry_etags.py",
            "tests/registry/test_registry_idempotency.py",
            "tests/registry/test_registry_writes.py",
        ),
    ),
    "aliases-repository": Target(
        ("services/registry/aliases/repository.py",),
        (
            "tests/registry/test_registry_etags.py",
            "tests/registry/test_registry_alias_listings.py",
            "tests/registry/test_registry_lifecycle.py",
            "tests/registry/test_registry_concurrency.py",
        ),
    ),
    "idempotency-repository": Target(
        ("services/registry/idempotency/repository.py",),
        ("tests/registry/test_registry_idempotency.py", "tests/registry/test_registry_writes.py"),
    ),
    "evaluator-fit": Target(
        ("services/evaluator/fit.py",),
        ("tests/evaluator/test_gate_fit.py", "tests/evaluator/test_gate_conformance.py"),
    ),
    "evaluator-selection": Target(
        ("services/evaluator/selection.py",),
        ("tests/evaluator/test_gate_selection.py", "tests/evaluator/test_gate_conformance.py"),
    ),
    "evaluator-design": Target(
        ("services/evaluator/design.py",),
        ("tests/evaluator/test_gate_design.py", "tests/evaluator/test_gate_conformance.py"),
    ),
    "analyst-cards": Target(
        ("services/analyst/cards.py", "services/analyst/counterfactual_trials.py"),
        (
            "tests/analyst/test_rules_backend.py",
            "tests/analyst/test_counterfactual.py",
            "tests/analyst/test_llm_backend.py",
        ),
    ),
    "analyst-compiler": Target(
        ("services/analyst/compiler.py",),
        ("tests/analyst/test_compiler.py", "tests/analyst/test_llm_compiler.py"),
    ),
    "analyst-retry": Target(
        ("services/analyst/slow_loop.py",),
        ("tests/analyst/test_retry.py",),
        ("services.analyst.slow_loop.x_verify_retry*",),
    ),
    "analyst-cold-start": Target(
        ("services/analyst/cold_start.py",),
        ("tests/analyst/test_cold_start.py",),
        tuple(
            f"services.analyst.cold_start.x_{name}*"
            for name in ("consolidate", "_clusters", "drafts_of", "bare_run_cards", "proposed")
        ),
    ),
    "trainer-loss": Target(("services/trainer/loss.py",), ("tests/trainer/test_loss.py",)),
    "trainer-filter": Target(
        ("services/trainer/filtering.py",), ("tests/trainer/test_filtering.py",)
    ),
}


def _toml_list(values: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def prepare(name: str, target: Target, tests_root: Path, code_at: str | None) -> Path:
    """A scratch project for one target: the code (linked, or as committed at `code_at`), the
    tests, and a pyproject with its mutmut config."""
    folder = RUNS / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if code_at:
        archive = subprocess.run(
            ["git", "archive", code_at, "shared", "services"], cwd=ROOT, check=True,
            capture_output=True,
        ).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    else:
        for part in ("shared", "services"):
            (folder / part).symlink_to(ROOT / part)
    (folder / "tests").symlink_to(tests_root)
    pytest_options = (ROOT / "pyproject.toml").read_text().split("[tool.pytest.ini_options]")[1]
    pytest_options = pytest_options.split("\n[", 1)[0]
    (folder / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        'source_paths = ["shared", "services"]\n'
        # Workers fork from a process that has only collected the tests: one forked from a
        # process that ran them inherits warm caches (the reward's lru_cache answers without
        # running the mutated code) and open database connections.
        'process_isolation = "forkserver"\n'
        f"only_mutate = {_toml_list(target.files)}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(target.tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
        "\n[tool.pytest.ini_options]" + pytest_options
    )
    return folder


def run_target(
    name: str, target: Target, minutes: float, tests_root: Path, code_at: str | None = None
) -> dict:
    """mutmut over one target, stopped after `minutes`; the statuses it reached by then."""
    missing = [path for path in target.files if not (ROOT / path).exists()]
    tests = tuple(path for path in target.tests if (tests_root.parent / path).exists())
    if missing or not tests:
        return {"target": name, "skipped": f"missing {', '.join(missing) or 'its tests'}"}
    folder = prepare(name, replace(target, tests=tests), tests_root, code_at)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [str(Path(sys.executable).parent / "mutmut"), "run", "--max-children", "1",
               *target.functions]  # fmt: skip
    started = time.monotonic()
    with open(folder / "mutmut.log", "w") as log:
        process = subprocess.Popen(
            command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            process.wait(timeout=minutes * 60)
            capped = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
            capped = True
    statuses = collect(folder)
    return summarize(name, statuses, capped=capped, seconds=time.monotonic() - started)


def collect(folder: Path) -> dict[str, str]:
    """mutant name -> status, from the .meta files mutmut writes beside each mutated file."""
    from mutmut.stats import status_by_exit_code  # mutmut's own reading of its exit codes

    statuses: dict[str, str] = {}
    for meta in (folder / "mutants").rglob("*.py.meta"):
        data = json.loads(meta.read_text())
        for mutant, code in data.get("exit_code_by_key", {}).items():
            if code is not None:
                statuses[mutant] = status_by_exit_code[code]
    return statuses


def summarize(name: str, statuses: dict[str, str], *, capped: bool, seconds: float) -> dict:
    killed = sum(status in (KILLED, TIMEOUT) for status in statuses.values())
    tested = sum(status in (KILLED, TIMEOUT, SURVIVED) for status in statuses.values())
    return {
        "target": name,
        "tested": tested,
        "killed": killed,
        "kill_rate": round(killed / tested, 3) if tested else None,
        "no_tests": sum(status == NO_TESTS for status in statuses.values()),
        "survivors": sorted(m for m, status in statuses.items() if status == SURVIVED),
        "time_capped": capped,
        "seconds": round(seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", choices=[[], *TARGETS], default=[])
    parser.add_argument("--minutes", type=float, default=15.0, help="time cap per target")
    parser.add_argument("--label", default="latest", help="report name: report-<label>.json")
    parser.add_argument(
        "--tests-root",
        type=Path,
        default=ROOT / "tests",
        help="another tests/ folder (e.g. an older commit's, to measure a kill rate before)",
    )
    parser.add_argument(
        "--code-at",
        metavar="REV",
        help="mutate the code as committed at REV (e.g. HEAD), not the working tree's edits",
    )
    parser.add_argument(
        "--functions",
        nargs="+",
        metavar="PATTERN",
        help="mutmut names or patterns that replace the targets' own narrowing (e.g. the "
        "survivors of an earlier report, to re-run them against new tests)",
    )
    args = parser.parse_args(argv)
    RUNS.mkdir(parents=True, exist_ok=True)
    report = []
    for name in args.targets or list(TARGETS):
        target = TARGETS[name]
        if args.functions:
            target = replace(target, functions=tuple(args.functions))
        result = run_target(name, target, args.minutes, args.tests_root.resolve(), args.code_at)
        report.append(result)
        rate = result.get("kill_rate")
        print(
            f"{name:24} "
            + (
                result["skipped"]
                if "skipped" in result
                else f"killed {result['killed']}/{result['tested']}"
                + (f" = {rate:.0%}" if rate is not None else "")
                + f", {len(result['survivors'])} survivors, {result['seconds']} s"
                + (" (time cap reached)" if result["time_capped"] else "")
            ),
            flush=True,
        )
    path = RUNS / f"report-{args.label}.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"survivors per target: {path}; see one with "
          "`cd runs/mutation/<target> && mutmut show <mutant>`")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
