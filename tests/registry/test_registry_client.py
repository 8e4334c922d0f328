"""The typed client against the real app over HTTP: typed results and errors, ETag cache,
retries on real failing endpoints, idempotent replays of writes whose answer was lost."""

from __future__ import annotations

import threading
import time

import pytest
from registry_support import (
    CHINESE_CHUNK,
    TOKENS,
    chunk_content,
    free_port,
    gate_protocol,
    serve,
)
from sqlalchemy import text
from starlette.responses import PlainTextResponse

from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api import (
    AuthError,
    Invalid,
    NotFound,
    PreconditionFailed,
    RegistryClient,
    Unavailable,
)
from shared.contracts.registry_api.schemas import (
    REWARD_COMPONENTS,
    BankEntryIn,
    ChunkSource,
    DecisionCreate,
    DecisionRowIn,
    DecisionStatus,
    GateRunCreate,
    ObservationIn,
    Role,
)


def client_for(url: str, role: Role = Role.operator, **kwargs) -> RegistryClient:
    return RegistryClient(url, TOKENS[role], backoff=0.01, backoff_max=0.05, **kwargs)


class Flaky:
    """A real ASGI endpoint in front of the registry that fails the first `n` requests.

    `lose_response=True` forwards the request to the registry (so the write happens) and then
    answers 502 anyway: the client sees a failure although the server committed.
    """

    def __init__(self, app, n: int, *, status: int = 503, lose_response: bool = False) -> None:
        self.app, self.remaining, self.status, self.lose_response = app, n, status, lose_response
        self.seen: list[tuple[str, str | None]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        self.seen.append((scope["path"], (headers.get(b"idempotency-key") or b"").decode() or None))
        if self.remaining <= 0:
            return await self.app(scope, receive, send)
        self.remaining -= 1
        if self.lose_response:

            async def discard(_message):
                return None

            await self.app(scope, receive, discard)
        await PlainTextResponse("flaky", status_code=self.status)(scope, receive, send)


def test_typed_round_trip_and_bank_cache(api, live_server):
    with (
        client_for(live_server, Role.analyst) as analyst,
        client_for(live_server, Role.evaluator) as evaluator,
    ):
        chunk = analyst.create_chunk(
            "query-zh", ChunkContent(**CHINESE_CHUNK), source=ChunkSource.cold_start
        )
        assert chunk.latest.content.title == CHINESE_CHUNK["title"]
        v2 = analyst.add_chunk_version(chunk.id, ChunkContent(**chunk_content("v2")))
        assert [v.version for v in analyst.chunk_history(chunk.id)] == [1, 2]
        bank = evaluator.create_bank(
            [BankEntryIn(chunk_version_id=v2.id, rho=0.9, coefficient=0.1)], round=0
        )
        summary = evaluator.freeze_bank(bank.id)
        assert summary.status == "frozen"
        alias = evaluator.create_alias("current", bank.id, reason="S0")

        with client_for(live_server, Role.trainer) as trainer:
            first = trainer.get_bank_by_alias("current")
            assert first.content_hash == summary.content_hash
            assert trainer.get_bank(bank.id) == first and trainer.stats["cache_hits"] == 1
            assert (
                trainer.get_bank(bank.id, revalidate=True) == first
                and trainer.stats["not_modified"] == 1
            )
            rendered = trainer.render_bank(bank.id, [True])
            assert rendered.text.startswith("[可选策略提示]")
            with pytest.raises(AuthError):
                trainer.freeze_bank(bank.id)

        other = evaluator.create_bank(from_bank_id=bank.id)
        evaluator.freeze_bank(other.id)
        moved = evaluator.move_alias("current", other.id, reason="next", if_match=alias.etag)
        with pytest.raises(PreconditionFailed):
            evaluator.move_alias("current", bank.id, reason="stale", if_match=alias.etag)
        assert [e.to_bank_id for e in evaluator.alias_history("current")] == [bank.id, other.id]
        assert moved.etag == evaluator.get_alias("current").etag
        with pytest.raises(NotFound):
            evaluator.get_bank(99999)
        with pytest.raises(Invalid) as invalid:
            evaluator.create_bank([BankEntryIn(chunk_version_id=99999, rho=0.5)])
        assert invalid.value.detail[0]["loc"] == ["body", "entries", 0, "chunk_version_id"]


def test_gate_flow_through_client(api, live_server):
    version = api.chunk("one")["latest"]["id"]
    bank = api.bank([version])
    with client_for(live_server, Role.trainer) as trainer:
        trainer.create_checkpoint("ckpt-r0", uri="file:///ckpt", step=20, round=0)
    with client_for(live_server, Role.evaluator) as evaluator:
        run = evaluator.create_gate_run(
            GateRunCreate(
                round=0,
                checkpoint_id="ckpt-r0",
                base_bank_id=bank["id"],
                candidate_pool={
                    "columns": [{"chunk_version_id": version, "kind": "current", "slot": 0}]
                },
                mask_seed=20260901,
                **gate_protocol(7),
            )
        )
        rewards = dict.fromkeys(REWARD_COMPONENTS, 1.0)
        observations = [
            ObservationIn(task_id=f"val-{i}", inclusion=[i % 2], bare=rewards, masked=rewards)
            for i in range(7)
        ]
        result = evaluator.add_observations(run.id, observations, batch_size=3)
        assert result.accepted == 7 and result.n_observations == 7
        assert [o.task_id for o in evaluator.list_observations(run.id)] == [
            f"val-{i}" for i in range(7)
        ]
        decision = evaluator.post_decision(
            run.id,
            DecisionCreate(
                rows=[
                    DecisionRowIn(
                        chunk_version_id=version,
                        coefficients={"r_strict": 0.1},
                        rank=1,
                        status=DecisionStatus.selected,
                    )
                ]
            ),
        )
        assert evaluator.get_gate_decision(run.id) == decision
        assert evaluator.get_gate_run(run.id).status == "complete"


def test_retries_5xx_until_success(app):
    flaky = Flaky(app, 2, status=503)
    with serve(flaky) as url, client_for(url, Role.reader) as reader:
        page = reader.list_banks()
    assert page.total == 0
    assert reader.stats["retries"] == 2 and len(flaky.seen) == 3


def test_gives_up_after_retries(app):
    flaky = Flaky(app, 100, status=500)
    with (
        serve(flaky) as url,
        client_for(url, Role.reader, retries=2) as reader,
        pytest.raises(Unavailable),
    ):
        reader.list_banks()
    assert len(flaky.seen) == 3


def test_lost_response_is_replayed_not_rewritten(app):
    flaky = Flaky(app, 1, status=502, lose_response=True)
    with serve(flaky) as url, client_for(url, Role.analyst) as analyst:
        chunk = analyst.create_chunk("once", ChunkContent(**chunk_content("once")))
    assert analyst.stats["retries"] == 1 and analyst.stats["replayed"] == 1
    keys = [key for _, key in flaky.seen]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0] is not None
    with app.state.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM chunks")).scalar_one() == 1
    assert chunk.slug == "once"


