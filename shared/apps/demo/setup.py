"""The phases a run folder begins with: the demo's first four, which the experiment shares.

1. services: registry (embedded SQLite in the run folder unless DATABASE_URL), evaluator and
   analyst as real processes on loopback, each waited on until ready (`services.py`);
2. environment: the ShopSim catalog and splits of the preset;
3. warm start: the base checkpoint, warm-started for the model (`warm_start.py`);
4. cold start: S_0 from the analyst's Trace2Skill job (`cold_start.py`).
"""

from __future__ import annotations

from functools import partial

from shared.apps.demo.cold_start import cold_start
from shared.apps.demo.options import DemoError
from shared.apps.demo.services import start_services
from shared.apps.demo.session import DemoSession, Phase
from shared.apps.demo.warm_start import register_base_checkpoint
from shared.kit.loopback import ServiceFailed


def setup_phases(session: DemoSession) -> list[tuple[str, Phase]]:
    """The four phases, named as `demo-state.json` and the display name them."""
    return [
        ("services", partial(start, session)),
        ("environment", partial(environment, session)),
        ("warm start", partial(register_base_checkpoint, session)),
        ("cold start", partial(cold_start, session)),
    ]


def start(session: DemoSession) -> None:
    """Registry, evaluator and analyst on loopback (every run, resumed or not)."""
    facts, options = session.facts, session.options
    session.display.phase("services", "registry, evaluator, analyst")
    try:
        session.services = start_services(
            session.run_dir,
            database_url=options.database_url,
            policy=options.policy,
            env_preset=facts.env_preset,
            decoding=facts.decoding,
            max_turns=facts.max_turns,
            on_start=lambda name: session.display.phase("services", f"waiting for {name} /readyz"),
        )
    except ServiceFailed as error:
        raise DemoError(str(error)) from None
    urls = {s.name: s.url for s in session.services.started}
    session.state.set(urls=urls)
    session.display.note("services ready: " + ", ".join(f"{k} {v}" for k, v in urls.items()))


def environment(session: DemoSession) -> None:
    """The preset's ShopSim world: its task count per split."""
    if session.state.done("environment"):
        return
    preset = session.facts.env_preset
    session.display.phase("environment", f"ShopSim preset {preset}")
    from shared.runtime.shopsim.env import ShopEnv

    env = ShopEnv.from_preset(preset)
    splits = {split: len(env.task_ids(split)) for split in ("train", "val", "test")}
    session.state.finish("environment", splits=splits)
    session.display.note(f"ShopSim {preset}: tasks per split {splits}")
