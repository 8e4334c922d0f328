"""Typed HTTP client for the SkillBank registry: the only way other services talk to it.

    with RegistryClient("http://registry:8000", token=...) as registry:
        bank = registry.get_bank_by_alias("current")          # trainer: the bank to train under
        run = registry.create_gate_run(GateRunCreate(...))    # evaluator: open a gate
        registry.add_observations(run.id, observations)       # raw per-task pairs, batched
        decision = registry.post_decision(run.id, DecisionCreate(...))  # provisional=True if
                                                                         # the gate is incomplete
        nxt = registry.create_bank(entries, round=1, parent_bank_id=bank.id,
                                   gate_decision_id=decision.id)
        registry.freeze_bank(nxt.id)
        alias = registry.get_alias("current")
        registry.move_alias("current", nxt.id, reason="gate 1", if_match=alias.etag)

Behaviour every call shares:
- Timeouts (`timeout`, seconds) on connect, read and write.
- Retries with exponential backoff and jitter on connection errors, timeouts and 5xx
  (Retry-After is honoured), up to `retries` times.
- Every write (POST, PUT, PATCH) carries an `Idempotency-Key`, the same one on each retry, so a
  retried write whose first answer was lost is replayed by the registry, never applied twice.
  Pass `idempotency_key=` to make a write idempotent across processes (e.g. a resumed job).
- Frozen banks are cached by id with their strong ETag: they never change, so `get_bank` answers
  from memory (`revalidate=True` asks the server with If-None-Match, which answers 304).
- Errors are typed: 404 `NotFound`, 409 `Conflict`, 412 `PreconditionFailed` (stale alias
  ETag), 422 `Invalid` (with `.detail` naming the field), 401/403 `AuthError`; a registry that
  stays unreachable or failing raises `Unavailable`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from shared.contracts.chunks import ChunkContent
from shared.contracts.http_retry import RetryingClient, error_detail
from shared.contracts.registry_api.schemas import (
    AliasCreate,
    AliasEventPublic,
    AliasMove,
    AliasPublic,
    AliasRollback,
    AuditEntryPublic,
    BankCreate,
    BankDiff,
    BankEntryIn,
    BankPublic,
    BankStatus,
    BankSummary,
    BankUpdate,
    CandidateCreate,
    CandidatePublic,
    CardAuditPublic,
    CardCreate,
    CardPublic,
    CheckpointCreate,
    CheckpointPublic,
    ChunkCreate,
    ChunkPublic,
    ChunkRestore,
    ChunkRetire,
    ChunkSource,
    ChunkVersionCreate,
    ChunkVersionPublic,
    DecisionCreate,
    DecisionPublic,
    EvidenceCreate,
    EvidencePublic,
    EvidenceUpdate,
    GateKind,
    GateRunCreate,
    GateRunPublic,
    GateRunUpdate,
    GateStatus,
    ObservationBatch,
    ObservationBatchResult,
    ObservationIn,
    ObservationPublic,
    Page,
    Provenance,
    RenderedBank,
    RetryOutcome,
)

M = TypeVar("M", bound=BaseModel)


class RegistryError(Exception):
    """A registry answer that is not a success."""

    def __init__(self, status_code: int, detail: Any, method: str, path: str) -> None:
        super().__init__(f"{method} {path} -> {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail


class AuthError(RegistryError):
    """401 (no or unknown token) or 403 (the token's role may not do this)."""


class NotFound(RegistryError):
    pass


class Conflict(RegistryError):
    """409: an illegal transition (e.g. editing a frozen bank) or a lost race."""


class PreconditionFailed(RegistryError):
    """412: the alias moved since its ETag was read; re-read it and decide again."""


class Invalid(RegistryError):
    """422: `detail` is a list of {loc, msg, type} naming the offending field."""


class Unavailable(RegistryError):
    """The registry stayed unreachable or kept failing (5xx) through every retry."""


_ERRORS: dict[int, type[RegistryError]] = {
    401: AuthError,
    403: AuthError,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    422: Invalid,
}


def _dump(value: BaseModel | Mapping[str, Any]) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=False)
    return dict(value)


