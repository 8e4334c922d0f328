"""The client is complete: exercising every client method reaches every OpenAPI operation."""

from __future__ import annotations

from registry_support import CHINESE_CHUNK, TOKENS, chunk_content, gate_protocol, serve

from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api import RegistryClient
from shared.contracts.registry_api.schemas import (
    REWARD_COMPONENTS,
    BankEntryIn,
    CandidateCreate,
    CardCreate,
    ChunkSource,
    DecisionCreate,
    DecisionRowIn,
    EvidenceCreate,
    GateRunCreate,
    GateStatus,
    ObservationIn,
    RetryOutcome,
    Role,
)


class RouteRecorder:
    """ASGI wrapper noting the route template each request was routed to."""

    def __init__(self, app) -> None:
        self.app = app
        self.hits: set[tuple[str, str]] = set()

    async def __call__(self, scope, receive, send):
        await self.app(scope, receive, send)
        route = scope.get("route")
        if scope["type"] == "http" and route is not None:
            # A domain router's route is its own path, mounted under /v1; the app's own carry it.
            path = route.path if route.path.startswith("/v1/") else "/v1" + route.path
            self.hits.add((scope["method"], path))


def test_every_operation_has_a_client_method(app):
    recorder = RouteRecorder(app)
    with serve(recorder) as url:
        ops = RegistryClient(url, TOKENS[Role.operator])
        assert ops.whoami()["role"] == Role.operator.value  # the token's own role
        chunk = ops.create_chunk(
            "query-zh", ChunkContent(**CHINESE_CHUNK), source=ChunkSource.cold_start
        )
        other = ops.create_chunk("price", ChunkContent(**chunk_content("p")))
        v2 = ops.add_chunk_version(chunk.id, ChunkContent(**chunk_content("v2")))
        ops.get_chunk(chunk.id)
        ops.list_chunks(slug_prefix="query")
        ops.chunk_history(chunk.id)
        ops.get_chunk_version(chunk.id, 1)
        ops.get_chunk_version_by_id(v2.id)

        bank = ops.create_bank([BankEntryIn(chunk_version_id=v2.id, rho=0.9)], round=0)
        ops.update_bank(bank.id, note="cold start")
        ops.freeze_bank(bank.id)
        ops.get_bank(bank.id)
        ops.bank_summary(bank.id)
        ops.list_banks()
        ops.render_bank(bank.id, [1])
        without = ops.retire_chunk(bank.id, chunk.id, reason="test")
        restored = ops.restore_chunk(without.id, other.id, rho=0.5, reason="test")
        ops.diff_banks(restored.id, bank.id)
        ops.freeze_bank(restored.id)

        ops.create_alias("current", bank.id, reason="S0")
        alias = ops.get_alias("current")
        ops.list_aliases()
        ops.get_bank_by_alias("current")
        ops.move_alias("current", restored.id, reason="r", if_match=alias.etag)
        ops.rollback_alias("current", reason="back")
        ops.alias_history("current")
        ops._frozen.clear()
        ops.request("GET", "/v1/aliases/current/bank")  # the alias's bank document itself
        spare = ops.create_bank(from_bank_id=bank.id)
        ops.freeze_bank(spare.id)
        ops.retire_bank(spare.id)

        ops.create_checkpoint("ckpt-r0", uri="file:///c", step=20, round=0)
        ops.get_checkpoint("ckpt-r0")
        ops.list_checkpoints()
        group = ops.record_all_wrong_group(
            EvidenceCreate(
                task_id="t1",
                round=0,
                step=3,
                group_index=0,
                bank_id=bank.id,
                checkpoint_id="ckpt-r0",
                treatment={"mode": "assisted", "inclusion": [1]},
            )
        )
        ops.settle_retry(group.id, RetryOutcome.failure)
        ops.get_evidence(group.id)
        ops.list_evidence(retry_outcome="failure")

        card = ops.create_card(
            CardCreate(
                round=0,
                task_id="t1",
                outcome="ADD",
                eligible=True,
                evidence_id=group.id,
                deployable={
                    "failure_mechanism": "m",
                    "applicable_when": "w",
                    "observable_trigger": "t",
                    "corrective_procedure": "p",
                    "verification_step": "v",
                },
            )
        )
        ops.get_card(card.id)
        ops.get_card_audit(card.id)
        ops.list_cards(round=0)
        candidate = ops.create_candidate(
            CandidateCreate(
                round=0,
                operation="ADD",
                content=ChunkContent(**chunk_content("c")),
                source_card_ids=[card.id],
            )
        )
        ops.get_candidate(candidate.id)
        ops.list_candidates(round=0)

        pool = {"columns": [{"chunk_version_id": v2.id, "kind": "current", "slot": 0}]}
        run = ops.create_gate_run(
            GateRunCreate(
                round=0,
                checkpoint_id="ckpt-r0",
                base_bank_id=bank.id,
                candidate_pool=pool,
                mask_seed=1,
                **gate_protocol(1),
            )
        )
        rewards = dict.fromkeys(REWARD_COMPONENTS, 1.0)
        ops.add_observations(
            run.id, [ObservationIn(task_id="v1", inclusion=[1], bare=rewards, masked=rewards)]
        )
        ops.list_observations(run.id)
        decision = ops.post_decision(
            run.id,
            DecisionCreate(
                rows=[
                    DecisionRowIn(
                        chunk_version_id=v2.id,
                        coefficients={"r_strict": 0.1},
                        rank=1,
                        status="selected",
                    )
                ]
            ),
        )
        ops.get_gate_run(run.id)
        ops.list_gate_runs()
        ops.get_gate_decision(run.id)
        ops.get_decision(decision.id)
        closing = ops.create_gate_run(
            GateRunCreate(
                round=1,
                checkpoint_id="ckpt-r0",
                base_bank_id=bank.id,
                candidate_pool=pool,
                mask_seed=2,
                **gate_protocol(1),
            )
        )
        ops.close_gate_run(closing.id, GateStatus.incomplete)
        ops.audit_log(object_type="alias")
        ops.close()

    operations = {
        (method.upper(), path)
        for path, item in app.openapi()["paths"].items()
        for method in item
        if path.startswith("/v1/")
    }
    assert operations - recorder.hits == set()
