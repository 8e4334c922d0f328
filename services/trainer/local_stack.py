"""The services a run needs, started on loopback when no URL is given: real processes, not mocks.

* registry: `intraskill registry serve` on an embedded SQLite file in the run folder, with one
  token per role minted here (kept in the run folder, so a resumed run talks to the same data);
  the evaluator and the analyst admit the same grants, as in deploy/;
* evaluator: `intraskill gate serve`, its backend set to the run's policy (transformers for the
  model, or the `simulated` / `procedural` test doubles), jobs in the run folder;
* analyst: `intraskill analyst serve` (the real slow loop: retries, rules analyst, compiler),
  reaching the same registry and evaluator, its retries and live tests on the backend the
  compile request names, data in the run folder. (Tests that count the trainer's calls start
  a recording analyst TEST DOUBLE themselves and pass its URL.)

They are a `LoopbackStack` (`shared/kit/loopback.py`, which the demo and the tests start
services with too). Children die with the trainer (PR_SET_PDEATHSIG), so a `kill -9` leaves no
orphan holding a port or the SQLite file; a resumed run starts them again on the same folders.
"""

from __future__ import annotations

from pathlib import Path

from shared.kit.loopback import LoopbackStack

REPO = Path(__file__).resolve().parents[2]


def local_stack(out: Path) -> LoopbackStack:
    """The run's own services, their tokens, data and logs in `out/services`."""
    folder = out / "services"
    return LoopbackStack(folder, folder, prefix="local", cwd=REPO, die_with_parent=True)