class RegistryClient(RetryingClient):
    """Synchronous client; one per thread or process (httpx.Client is not fork-safe)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = 4,
        backoff: float = 0.2,
        backoff_max: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url, token=token, timeout=timeout, retries=retries, backoff=backoff,
            backoff_max=backoff_max, transport=transport,
        )  # fmt: skip
        self._frozen: dict[int, tuple[str, BankPublic]] = {}

    # ------------------------------------------------------------ plumbing

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        ok: Sequence[int] = (200, 201),
    ) -> httpx.Response:
        """One API call with retries; raises a `RegistryError` subclass on failure."""
        method = method.upper()
        try:
            response = self.send(
                method, path, json=json, params=params, headers=headers,
                idempotency_key=idempotency_key,
            )  # fmt: skip
        except httpx.TransportError as error:
            raise Unavailable(0, repr(error), method, path) from error
        if response.headers.get("idempotent-replayed") == "true":
            self.stats["replayed"] += 1
        if response.status_code in ok:
            return response
        detail = error_detail(response)
        if response.status_code >= 500:
            raise Unavailable(response.status_code, detail, method, path)
        error_type = _ERRORS.get(response.status_code, RegistryError)
        raise error_type(response.status_code, detail, method, path)

    def _get(self, path: str, model: type[M], **params: Any) -> M:
        return model.model_validate(self.request("GET", path, params=params).json())

    def _page(self, path: str, item: type[M], **params: Any) -> Page[M]:
        return TypeAdapter(Page[item]).validate_python(
            self.request("GET", path, params=params).json()
        )

    def _all(self, path: str, item: type[M], **params: Any) -> Iterator[M]:
        offset = 0
        while True:
            page = self._page(path, item, **params, limit=500, offset=offset)
            yield from page.items
            if page.next_offset is None:
                return
            offset = page.next_offset

    def _write(
        self,
        method: str,
        path: str,
        model: type[M],
        body: Any = None,
        *,
        idempotency_key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> M:
        response = self.request(
            method, path, json=body, idempotency_key=idempotency_key, headers=headers
        )
        return model.model_validate(response.json())

    # ------------------------------------------------------------ chunks

    def create_chunk(
        self,
        slug: str,
        content: ChunkContent,
        *,
        source: ChunkSource = ChunkSource.operator,
        provenance: Provenance | None = None,
        idempotency_key: str | None = None,
    ) -> ChunkPublic:
        """New logical chunk with version 1 (cold start: source=cold_start)."""
        body = ChunkCreate(
            slug=slug, content=content, source=source, provenance=provenance or Provenance()
        )
        return self._write(
            "POST", "/v1/chunks", ChunkPublic, _dump(body), idempotency_key=idempotency_key
        )

    def add_chunk_version(
        self,
        chunk_id: int,
        content: ChunkContent,
        *,
        source: ChunkSource = ChunkSource.operator,
        provenance: Provenance | None = None,
        idempotency_key: str | None = None,
    ) -> ChunkVersionPublic:
        """New version of a chunk; unchanged content returns the latest version."""
        body = ChunkVersionCreate(
            content=content, source=source, provenance=provenance or Provenance()
        )
        return self._write(
            "POST",
            f"/v1/chunks/{chunk_id}/versions",
            ChunkVersionPublic,
            _dump(body),
            idempotency_key=idempotency_key,
        )

    def get_chunk(self, chunk_id: int) -> ChunkPublic:
        return self._get(f"/v1/chunks/{chunk_id}", ChunkPublic)

    def list_chunks(
        self, *, slug_prefix: str | None = None, limit: int = 50, offset: int = 0
    ) -> Page[ChunkPublic]:
        return self._page(
            "/v1/chunks", ChunkPublic, slug_prefix=slug_prefix, limit=limit, offset=offset
        )

    def chunk_history(self, chunk_id: int) -> list[ChunkVersionPublic]:
        """Every version of a chunk, oldest first."""
        return list(self._all(f"/v1/chunks/{chunk_id}/versions", ChunkVersionPublic))

    def get_chunk_version(self, chunk_id: int, version: int) -> ChunkVersionPublic:
        return self._get(f"/v1/chunks/{chunk_id}/versions/{version}", ChunkVersionPublic)

    def get_chunk_version_by_id(self, version_id: int) -> ChunkVersionPublic:
        return self._get(f"/v1/chunk-versions/{version_id}", ChunkVersionPublic)

    # ------------------------------------------------------------ banks

    def create_bank(
        self,
        entries: Sequence[BankEntryIn | Mapping[str, Any]] = (),
        *,
        q: float = 0.2,
        round: int = 0,
        parent_bank_id: int | None = None,
        gate_decision_id: int | None = None,
        from_bank_id: int | None = None,
        note: str | None = None,
        idempotency_key: str | None = None,
    ) -> BankPublic:
        """A draft bank from ordered entries, or a copy of `from_bank_id` (rollback as a draft)."""
        body = BankCreate(
            q=q,
            round=round,
            parent_bank_id=parent_bank_id,
            gate_decision_id=gate_decision_id,
            from_bank_id=from_bank_id,
            entries=[BankEntryIn.model_validate(e) for e in entries],
            note=note,
        )
        return self._write(
            "POST", "/v1/banks", BankPublic, _dump(body), idempotency_key=idempotency_key
        )

    def update_bank(self, bank_id: int, **changes: Any) -> BankPublic:
        """Change a draft's q / round / parent_bank_id / gate_decision_id / entries / note."""
        body = BankUpdate(**changes).model_dump(mode="json", exclude_unset=True)
        return self._write("PATCH", f"/v1/banks/{bank_id}", BankPublic, body)

    def create_frozen_bank(
        self,
        entries: Sequence[BankEntryIn | Mapping[str, Any]] = (),
        *,
        idempotency_key: str,
        **fields: Any,
    ) -> BankPublic:
        """`create_bank` then `freeze_bank`, safe to repeat with the same key: a retry after
        either step (the bank exists, frozen or still a draft) ends with the same frozen bank."""
        bank = self.create_bank(entries, idempotency_key=idempotency_key, **fields)
        if self.bank_summary(bank.id).status.value == "draft":
            self.freeze_bank(bank.id, idempotency_key=f"{idempotency_key}:freeze")
        return bank

    def freeze_bank(self, bank_id: int, *, idempotency_key: str | None = None) -> BankSummary:
        """Draft -> frozen (content-hashed)."""
        return self._write(
            "POST", f"/v1/banks/{bank_id}/freeze", BankSummary, idempotency_key=idempotency_key
        )

    def retire_bank(self, bank_id: int) -> BankSummary:
        """Frozen -> retired (refused while an alias points at it)."""
        return self._write("POST", f"/v1/banks/{bank_id}/retire", BankSummary)

    def get_bank(self, bank_id: int, *, revalidate: bool = False) -> BankPublic:
        """The bank document; frozen banks come from the local ETag cache after the first read."""
        cached = self._frozen.get(bank_id)
        if cached is not None and not revalidate:
            self.stats["cache_hits"] += 1
            return cached[1]
        headers = {"If-None-Match": cached[0]} if cached else None
        response = self.request("GET", f"/v1/banks/{bank_id}", headers=headers, ok=(200, 304))
        if response.status_code == 304 and cached is not None:
            self.stats["not_modified"] += 1
            return cached[1]
        return self._remember(bank_id, response)

    def _remember(self, bank_id: int, response: httpx.Response) -> BankPublic:
        bank = BankPublic.model_validate(response.json())
        etag = response.headers.get("etag")
        if etag and bank.content_hash is not None:
            self._frozen[bank_id] = (etag, bank)
        return bank

    def get_bank_by_alias(self, name: str) -> BankPublic:
        """The bank an alias points at now (alias resolved each call; the bank from cache)."""
        return self.get_bank(self.get_alias(name).bank_id)

    def bank_summary(self, bank_id: int) -> BankSummary:
        """Lifecycle status (draft / frozen / retired) and size."""
        return self._get(f"/v1/banks/{bank_id}/summary", BankSummary)

    def list_banks(
        self,
        *,
        status: BankStatus | None = None,
        round: int | None = None,
        parent_bank_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> Page[BankSummary]:
        return self._page(
            "/v1/banks",
            BankSummary,
            status=status,
            round=round,
            parent_bank_id=parent_bank_id,
            limit=limit,
            offset=offset,
        )

    def diff_banks(self, bank_id: int, against: int) -> BankDiff:
        """Added / retired / rewritten chunks and rho changes from `against` to `bank_id`."""
        return self._get(f"/v1/banks/{bank_id}/diff", BankDiff, against=against)

    def render_bank(
        self, bank_id: int, inclusion: Sequence[int | bool] | None = None
    ) -> RenderedBank:
        """The exact skill block for an inclusion vector (None: every chunk)."""
        vector = None if inclusion is None else ",".join(str(int(bool(x))) for x in inclusion)
        return self._get(f"/v1/banks/{bank_id}/render", RenderedBank, inclusion=vector)

    def retire_chunk(self, bank_id: int, chunk_id: int, *, reason: str) -> BankPublic:
        """Operator: a new draft child of `bank_id` without the chunk."""
        body = ChunkRetire(chunk_id=chunk_id, reason=reason)
        return self._write("POST", f"/v1/banks/{bank_id}/retire-chunk", BankPublic, _dump(body))

    def restore_chunk(
        self,
        bank_id: int,
        chunk_id: int,
        *,
        rho: float,
        reason: str,
        version: int | None = None,
        coefficient: float | None = None,
        position: int | None = None,
    ) -> BankPublic:
        """Operator: a new draft child of `bank_id` with the chunk (latest version by default)."""
        body = ChunkRestore(
            chunk_id=chunk_id,
            version=version,
            rho=rho,
            coefficient=coefficient,
            position=position,
            reason=reason,
        )
        return self._write("POST", f"/v1/banks/{bank_id}/restore-chunk", BankPublic, _dump(body))

    # ------------------------------------------------------------ aliases

    def create_alias(
        self, name: str, bank_id: int, *, reason: str, gate_decision_id: int | None = None
    ) -> AliasPublic:
        body = AliasCreate(
            name=name, bank_id=bank_id, reason=reason, gate_decision_id=gate_decision_id
        )
        return self._write("POST", "/v1/aliases", AliasPublic, _dump(body))

    def get_alias(self, name: str) -> AliasPublic:
        """Resolve an alias: bank id and the ETag to move it with."""
        return self._get(f"/v1/aliases/{name}", AliasPublic)

    def move_alias(
        self,
        name: str,
        bank_id: int,
        *,
        reason: str,
        if_match: str,
        gate_decision_id: int | None = None,
    ) -> AliasPublic:
        """Compare-and-set the alias; `PreconditionFailed` if it moved since `if_match` was read."""
        body = AliasMove(bank_id=bank_id, reason=reason, gate_decision_id=gate_decision_id)
        return self._write(
            "PUT", f"/v1/aliases/{name}", AliasPublic, _dump(body), headers={"If-Match": if_match}
        )

    def point_alias(self, name: str, bank_id: int, *, reason: str) -> None:
        """Create the alias at `bank_id`, or move it there (compare-and-set) unless it is there."""
        try:
            current = self.get_alias(name)
        except NotFound:
            self.create_alias(name, bank_id, reason=reason)
            return
        if current.bank_id != bank_id:
            self.move_alias(name, bank_id, reason=reason, if_match=current.etag)

    def rollback_alias(
        self, name: str, *, reason: str, bank_id: int | None = None, if_match: str | None = None
    ) -> AliasPublic:
        """Operator: point the alias back at `bank_id` (default: its previous bank)."""
        body = AliasRollback(bank_id=bank_id, reason=reason)
        headers = {"If-Match": if_match} if if_match else None
        return self._write(
            "POST", f"/v1/aliases/{name}/rollback", AliasPublic, _dump(body), headers=headers
        )

    def list_aliases(self, *, bank_id: int | None = None) -> list[AliasPublic]:
        return list(self._all("/v1/aliases", AliasPublic, bank_id=bank_id))

    def alias_history(self, name: str) -> list[AliasEventPublic]:
        """Every move of the alias, oldest first."""
        return list(self._all(f"/v1/aliases/{name}/history", AliasEventPublic))

    # ------------------------------------------------------------ gates

    def create_gate_run(self, run: GateRunCreate | Mapping[str, Any]) -> GateRunPublic:
        """Open a gate run: kind, design (pool, split, sample, mask seed, K, solver, task count),
        checkpoint and rollout identity, bare baseline; a base bank unless it is Gate A."""
        return self._write(
            "POST", "/v1/gates", GateRunPublic, _dump(GateRunCreate.model_validate(_dump(run)))
        )

    def add_observations(
        self,
        run_id: int,
        observations: Sequence[ObservationIn | Mapping[str, Any]],
        *,
        batch_size: int = 500,
    ) -> ObservationBatchResult:
        """Post raw per-task observations in batches (each batch idempotent on retry)."""
        items = [ObservationIn.model_validate(_dump(o)) for o in observations]
        result = ObservationBatchResult(gate_run_id=run_id, accepted=0, n_observations=0)
        for start in range(0, len(items), batch_size):
            batch = ObservationBatch(observations=items[start : start + batch_size])
            answer = self._write(
                "POST", f"/v1/gates/{run_id}/observations", ObservationBatchResult, _dump(batch)
            )
            result = ObservationBatchResult(
                gate_run_id=run_id,
                accepted=result.accepted + answer.accepted,
                n_observations=answer.n_observations,
            )
        return result

    def list_observations(
        self, run_id: int, *, task_id: str | None = None
    ) -> list[ObservationPublic]:
        """Every raw observation of a gate run (what a re-fit needs)."""
        return list(
            self._all(f"/v1/gates/{run_id}/observations", ObservationPublic, task_id=task_id)
        )

    def observations_page(
        self, run_id: int, *, limit: int = 100, offset: int = 0
    ) -> Page[ObservationPublic]:
        """One page of a gate run's raw observations (for reading, not re-fitting)."""
        return self._page(
            f"/v1/gates/{run_id}/observations", ObservationPublic, limit=limit, offset=offset
        )

    def post_decision(
        self, run_id: int, decision: DecisionCreate | Mapping[str, Any]
    ) -> DecisionPublic:
        """Record the gate's decision (a row per pool version). Final: completes the gate (every
        planned task observed). Provisional: the fit of an incomplete gate, closes it as such."""
        body = _dump(DecisionCreate.model_validate(_dump(decision)))
        return self._write("POST", f"/v1/gates/{run_id}/decision", DecisionPublic, body)

    def close_gate_run(
        self, run_id: int, status: GateStatus, *, note: str | None = None
    ) -> GateRunPublic:
        """Close an open gate without a decision (incomplete or failed)."""
        body = GateRunUpdate(status=status, note=note)
        return self._write("PATCH", f"/v1/gates/{run_id}", GateRunPublic, _dump(body))

    def get_gate_run(self, run_id: int) -> GateRunPublic:
        return self._get(f"/v1/gates/{run_id}", GateRunPublic)

    def list_gate_runs(
        self,
        *,
        kind: GateKind | None = None,
        round: int | None = None,
        status: GateStatus | None = None,
        checkpoint_id: str | None = None,
    ) -> list[GateRunPublic]:
        return list(
            self._all(
                "/v1/gates",
                GateRunPublic,
                kind=kind,
                round=round,
                status=status,
                checkpoint_id=checkpoint_id,
            )
        )

    def get_gate_decision(self, run_id: int) -> DecisionPublic:
        return self._get(f"/v1/gates/{run_id}/decision", DecisionPublic)

    def get_decision(self, decision_id: int) -> DecisionPublic:
        return self._get(f"/v1/decisions/{decision_id}", DecisionPublic)

    # ------------------------------------------------------------ cards and candidates

    def create_card(
        self, card: CardCreate | Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> CardPublic:
        """Store a failure card (the privileged audit is stored apart)."""
        body = _dump(CardCreate.model_validate(_dump(card)))
        return self._write("POST", "/v1/cards", CardPublic, body, idempotency_key=idempotency_key)

    def get_card(self, card_id: int) -> CardPublic:
        return self._get(f"/v1/cards/{card_id}", CardPublic)

    def get_card_audit(self, card_id: int) -> CardAuditPublic:
        """The gold-aware half of a card (analyst and operator tokens only)."""
        return self._get(f"/v1/cards/{card_id}/audit", CardAuditPublic)

    def list_cards(self, **filters: Any) -> list[CardPublic]:
        """Cards filtered by round / outcome / eligible / task_id."""
        return list(self._all("/v1/cards", CardPublic, **filters))

    def create_candidate(self, candidate: CandidateCreate | Mapping[str, Any]) -> CandidatePublic:
        """Store an ADD / REWRITE candidate; the registry creates its chunk version."""
        body = _dump(CandidateCreate.model_validate(_dump(candidate)))
        return self._write("POST", "/v1/candidates", CandidatePublic, body)

    def get_candidate(self, candidate_id: int) -> CandidatePublic:
        return self._get(f"/v1/candidates/{candidate_id}", CandidatePublic)

    def list_candidates(self, **filters: Any) -> list[CandidatePublic]:
        """Candidates filtered by round / operation / status."""
        return list(self._all("/v1/candidates", CandidatePublic, **filters))

    # ------------------------------------------------------------ trainer evidence

    def create_checkpoint(
        self, checkpoint_id: str, *, uri: str, step: int, round: int
    ) -> CheckpointPublic:
        body = CheckpointCreate(id=checkpoint_id, uri=uri, step=step, round=round)
        return self._write("POST", "/v1/checkpoints", CheckpointPublic, _dump(body))

    def get_checkpoint(self, checkpoint_id: str) -> CheckpointPublic:
        return self._get(f"/v1/checkpoints/{checkpoint_id}", CheckpointPublic)

    def list_checkpoints(self, *, round: int | None = None) -> list[CheckpointPublic]:
        return list(self._all("/v1/checkpoints", CheckpointPublic, round=round))

    def record_all_wrong_group(self, group: EvidenceCreate | Mapping[str, Any]) -> EvidencePublic:
        """Trainer: an all-wrong group (task, treatment, bank, checkpoint, retry outcome)."""
        body = _dump(EvidenceCreate.model_validate(_dump(group)))
        return self._write("POST", "/v1/evidence", EvidencePublic, body)

    def settle_retry(
        self, group_id: int, outcome: RetryOutcome, *, trace_uri: str | None = None
    ) -> EvidencePublic:
        """Trainer: the full-skill retry's outcome for a pending group."""
        body = EvidenceUpdate(retry_outcome=outcome, retry_trace_uri=trace_uri)
        return self._write("PATCH", f"/v1/evidence/{group_id}", EvidencePublic, _dump(body))

    def get_evidence(self, group_id: int) -> EvidencePublic:
        return self._get(f"/v1/evidence/{group_id}", EvidencePublic)

    def list_evidence(self, **filters: Any) -> list[EvidencePublic]:
        """All-wrong groups filtered by round / checkpoint_id / retry_outcome / task_id."""
        return list(self._all("/v1/evidence", EvidencePublic, **filters))

    # ------------------------------------------------------------ audit and identity

    def whoami(self) -> dict[str, str]:
        """The token's actor `name` and `role` (AuthError if the registry refuses it)."""
        return self.request("GET", "/v1/whoami").json()

    def audit_page(
        self, *, limit: int = 50, offset: int = 0, **filters: Any
    ) -> Page[AuditEntryPublic]:
        """One page of audit entries, oldest first, filtered by object_type / object_id / actor
        / action / since / until (ISO 8601 times)."""
        return self._page("/v1/audit", AuditEntryPublic, limit=limit, offset=offset, **filters)

    def audit_log(self, **filters: Any) -> list[AuditEntryPublic]:
        """Audit entries filtered by object_type / object_id / actor / action."""
        return list(self._all("/v1/audit", AuditEntryPublic, **filters))
