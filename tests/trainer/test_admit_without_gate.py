"""The no-gate ablation against a real registry: every candidate joins the bank untested, a
REWRITE in its target's place, the bank frozen and the run's alias moved; without an operator
token the run stops and says which one it needs. (The procedural experiment test rarely
compiles a candidate at its scale, so this is where admission itself is exercised.)"""

from __future__ import annotations

import os
import uuid

import pytest

from services.trainer.config import GateConfig, TrainerConfig
from services.trainer.gate_round import gate_round
from services.trainer.orchestrator import Run, RunError, ServiceUrls
from services.trainer.run_context import RunContext, RunState
from services.trainer.service_lifecycle import ServiceClients
from shared.contracts.registry_api.client import RegistryClient
from tests.evaluator.bodies import card_body, content
from tests.operator.live_registry import live_registry


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    with live_registry("postgres", tmp_path_factory.mktemp("admit")) as live:
        yield live


def world(registry) -> dict:
    """S_0 of two chunks behind a fresh alias; one ADD and one REWRITE of the first chunk."""
    tag = uuid.uuid4().hex[:6]
    ops = RegistryClient(registry.url, registry.tokens["operator"])
    chunks = [ops.create_chunk(f"{n}-{tag}", content(f"{n}-{tag}")) for n in ("a", "b")]
    bank = ops.create_bank(
        [{"chunk_version_id": c.latest.id, "rho": 0.4, "coefficient": 0.02} for c in chunks]
    )
    ops.freeze_bank(bank.id)
    ops.create_alias(f"exp-{tag}", bank.id, reason="test setup")
    cards = [ops.create_card(card_body(0)), ops.create_card(card_body(0))]
    add = ops.create_candidate(
        {"round": 0, "operation": "ADD", "slug": f"n-{tag}", "content": content(f"n-{tag}"),
         "source_card_ids": [cards[0].id]}
    )  # fmt: skip
    rewrite = ops.create_candidate(
        {"round": 0, "operation": "REWRITE", "target_chunk_id": chunks[0].id,
         "content": content(f"a2-{tag}"), "source_card_ids": [cards[1].id]}
    )  # fmt: skip
    return {"ops": ops, "chunks": chunks, "bank": bank, "alias": f"exp-{tag}", "add": add,
            "rewrite": rewrite}  # fmt: skip


def admitting_run(tmp_path, registry, w) -> tuple[RunContext, dict]:
    config = TrainerConfig.from_toml("configs/simulated-tiny.toml")
    config = config.with_(gate=GateConfig(admit="all", alias=w["alias"], val_tasks=20))
    run = Run(config, tmp_path, urls=ServiceUrls(registry=registry.url), initial_bank=None)
    context = run.context
    context.clients = ServiceClients(
        registry=RegistryClient(registry.url, registry.tokens["trainer"]),
        evaluator=None,
        analyst=None,
        urls={"registry": registry.url, "evaluator": "http://127.0.0.1:9"},
        operator_token=os.environ.get("TRAINER_OPERATOR_TOKEN"),
    )
    context.record.data["services"] = dict(context.clients.urls)
    context.record.round(0).candidate_ids = [w["add"].id, w["rewrite"].id]
    return context, RunState(round=0, phase="gate", bank_id=w["bank"].id, checkpoint_id="c")


def test_every_candidate_is_admitted_untested(tmp_path, registry, monkeypatch):
    w = world(registry)
    monkeypatch.setenv("TRAINER_OPERATOR_TOKEN", registry.tokens["operator"])
    context, state = admitting_run(tmp_path, registry, w)
    new = w["ops"].get_bank(gate_round(context, state))
    assert new.id != w["bank"].id and new.content_hash is not None  # a new, frozen bank
    versions = [e.chunk_version_id for e in sorted(new.entries, key=lambda e: e.position)]
    b = w["chunks"][1].latest.id
    assert versions == [w["rewrite"].chunk_version_id, b, w["add"].chunk_version_id]
    assert [e.coefficient for e in sorted(new.entries, key=lambda e: e.position)] == [
        None, 0.02, None,
    ]  # fmt: skip
    assert new.parent_bank_id == w["bank"].id and new.q == w["bank"].q
    assert w["ops"].get_alias(w["alias"]).bank_id == new.id
    record = context.record.round(0)
    assert record.adopted and record.next_bank_id == new.id
    assert record.gate_status == "skipped: admitted without a gate (ablation)"


def test_without_an_operator_token_the_run_stops_and_says_so(tmp_path, registry, monkeypatch):
    w = world(registry)
    monkeypatch.delenv("TRAINER_OPERATOR_TOKEN", raising=False)
    context, state = admitting_run(tmp_path, registry, w)
    with pytest.raises(RunError, match="TRAINER_OPERATOR_TOKEN"):
        gate_round(context, state)
    assert w["ops"].get_alias(w["alias"]).bank_id == w["bank"].id  # nothing moved
