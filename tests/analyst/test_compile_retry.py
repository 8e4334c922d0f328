"""A round's compile retried after its job was interrupted (the analyst restarted mid-round)
keeps the cards and candidates the first attempt stored: they are this round's, not
duplicates. The same text proposed again in a later round stays a duplicate (evidence only).

Live registry (the evaluator tests' fixture); the compiler and the diagnosis are stand-ins
(a fixed ADD, a fixed card), so the tests are about what the slow loop does with the registry's
answers. The retries run the procedural TEST DOUBLE policy."""

import uuid

from gate_service_support import card_body, content
from registry_server import TOKENS

from services.analyst.compiler import Compilation, CompiledCandidate
from services.analyst.settings import AnalystSettings
from services.analyst.slow_loop import compile_round_job
from services.analyst.store import GroupStore
from shared.contracts.analyst_api.schemas import AllWrongGroupSubmit, CompileRoundCreate
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import CardCreate


def one_add(card_id: int, tag: str):
    def compiler(cards, **_):
        candidate = CompiledCandidate("ADD", None, "wrong size", content(tag), (card_id,), "sig")
        return Compilation(candidates=[candidate])

    return compiler


def test_a_retried_compile_keeps_the_candidates_its_interrupted_attempt_stored(
    registry_url, tmp_path
):
    tag = uuid.uuid4().hex[:8]
    analyst = RegistryClient(registry_url, TOKENS["analyst"])
    evaluator = RegistryClient(registry_url, TOKENS["evaluator"])
    bank = evaluator.create_bank([], round=0)
    evaluator.freeze_bank(bank.id)
    card = analyst.create_card(card_body(0))
    settings = AnalystSettings(
        registry_url=registry_url, registry_token=TOKENS["analyst"], data_dir=tmp_path
    )

    def compile_round(round_index: int, attempt: str) -> dict:
        body = CompileRoundCreate(
            run_id=f"run-{tag}",
            round=round_index,
            bank_id=bank.id,
            policy={"checkpoint_id": f"ckpt-{tag}", "backend": "procedural"},
            env_preset="test",
        )
        folder = tmp_path / attempt
        folder.mkdir()
        return compile_round_job(
            body, settings=settings, store=GroupStore(tmp_path / "groups"), client=analyst,
            analyzer=None, folder=folder, compiler=one_add(card.id, tag),
        )  # fmt: skip

    first = compile_round(0, "first")
    assert len(first["candidate_ids"]) == 1
    retried = compile_round(0, "retry")
    assert analyst.get_candidate(first["candidate_ids"][0]).source_card_ids == [card.id]
    assert retried["candidate_ids"] == first["candidate_ids"]
    assert retried["evidence_only_card_ids"] == []
    later = compile_round(1, "later")
    assert later["candidate_ids"] == [] and later["evidence_only_card_ids"] == [card.id]
    for client in (analyst, evaluator):
        client.close()


def test_a_retried_compile_whose_compiler_answers_otherwise_cites_each_card_once(
    registry_url, tmp_path
):
    """Exactly once across a retried compile: the retry's compiler (an llm one need not
    repeat itself) proposes another text for the same card; the round keeps the stored
    candidate and the card is cited by one candidate of the round, not two."""
    tag, round_index = uuid.uuid4().hex[:8], 20_000 + uuid.uuid4().int % 10**6
    analyst = RegistryClient(registry_url, TOKENS["analyst"])
    evaluator = RegistryClient(registry_url, TOKENS["evaluator"])
    bank = evaluator.create_bank([], round=round_index)
    evaluator.freeze_bank(bank.id)
    card = analyst.create_card(card_body(round_index))
    settings = AnalystSettings(
        registry_url=registry_url, registry_token=TOKENS["analyst"], data_dir=tmp_path
    )

    def compile_round(attempt: str) -> dict:
        body = CompileRoundCreate(
            run_id=f"run-{tag}", round=round_index, bank_id=bank.id, env_preset="test",
            policy={"checkpoint_id": f"ckpt-{tag}", "backend": "procedural"},
        )  # fmt: skip
        folder = tmp_path / attempt
        folder.mkdir()
        return compile_round_job(
            body, settings=settings, store=GroupStore(tmp_path / "groups"), client=analyst,
            analyzer=None, folder=folder, compiler=one_add(card.id, f"{tag}-{attempt}"),
        )  # fmt: skip

    first = compile_round("first")
    retried = compile_round("retry")
    assert retried["candidate_ids"] == first["candidate_ids"] and len(first["candidate_ids"]) == 1
    citing = [c for c in analyst.list_candidates(round=round_index) if card.id in c.source_card_ids]
    assert [c.id for c in citing] == first["candidate_ids"]
    for client in (analyst, evaluator):
        client.close()


def test_a_retried_compile_reuses_cards_stored_before_the_groups_were_recorded(
    registry_url, tmp_path
):
    """The interruption fell between a card's write and its group's record: the retry finds
    the card by its group and does not write (or diagnose) it again."""
    tag, round_index = uuid.uuid4().hex[:8], 10_000 + uuid.uuid4().int % 10**6
    analyst = RegistryClient(registry_url, TOKENS["analyst"])
    evaluator = RegistryClient(registry_url, TOKENS["evaluator"])
    bank = evaluator.create_bank([], round=round_index)
    evaluator.freeze_bank(bank.id)
    bank = evaluator.get_bank(bank.id)
    settings = AnalystSettings(
        registry_url=registry_url, registry_token=TOKENS["analyst"], data_dir=tmp_path
    )
    store = GroupStore(tmp_path / "groups")
    env = settings.make_env("test")
    for index, task in enumerate(env.task_ids("train")[:6]):
        store.submit(
            AllWrongGroupSubmit(
                run_id=f"run-{tag}", round=round_index, step=0, group_index=index, task_id=task,
                bank_id=bank.id, bank_hash=bank.content_hash,
                treatment={"mode": "assisted_empty", "inclusion": []},
                siblings=[{"reward": 0.0, "trajectory_uri": "file:///t/0.json"}] * 4,
            ),
            created_at="2026-12-01T00:00:00+00:00",
        )  # fmt: skip
    diagnosed, blind_agents = [], set()

    def analyzer(request):
        diagnosed.append(request.trajectory.task_id)
        blind_agents.add(request.verifier.checkpoint_id)
        return CardCreate(**card_body(request.round, request.trajectory.task_id))

    def compile_round(attempt: str) -> dict:
        body = CompileRoundCreate(
            run_id=f"run-{tag}", round=round_index, bank_id=bank.id, env_preset="test",
            policy={"checkpoint_id": f"ckpt-{tag}", "backend": "procedural"},
        )  # fmt: skip
        folder = tmp_path / attempt
        folder.mkdir()
        return compile_round_job(
            body, settings=settings, store=store, client=analyst, analyzer=analyzer,
            folder=folder, compiler=lambda cards, **_: Compilation(),
        )  # fmt: skip

    first = compile_round("first")
    assert first["card_ids"] and len(diagnosed) == len(first["card_ids"])
    assert blind_agents == {f"ckpt-{tag}"}  # the counterfactual agent: the frozen checkpoint
    for group in store.list(run_id=f"run-{tag}", round=round_index):  # the records never written
        store.update(group.id, status="pending", card_id=None, card_outcome=None)
    diagnosed.clear()
    retried = compile_round("retry")
    assert diagnosed == []
    assert sorted(retried["card_ids"]) == sorted(first["card_ids"])
    assert sorted(c.id for c in analyst.list_cards(round=round_index)) == sorted(first["card_ids"])
    for client in (analyst, evaluator):
        client.close()
