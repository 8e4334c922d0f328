"""The full-skill retry: the whole bank in the prompt, checked against the frozen bank."""

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from services.analyst.counterfactual_trials import bank_chunks as injected
from services.analyst.mechanisms import LIBRARY
from services.analyst.settings import AnalystSettings
from services.analyst.slow_loop import RetryMismatch, run_retries, verify_retry
from shared.contracts.analyst_api.schemas import AllWrongGroupPublic, AllWrongGroupSubmit
from shared.contracts.registry_api.schemas import BankPublic
from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.prompts import DEFAULT_LAYOUT, LAYOUTS
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from tests.analyst.support import library_bank, small_env, succeeds_with


def frozen_bank(entries) -> BankPublic:
    return BankPublic(
        id=9, q=0.2, round=1, parent_bank_id=None, gate_decision_id=None, note=None,
        content_hash="b" * 64, frozen_at=datetime.now(UTC), created_by="test",
        created_at=datetime.now(UTC), entries=entries,
    )  # fmt: skip


def group(task_id: str, index: int) -> AllWrongGroupPublic:
    request = AllWrongGroupSubmit(
        run_id="r", round=1, step=index, group_index=0, task_id=task_id, bank_id=9,
        bank_hash="b" * 64, treatment={"mode": "assisted", "inclusion": [1, 1]},
        siblings=[{"reward": 0.0}],
    )  # fmt: skip
    return AllWrongGroupPublic(id=f"g{index}", request=request, status="pending", created_at="t")


def test_retry_uses_the_whole_bank_and_is_verified(tmp_path):
    env = small_env()
    bank = frozen_bank(library_bank("explicit_query", "option_choice"))
    policy = make_backend("procedural", "retry-test-double", slip=0.0)
    groups = [group(task, i) for i, task in enumerate(env.task_ids("train")[:6])]
    outcomes = run_retries(
        groups, bank, env=env, policy=policy, settings=AnalystSettings(data_dir=tmp_path),
        traces=tmp_path,
    )  # fmt: skip
    assert set(outcomes) == {g.id for g in groups}
    assert {outcome for outcome, _ in outcomes.values()} == {"success", "failure"}
    chunks = injected(bank.entries)
    for outcome, trajectory in outcomes.values():
        # success iff the same policy with the whole bank reaches R_success = 1 (the deficit)
        assert outcome == ("success" if succeeds_with(env, trajectory, chunks) else "failure")
        assert trajectory.provenance.injected == ["chunk-1@1", "chunk-2@1"]
        assert trajectory.provenance.inclusion == [1, 1]
        assert (tmp_path / f"{trajectory.episode_id}.json").exists()


def test_a_retry_that_did_not_carry_the_bank_is_refused():
    env = small_env()
    bank = frozen_bank(library_bank("explicit_query", "option_choice"))
    policy = make_backend("procedural", "retry-test-double")
    chunks = tuple(injected(bank.entries))
    spec = EpisodeSpec(
        task_id=env.task_ids("train")[0], seed=0, chunks=chunks, bank_hash=bank.content_hash
    )
    (good,) = run_episodes(env, policy, [spec], RolloutConfig())
    verify_retry(good, bank, DEFAULT_LAYOUT)
    partial = replace(spec, chunks=chunks[:1])
    (short,) = run_episodes(env, policy, [partial], RolloutConfig())
    with pytest.raises(RetryMismatch, match="injected"):
        verify_retry(short, bank, DEFAULT_LAYOUT)
    other_hash = replace(spec, bank_hash="c" * 64)
    (wrong,) = run_episodes(env, policy, [other_hash], RolloutConfig())
    with pytest.raises(RetryMismatch, match="bank hash"):
        verify_retry(wrong, bank, DEFAULT_LAYOUT)


def test_a_retry_whose_prompt_text_is_not_the_frozen_banks_is_refused():
    # same ids, versions and bank hash, but the prompt carried other text for chunk-1: the
    # check must compare the retry's skill block with the frozen bank, not the bank with itself
    env = small_env()
    bank = frozen_bank(library_bank("explicit_query", "option_choice"))
    policy = make_backend("procedural", "retry-test-double")
    edited = list(injected(bank.entries))
    edited[0] = edited[0].model_copy(update={"content": LIBRARY["price_check"].template})
    spec = EpisodeSpec(task_id=env.task_ids("train")[0], seed=0, chunks=tuple(edited),
                       bank_hash=bank.content_hash)  # fmt: skip
    (retry,) = run_episodes(env, policy, [spec], RolloutConfig())
    assert retry.provenance.injected == ["chunk-1@1", "chunk-2@1"]
    with pytest.raises(RetryMismatch, match="skill block"):
        verify_retry(retry, bank, DEFAULT_LAYOUT)


def test_a_retry_in_another_prompt_layout_is_refused():
    env = small_env()
    bank = frozen_bank(library_bank("explicit_query"))
    policy = make_backend("procedural", "retry-test-double")
    chunks = tuple(injected(bank.entries))
    spec = EpisodeSpec(task_id=env.task_ids("train")[0], seed=0, chunks=chunks,
                       bank_hash=bank.content_hash)  # fmt: skip
    other = next(version for version in LAYOUTS if version != DEFAULT_LAYOUT)
    (retry,) = run_episodes(env, policy, [spec], RolloutConfig(prompt_version=other))
    with pytest.raises(RetryMismatch, match="prompt"):
        verify_retry(retry, bank, DEFAULT_LAYOUT)
    verify_retry(retry, bank, other)
