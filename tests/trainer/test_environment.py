"""The trainer's process environment in one settings class: tokens, the vLLM key, the rank and
FSDP as a launcher sets them; an empty value is unset; read afresh each time."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.trainer.distributed import fsdp_launch
from services.trainer.environment import SERVICES_WITH_TOKENS, TrainerEnvironment

NAMES = (
    "TRAINER_REGISTRY_TOKEN",
    "TRAINER_EVALUATOR_TOKEN",
    "TRAINER_ANALYST_TOKEN",
    "TRAINER_OPERATOR_TOKEN",
    "TRAINER_VLLM_API_KEY",
    "RANK",
    "ACCELERATE_USE_FSDP",
)


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)


def test_each_service_token_comes_from_its_own_variable(monkeypatch):
    for service in SERVICES_WITH_TOKENS:
        monkeypatch.setenv(f"TRAINER_{service.upper()}_TOKEN", f"t-{service}")
    environment = TrainerEnvironment()
    assert [environment.token(s) for s in SERVICES_WITH_TOKENS] == [
        f"t-{s}" for s in SERVICES_WITH_TOKENS
    ]


def test_an_empty_value_is_unset(monkeypatch):
    monkeypatch.setenv("TRAINER_REGISTRY_TOKEN", "")
    monkeypatch.setenv("TRAINER_VLLM_API_KEY", "")
    monkeypatch.setenv("RANK", "")
    environment = TrainerEnvironment()
    assert environment.token("registry") is None and environment.vllm_api_key is None
    assert environment.main_process


def test_the_launchers_rank_and_fsdp_are_read_when_asked(monkeypatch):
    assert TrainerEnvironment().main_process and not fsdp_launch()
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert not TrainerEnvironment().main_process and fsdp_launch()
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    assert not fsdp_launch()


def test_a_rank_that_is_not_a_number_is_refused(monkeypatch):
    monkeypatch.setenv("RANK", "leader")
    with pytest.raises(ValidationError, match="RANK"):
        TrainerEnvironment()
