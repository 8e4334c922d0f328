"""A real registry and a real console, each an `intraskill ... serve` process on loopback.

The registry holds `intraskill registry seed-demo`'s history (S0 = bank 1, a rewrite of
price-check in bank 2 where `production` and `current` point, bank 3 ready to promote, a
provisional gate) plus a review round written here: two failure cards (one eligible, one
stopped by the firewall, with a gold-aware privileged audit) and the candidate compiled from
the first. Every number in it is illustrative fixture data, not a measured result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from services.registry.seed_demo import Seeded, seed
from shared.chunks import ChunkContent
from shared.registry_api.client import RegistryClient
from shared.registry_api.schemas import (
    CandidateCreate,
    CandidateOperation,
    CardCreate,
    CardOutcome,
    DeployableAbstraction,
    FirewallFinding,
)
from tests.live_servers import live_server
from tests.operator.live_registry import live_registry

GOLD_TITLE = "Studio Pro Wireless Headphones"  # what only privileged roles may read
OPTION_AXES_V2 = ChunkContent(
    title="Choose every option axis before buying",
    applies_when="the item page lists options such as size or colour",
    procedure=[
        "list the option axes shown on the item page",
        "pick the value the task or the persona asks for on each axis",
        "re-read the selected values once before buying",
    ],
    verify="each axis shows the requested value",
    avoid="leaving an axis at its default",
)


@dataclass(frozen=True)
class Review:
    eligible_card: int
    blocked_card: int
    candidate: int


@dataclass(frozen=True)
class World:
    registry_url: str
    console_url: str
    tokens: dict[str, str]
    seeded: Seeded
    review: Review


def add_review_round(registry: RegistryClient, seeded: Seeded) -> Review:
    """Round 2's slow-loop records: an eligible card, a firewall-blocked one, a candidate."""
    deployable = DeployableAbstraction(
        failure_mechanism="bought with an option axis left at its default",
        applicable_when="the item page lists options",
        observable_trigger="an option axis still shows its default value at buy time",
        corrective_procedure="choose the persona's value on every option axis",
        verification_step="each axis shows the requested value",
        target_chunk_id=seeded.chunk_ids["option-axes"],
        proposed_content=OPTION_AXES_V2,
    )
    eligible = registry.create_card(
        CardCreate(
            round=2, task_id="val-0007", checkpoint_id="demo-r2", outcome=CardOutcome.REWRITE,
            eligible=True, deployable=deployable,
            privileged_audit={"gold_item_title": GOLD_TITLE, "divergence_step": 4},
            extras={"terminal_trials": [
                {"repair": ["option-axes"], "reward": 1.0, "success": True,
                 "termination": "buy", "valid_actions": 7, "steps": 7},
            ], "successful_counterfactual_trials": 1},
        )
    )  # fmt: skip
    blocked = registry.create_card(
        CardCreate(
            round=2, task_id="val-0012", checkpoint_id="demo-r2",
            outcome=CardOutcome.NO_PROPOSAL, eligible=False,
            firewall_findings=[FirewallFinding(
                rule="gold_title", text=GOLD_TITLE, field="corrective_procedure"
            )],
            forced_no_proposal_reason="firewall: the repair names the gold item",
            privileged_audit={"gold_item_title": GOLD_TITLE},
        )
    )  # fmt: skip
    candidate = registry.create_candidate(
        CandidateCreate(
            round=2, operation=CandidateOperation.REWRITE,
            target_chunk_id=seeded.chunk_ids["option-axes"], content=OPTION_AXES_V2,
            source_card_ids=[eligible.id], failure_mechanism=deployable.failure_mechanism,
        )
    )  # fmt: skip
    return Review(eligible.id, blocked.id, candidate.id)


@contextmanager
def live_world(folder: Path, backend: str = "sqlite") -> Iterator[World]:
    """Seeded registry + console on free loopback ports; both stopped on exit."""
    with live_registry(backend, folder) as live:
        with RegistryClient(live.url, live.tokens["operator"]) as registry:
            seeded = seed(registry)
            review = add_review_round(registry, seeded)
        env = {"CONSOLE_REGISTRY_URL": live.url}
        with live_server(["console", "serve"], env, folder / "console.log") as console_url:
            yield World(live.url, console_url, live.tokens, seeded, review)
