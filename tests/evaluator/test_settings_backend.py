"""The evaluator's `backend` setting follows the agent runtime's list of backends."""

import pytest
from pydantic import ValidationError

import shared.runtime.agent.backends as backends
from services.evaluator import runtime
from services.evaluator.settings import EvaluatorSettings


def test_every_backend_the_runtime_knows_is_accepted():
    for name in backends.BACKENDS:
        extra = {"openai_base_url": "http://127.0.0.1:1", "openai_model": "m"}
        settings = EvaluatorSettings(backend=name, **(extra if name == "openai" else {}))
        assert settings.backend == name


def test_a_backend_added_to_the_runtime_later_is_accepted(monkeypatch):
    monkeypatch.setattr(backends, "BACKENDS", (*backends.BACKENDS, "procedural-test-double"))
    assert EvaluatorSettings(backend="procedural-test-double").backend == "procedural-test-double"


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValidationError, match="unknown backend 'nope'"):
        EvaluatorSettings(backend="nope")


def test_backend_options_come_from_the_environment_as_json(monkeypatch):
    monkeypatch.setenv("EVALUATOR_BACKEND_OPTIONS", '{"seed": 7}')
    assert EvaluatorSettings().backend_options == {"seed": 7}


def test_a_weightless_backend_gets_the_checkpoint_id_and_its_options(monkeypatch):
    """A test double (no weights to load) is built from the checkpoint id and backend_options."""
    calls = []
    monkeypatch.setattr(backends, "BACKENDS", (*backends.BACKENDS, "fake-test-double"))
    monkeypatch.setattr(backends, "make_backend", lambda *a, **k: calls.append((a, k)))
    settings = EvaluatorSettings(backend="fake-test-double", backend_options={"seed": 3})
    runtime.make_backend(settings, "ckpt-1", None)
    assert calls == [(("fake-test-double", "ckpt-1"), {"checkpoint_id": "ckpt-1", "seed": 3})]


def test_weight_backends_still_need_a_uri():
    with pytest.raises(LookupError, match="no weights uri"):
        runtime.make_backend(EvaluatorSettings(backend="transformers"), "ckpt-1", None)
