"""A real registry and a real console, each an `intraskill ... serve` process on loopback.

The registry holds `intraskill registry seed-demo`'s history (S0 = bank 1, a rewrite of
price-check in bank 2 where `production` and `current` point, bank 3 ready to promote, a
provisional gate) plus a review round written here: two failure cards (one eligible, one
stopped by the firewall, with a gold-aware privileged audit) and the candidate compiled from
the first, whose all-wrong group points at a retry trajectory file. Every number in it is
illustrative fixture data, not a measured result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from services.registry.seed_demo import Seeded, seed
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import (
    CandidateCreate,
    CandidateOperation,
    CardCreate,
    CardOutcome,
    DeployableAbstraction,
    EvidenceCreate,
    FirewallFinding,
    RetryOutcome,
    Treatment,
    TreatmentMode,
)
from shared.runtime.agent.trajectory import Provenance as TraceProvenance
from shared.runtime.agent.trajectory import StepRecord, Trajectory, zero_components
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


RETRY_ACTIONS = ["search[wireless headphones under 80 dollars]", "click[item 3]", "buy now"]


def retry_trace(folder: Path) -> Path:
    """A full-skill retry's trajectory file, as the analyst writes one (fixture text)."""
    steps = [
        StepRecord(turn=i, reply=f"I will {action}", action=action, finish_reason="stop",
                   generated_tokens=8, observation=f"page after {action}", done=i == 2)
        for i, action in enumerate(RETRY_ACTIONS)
    ]  # fmt: skip
    trajectory = Trajectory(
        episode_id="retry-val-0007", task_id="val-0007", scored=True, termination="purchase",
        reward=0.0, components={**zero_components(), "r_type": 1.0, "r_att": 0.5},
        steps=steps, initial_observation="Search the store", exact_tokens=False,
        provenance=TraceProvenance(
            backend="procedural", model_id="procedural (test double)", checkpoint_id="demo-r2",
            bank_id="2", prompt_version="v", prompt_fingerprint="f", action_protocol="text",
            skill_renderer="plain", env_version="e", decoding={}, seed=1,
        ),
    )  # fmt: skip
    path = folder / "traces" / "retry-val-0007.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(trajectory.to_json(), encoding="utf-8")
    return path


def add_review_round(registry: RegistryClient, seeded: Seeded, folder: Path) -> Review:
    """Round 2's slow-loop records: an all-wrong group whose full-skill retry failed (its trace
    in `folder`), the eligible card it gave, a firewall-blocked card, a candidate."""
    group = registry.record_all_wrong_group(
        EvidenceCreate(
            task_id="val-0007", round=2, step=3, group_index=1, bank_id=seeded.bank_ids[1],
            checkpoint_id="demo-r2",
            treatment=Treatment(mode=TreatmentMode.assisted, inclusion=[1, 0, 1, 1, 0]),
        )
    )  # fmt: skip
    trace = retry_trace(folder)
    registry.settle_retry(group.id, RetryOutcome.failure, trace_uri=trace.as_uri())
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
            eligible=True, deployable=deployable, evidence_id=group.id,
            privileged_audit={"gold_item_title": GOLD_TITLE, "divergence_step": 4},
            extras={"terminal_trials": [
                {"arm": "with", "seed": 11, "reward": 1.0, "success": True,
                 "termination": "purchase", "valid_actions": 7, "steps": 7},
                {"arm": "without", "seed": 11, "reward": 0.0, "success": False,
                 "termination": "action_limit", "valid_actions": 6, "steps": 7},
            ], "verification": {"with": 1, "without": 0, "k": 1, "seeds": [11],
                                "branch_step": 3, "turn_budget": 8, "verified": True,
                                "agent": "procedural-test-double:live-tester"}},
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
            review = add_review_round(registry, seeded, folder)
        env = {
            "CONSOLE_REGISTRY_URL": live.url,
            "CONSOLE_TRACES_DIR": str(folder / "traces"),
            # The tests log in with the same few tokens dozens of times a minute and keep
            # earlier clients open; the per-user bounds are tested on their own (test_sessions).
            "CONSOLE_LOGINS_PER_MINUTE": "10000",
            "CONSOLE_MAX_SESSIONS_PER_USER": "1000",
        }
        with live_server(["console", "serve"], env, folder / "console.log") as console_url:
            yield World(live.url, console_url, live.tokens, seeded, review)
