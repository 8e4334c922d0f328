"""Plan a gate from the registry: its slots, the chunk versions they inject, and the ids behind
every column.

Ids on our side: a chunk version is "slug@version" (what the agent runtime writes in a
trajectory's provenance), its logical id (the mask's slot key) is the chunk slug. Two kinds of
gate are planned here (and recorded by one path, `gate_recording.py`):

- an interval gate (`plan_gate`): the base bank S_t (default: the alias's bank) and the round's
  candidates; it produces S_{t+1};
- Gate A (`plan_gate_a`): cold-start draft chunk versions that are in no bank yet; it produces
  S_0 (rho from the Gate A coefficients, q = 0.2, no parent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from services.evaluator.decision import AdmitRule
from services.evaluator.design import (
    DEFAULT_MASK_SEED,
    DEFAULT_SPLIT,
    K_INIT,
    DesignError,
    gate_a_design,
    online_design,
)
from services.evaluator.fit import Solver
from services.evaluator.gate_run import GatePlan
from shared.contracts.chunks import ChunkContent, InjectedChunk
from shared.contracts.registry_api.client import NotFound, RegistryClient
from shared.contracts.registry_api.schemas import (
    BankPublic,
    CandidateOperation,
    CandidatePool,
    CandidatePublic,
    ChunkSource,
    ChunkVersionPublic,
    GateKind,
    PoolColumn,
    PoolColumnKind,
)


def version_id(slug: str, version: int) -> str:
    return f"{slug}@{version}"


@dataclass(frozen=True)
class RegistryGate:
    """A gate planned from the registry: the plan plus the registry ids behind every column."""

    plan: GatePlan
    base_bank: BankPublic | None  # None for Gate A: its drafts are in no bank
    alias: str
    alias_etag: str | None  # the ETag to move the alias with; None: do not move it
    version_ids: Mapping[str, int]  # intervention id -> chunk_version_id
    candidate_ids: Mapping[str, int] = field(default_factory=dict)  # intervention id -> candidate
    alias_absent: bool = False  # cold start: the alias does not exist yet; create it

    @property
    def kind(self) -> GateKind:
        return GateKind(self.plan.design.kind)

    def bank_round(self, round: int) -> int:
        """The round of the bank this gate produces: S_{t+1} after round t, S_0 from Gate A."""
        return round if self.kind == GateKind.gate_a else round + 1

    def pool(self) -> CandidatePool:
        return CandidatePool(
            columns=[
                PoolColumn(
                    chunk_version_id=self.version_ids[version.intervention_id],
                    kind=PoolColumnKind(version.kind),
                    slot=version.order - 1,
                    candidate_id=self.candidate_ids.get(version.intervention_id),
                )
                for version in self.plan.design.columns
            ]
        )


@dataclass
class InjectedVersions:
    """The chunk versions a gate injects, by intervention id, with their registry ids."""

    chunks: dict[str, InjectedChunk] = field(default_factory=dict)
    version_ids: dict[str, int] = field(default_factory=dict)

    def add(self, slug: str, version: int, content: ChunkContent, chunk_version_id: int) -> str:
        """Add one version; returns its intervention id."""
        vid = version_id(slug, version)
        self.chunks[vid] = InjectedChunk(chunk_id=slug, version=version, content=content)
        self.version_ids[vid] = chunk_version_id
        return vid

    def add_view(self, view: ChunkVersionPublic) -> str:
        return self.add(view.slug, view.version, view.content, view.id)


@dataclass
class Proposals:
    """The round's candidates as the design takes them: ADD slots and REWRITE families."""

    adds: list[str] = field(default_factory=list)  # ADD slots' slugs, in candidate order
    add_versions: dict[str, str] = field(default_factory=dict)  # slug -> intervention id
    rewrites: dict[str, list[str]] = field(default_factory=dict)  # target slug -> versions
    candidate_of: dict[str, int] = field(default_factory=dict)  # intervention id -> candidate
    order_key: dict[str, int] = field(default_factory=dict)  # candidate order (its id)


