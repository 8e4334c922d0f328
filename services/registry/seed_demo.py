"""`intraskill registry seed-demo`: a small, fixed history in a fresh registry.

Every recipe in docs/registry.md names ids (bank 2, gate 3, chunk 4, ...). On a fresh registry
those ids come from this seed, always the same ones, so the recipes run as written. The
history is the method's in miniature: five cold-start chunks, a Gate A run that selects them
into S0 (bank 1), an online gate that admits a rewrite into bank 2 (production and current
point there), a third frozen bank ready to promote, and an online gate left incomplete with a
provisional fit. It goes through the HTTP API with the typed client, as any service would.

The numbers in it (rewards, coefficients) are illustrative, not measured: it is a fixture for
trying the operator recipes, not a record of a run.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import (
    REWARD_COMPONENTS,
    BareBaseline,
    CandidatePool,
    ChunkSource,
    DecisionCreate,
    DecisionRowIn,
    DecisionStatus,
    GateIdentity,
    GateKind,
    GateRunCreate,
    ObservationIn,
    PoolColumn,
    PoolColumnKind,
    RewardComponents,
)

CHUNKS: dict[str, dict] = {
    "query-constraints": {
        "title": "Put every stated constraint in the search query",
        "applies_when": "the task names brand, colour, size, price or features",
        "procedure": ["collect the constraints", "search with all of them in one query"],
        "verify": "the first result page matches every constraint",
        "avoid": "broad queries that drop a constraint",
    },
    "price-check": {
        "title": "Check the price against the budget",
        "applies_when": "the task states a budget",
        "procedure": ["open the item page", "compare the price with the budget"],
        "verify": "the chosen option's price is within budget",
        "avoid": "buying before the price is checked",
    },
    "option-axes": {
        "title": "Choose every option axis before buying",
        "applies_when": "the item page lists options such as size or colour",
        "procedure": ["list the option axes", "pick the value the task asks for on each"],
        "verify": "each axis shows the requested value",
        "avoid": "leaving an axis at its default",
    },
    "bundle-caution": {
        "title": "Prefer single items over bundles",
        "applies_when": "results mix bundles and single items",
        "procedure": ["skip multi-packs unless the task asks for one"],
        "verify": "the quantity matches the task",
        "avoid": "bundles that change the price per item",
    },
    "verify-before-buy": {
        "title": "Re-read the task before buying",
        "applies_when": "about to click buy",
        "procedure": ["re-read the task", "compare it with the item page once more"],
        "verify": "every attribute of the task is on the page",
        "avoid": "buying on the first plausible match",
    },
}
PRICE_CHECK_V2 = {
    **CHUNKS["price-check"],
    "procedure": [
        "open the item page",
        "read the price of the selected option, not the range",
        "compare it with the budget",
    ],
}
IDENTITY = GateIdentity(
    model="smollm2-135m-demo",
    decoding="greedy",
    prompt_version="shop-tools-v2",
    prompt_fingerprint="demo",
    env_version="shopsim-demo",
    action_protocol="tools-v3",
)


@dataclass(frozen=True)
class Seeded:
    """What the seed made, by the names docs/registry.md uses."""

    chunk_ids: dict[str, int]
    bank_ids: list[int]
    gate_ids: list[int]


class NotFresh(RuntimeError):
    pass


def _rewards(value: float) -> RewardComponents:
    return RewardComponents(**dict.fromkeys(REWARD_COMPONENTS, value))


def _observations(n: int, columns: list[PoolColumn], *, prefix: str) -> list[ObservationIn]:
    """`n` paired outcomes whose masks walk through every slot state (a family's columns are
    mutually exclusive: state k includes its k-th version, 0 none)."""
    families: dict[int, list[int]] = {}
    for index, column in enumerate(columns):
        families.setdefault(column.slot, []).append(index)
    observations = []
    for i in range(n):
        inclusion = [0] * len(columns)
        stride = 1
        for members in families.values():
            state = (i // stride) % (len(members) + 1)
            stride *= len(members) + 1
            if state:
                inclusion[members[state - 1]] = 1
        observations.append(
            ObservationIn(
                task_id=f"{prefix}-{i:03d}",
                inclusion=inclusion,
                bare=_rewards(0.0),
                masked=_rewards(float(i % 3 == 0)),
            )
        )
    return observations


def _row(version_id: int, beta: float, status: DecisionStatus, rank: int | None) -> DecisionRowIn:
    return DecisionRowIn(
        chunk_version_id=version_id,
        coefficients=dict.fromkeys(REWARD_COMPONENTS, beta),
        status=status,
        rank=rank,
    )


def _gate(
    registry: RegistryClient,
    *,
    kind: GateKind,
    round: int,
    base_bank_id: int | None,
    columns: list[PoolColumn],
    n_tasks: int,
    observed: int,
    rows: list[DecisionRowIn],
    provisional: bool = False,
) -> tuple[int, int]:
    """Open a gate, observe `observed` of its `n_tasks` tasks, decide; (run id, decision id)."""
    run = registry.create_gate_run(
        GateRunCreate(
            kind=kind,
            round=round,
            checkpoint_id=f"demo-r{round}",
            base_bank_id=base_bank_id,
            candidate_pool=CandidatePool(columns=columns),
            mask_seed=20260000 + round,
            n_tasks=n_tasks,
            identity=IDENTITY,
            bare_baseline=BareBaseline(source="fresh", plan_sha256=f"{round:064x}"),
        )
    )
    registry.add_observations(run.id, _observations(observed, columns, prefix=f"r{round}"))
    decision = registry.post_decision(
        run.id,
        DecisionCreate(
            rows=rows,
            provisional=provisional,
            note="demo seed: illustrative numbers" + (" (provisional)" if provisional else ""),
        ),
    )
    return run.id, decision.id


def seed(registry: RegistryClient) -> Seeded:
    """Write the demo history; refuses (NotFresh) when the registry already holds a bank."""
    if registry.list_banks(limit=1).total:
        raise NotFresh("the registry already holds banks; seed-demo fills a fresh one only")
    for round in range(3):
        registry.create_checkpoint(
            f"demo-r{round}", uri=f"file:///demo/r{round}", step=0, round=round
        )
    chunks = {
        slug: registry.create_chunk(slug, ChunkContent(**content), source=ChunkSource.cold_start)
        for slug, content in CHUNKS.items()
    }
    versions = {slug: chunk.latest.id for slug, chunk in chunks.items()}
    chunk_ids = {slug: chunk.id for slug, chunk in chunks.items()}
    slugs = list(CHUNKS)

    # Gate A over the cold-start drafts: the first four selected into S0, the fifth kept out.
    draft_columns = [
        PoolColumn(chunk_version_id=versions[slug], kind=PoolColumnKind.draft, slot=slot)
        for slot, slug in enumerate(slugs)
    ]
    gate_a_rows = [
        _row(versions[slug], 0.04 - 0.01 * i, DecisionStatus.selected, i + 1)
        for i, slug in enumerate(slugs[:4])
    ] + [_row(versions[slugs[4]], -0.01, DecisionStatus.non_positive, None)]
    gate_a, decision_a = _gate(
        registry,
        kind=GateKind.gate_a,
        round=0,
        base_bank_id=None,
        columns=draft_columns,
        n_tasks=32,
        observed=32,
        rows=gate_a_rows,
    )
    s0 = registry.create_bank(
        [{"chunk_version_id": versions[slug], "rho": 0.5} for slug in slugs[:4]],
        round=0,
        gate_decision_id=decision_a,
        note="S0: cold start after Gate A",
    )
    registry.freeze_bank(s0.id)

    # Round 1: an online gate admits a rewrite of price-check and the fifth chunk.
    rewrite = registry.add_chunk_version(
        chunk_ids["price-check"], ChunkContent(**PRICE_CHECK_V2), source=ChunkSource.analyst
    ).id
    current = [versions[slug] for slug in slugs[:4]]
    columns = [
        PoolColumn(chunk_version_id=v, kind=PoolColumnKind.current, slot=slot)
        for slot, v in enumerate(current)
    ] + [
        PoolColumn(chunk_version_id=rewrite, kind=PoolColumnKind.rewrite, slot=1),
        PoolColumn(chunk_version_id=versions[slugs[4]], kind=PoolColumnKind.add, slot=4),
    ]
    online_rows = [
        _row(current[0], 0.03, DecisionStatus.selected, 1),
        _row(current[1], 0.01, DecisionStatus.rewrite_loser, None),
        _row(current[2], 0.02, DecisionStatus.selected, 3),
        _row(current[3], 0.01, DecisionStatus.selected, 4),
        _row(rewrite, 0.025, DecisionStatus.selected, 2),
        _row(versions[slugs[4]], 0.005, DecisionStatus.selected, 5),
    ]
    gate_1, decision_1 = _gate(
        registry,
        kind=GateKind.online,
        round=1,
        base_bank_id=s0.id,
        columns=columns,
        n_tasks=64,
        observed=64,
        rows=online_rows,
    )
    round_1 = [current[0], rewrite, current[2], current[3], versions[slugs[4]]]
    bank_1 = registry.create_bank(
        [{"chunk_version_id": v, "rho": 0.5} for v in round_1],
        round=1,
        parent_bank_id=s0.id,
        gate_decision_id=decision_1,
        note="round 1: price-check v2, verify-before-buy added",
    )
    registry.freeze_bank(bank_1.id)

    # Round 2: a bank ready to promote (new inclusion probabilities), and a gate on it that
    # stopped short of its tasks, so only a provisional fit is stored.
    bank_2 = registry.create_bank(
        [
            {"chunk_version_id": v, "rho": rho}
            for v, rho in zip(round_1, (0.7, 0.6, 0.5, 0.3, 0.4), strict=True)
        ],
        round=2,
        parent_bank_id=bank_1.id,
        note="round 2: inclusion probabilities refreshed",
    )
    registry.freeze_bank(bank_2.id)
    incomplete_columns = [
        PoolColumn(chunk_version_id=v, kind=PoolColumnKind.current, slot=slot)
        for slot, v in enumerate(round_1)
    ]
    gate_2, _ = _gate(
        registry,
        kind=GateKind.online,
        round=2,
        base_bank_id=bank_2.id,
        columns=incomplete_columns,
        n_tasks=64,
        observed=20,
        rows=[_row(v, 0.01, DecisionStatus.selected, rank) for rank, v in enumerate(round_1, 1)],
        provisional=True,
    )

    # production went S0 -> bank 2 (round 1); current follows it.
    production = registry.create_alias("production", s0.id, reason="cold start")
    registry.move_alias(
        "production",
        bank_1.id,
        reason="gate 2 passed",
        if_match=production.etag,
        gate_decision_id=decision_1,
    )
    registry.create_alias("current", bank_1.id, reason="trainer follows production")
    return Seeded(chunk_ids, [s0.id, bank_1.id, bank_2.id], [gate_a, gate_1, gate_2])