def test_connection_errors_are_retried(app):
    port = free_port()
    holder: dict = {}

    def start_late() -> None:
        time.sleep(0.3)
        holder["ctx"] = serve(app, port)
        holder["url"] = holder["ctx"].__enter__()

    starter = threading.Thread(target=start_late)
    starter.start()
    try:
        with RegistryClient(
            f"http://127.0.0.1:{port}", TOKENS[Role.reader], backoff=0.1, backoff_max=0.5, retries=8
        ) as reader:
            assert reader.list_banks().total == 0
        assert reader.stats["retries"] >= 1
    finally:
        starter.join()
        holder["ctx"].__exit__(None, None, None)


def test_unreachable_registry_raises_unavailable():
    client = RegistryClient(f"http://127.0.0.1:{free_port()}", "t", retries=1, backoff=0.01)
    with client, pytest.raises(Unavailable):
        client.list_banks()


def test_a_frozen_bank_in_one_call_and_again_after_a_half_done_try(api, live_server):
    """`create_frozen_bank` ends frozen, and a retry with the same key (after a crash between
    create and freeze, or after both) ends with the same frozen bank, not a second one."""
    with client_for(live_server, Role.evaluator) as evaluator:
        bank = evaluator.create_frozen_bank([], q=0.2, idempotency_key="s0:empty")
        assert evaluator.bank_summary(bank.id).status == "frozen"
        assert evaluator.create_frozen_bank([], q=0.2, idempotency_key="s0:empty").id == bank.id
        half = evaluator.create_bank([], q=0.3, idempotency_key="half")  # the crash: no freeze
        again = evaluator.create_frozen_bank([], q=0.3, idempotency_key="half")
        assert again.id == half.id and evaluator.bank_summary(half.id).status == "frozen"