def plan_gate(
    client: RegistryClient,
    *,
    task_ids: Sequence[str],
    round: int,
    alias: str = "current",
    base_bank_id: int | None = None,
    candidate_ids: Sequence[int] | None = None,
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = DEFAULT_SPLIT,
    budget: int = 10,
    max_retries: int = 2,
    solver: Solver = "statsmodels",
    admit: AdmitRule = "coefficient",
) -> RegistryGate:
    """Slots from the base bank (default: the alias's bank) and the round's proposed candidates."""
    pointer = client.get_alias(alias)
    bank = client.get_bank(base_bank_id or pointer.bank_id)
    etag = pointer.etag if pointer.bank_id == bank.id else None
    if candidate_ids is None:
        candidates = client.list_candidates(round=round, status="proposed")
    else:
        candidates = [client.get_candidate(cid) for cid in candidate_ids]
    versions = InjectedVersions()
    current_versions = {
        entry.slug: versions.add(entry.slug, entry.version, entry.content, entry.chunk_version_id)
        for entry in sorted(bank.entries, key=lambda e: e.position)
    }
    proposals = candidate_proposals(client, bank, candidates, versions)
    design = online_design(
        list(current_versions),
        adds=proposals.adds,
        rewrites=proposals.rewrites,
        current_versions=current_versions,
        add_versions=proposals.add_versions,
        candidate_key=lambda key: proposals.order_key[key],
        mask_seed=mask_seed,
        split=split,
        budget=budget,
    )
    plan = GatePlan(design, tuple(task_ids), chunks=versions.chunks, max_retries=max_retries,
                    solver=solver, admit=admit)  # fmt: skip
    return RegistryGate(plan, bank, alias, etag, versions.version_ids, proposals.candidate_of)


def candidate_proposals(
    client: RegistryClient,
    bank: BankPublic,
    candidates: Sequence[CandidatePublic],
    versions: InjectedVersions,
) -> Proposals:
    """Each candidate (in id order) as an ADD slot or a version of the REWRITE target's family;
    a REWRITE whose target is not in the base bank is a DesignError."""
    slug_of_chunk = {entry.chunk_id: entry.slug for entry in bank.entries}
    proposals = Proposals()
    for candidate in sorted(candidates, key=lambda c: c.id):
        view = client.get_chunk_version_by_id(candidate.chunk_version_id)
        vid = versions.add_view(view)
        proposals.candidate_of[vid] = candidate.id
        if candidate.operation != CandidateOperation.REWRITE:
            proposals.adds.append(view.slug)
            proposals.add_versions[view.slug] = vid
            proposals.order_key[view.slug] = candidate.id
            continue
        target = slug_of_chunk.get(candidate.target_chunk_id or -1)
        if target is None:
            raise DesignError(
                f"candidate {candidate.id}: REWRITE target chunk {candidate.target_chunk_id} "
                f"is not in bank {bank.id}",
                field="candidate_ids",
            )
        proposals.rewrites.setdefault(target, []).append(vid)
        proposals.order_key[vid] = candidate.id
    return proposals


def plan_gate_a(
    client: RegistryClient,
    *,
    task_ids: Sequence[str],
    draft_version_ids: Sequence[int],
    alias: str = "current",
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = DEFAULT_SPLIT,
    budget: int = K_INIT,
    max_retries: int = 2,
    solver: Solver = "statsmodels",
    admit: AdmitRule = "coefficient",
) -> RegistryGate:
    """Gate A over cold-start draft versions, in draft order (= the order of S_0)."""
    if len(set(draft_version_ids)) != len(draft_version_ids):
        raise DesignError("draft versions must be distinct", field="draft_version_ids")
    views = [client.get_chunk_version_by_id(vid) for vid in draft_version_ids]
    versions = InjectedVersions()
    draft_versions: dict[str, str] = {}
    for view in views:
        check_draft(view, draft_versions)
        draft_versions[view.slug] = versions.add_view(view)
    design = gate_a_design(
        [view.slug for view in views],
        draft_versions=draft_versions,
        mask_seed=mask_seed,
        split=split,
        budget=budget,
    )
    try:
        etag, absent = client.get_alias(alias).etag, False
    except NotFound:
        etag, absent = None, True
    plan = GatePlan(design, tuple(task_ids), chunks=versions.chunks, max_retries=max_retries,
                    solver=solver, admit=admit)  # fmt: skip
    return RegistryGate(plan, None, alias, etag, versions.version_ids, alias_absent=absent)


def check_draft(view: ChunkVersionPublic, seen: Mapping[str, str]) -> None:
    """A Gate A draft is a cold-start version, and the only one of its chunk."""
    if view.source != ChunkSource.cold_start:
        raise DesignError(
            f"chunk version {view.id} ({view.slug}@{view.version}) is not a cold-start "
            f"draft (source {view.source.value})",
            field="draft_version_ids",
        )
    if view.slug in seen:
        raise DesignError(f"two drafts of one chunk: {view.slug}", field="draft_version_ids")
