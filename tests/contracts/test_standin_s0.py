"""The stand-in S_0 (`shared/runtime/standin_s0.py`) on a real registry process: what the trainer's local
stack and the deploy smoke both seed when no cold start ran."""

import pytest

from shared.contracts.inclusion import rho_from_coefficients
from shared.contracts.registry_api.client import RegistryClient
from shared.runtime.standin_s0 import TOPICS, seed_standin_s0
from tests.operator.live_registry import live_registry


@pytest.fixture
def operator(tmp_path):
    """A fresh registry: stand-in slugs are fixed, so a registry holds one stand-in S_0."""
    with (
        live_registry("sqlite", tmp_path) as registry,
        RegistryClient(registry.url, registry.tokens["operator"]) as client,
    ):
        yield client


def test_a_frozen_aliased_bank_whose_rho_is_the_methods_mapping(operator):
    bank_id = seed_standin_s0(
        operator, alias="s0", key="run-1", seeded_by="a test", q=0.3, rho_min=0.1, rho_max=0.8
    )
    assert operator.get_alias("s0").bank_id == bank_id
    bank = operator.get_bank(bank_id)
    assert bank.content_hash is not None and bank.q == 0.3
    entries = sorted(bank.entries, key=lambda e: e.position)
    assert [e.slug for e in entries] == [f"standin-{topic}" for topic in TOPICS]
    coefficients = {e.slug: e.coefficient for e in entries}
    assert all(0.01 <= c <= 0.06 for c in coefficients.values())
    expected = rho_from_coefficients(coefficients, rho_min=0.1, rho_max=0.8)
    assert {e.slug: e.rho for e in entries} == pytest.approx(expected)
    assert max(e.rho for e in entries) == pytest.approx(0.8)


def test_a_rerun_with_the_same_key_writes_nothing_twice(operator):
    first = seed_standin_s0(operator, alias="s0-first", key="run-2", seeded_by="a test")
    versions = operator.get_bank(first).entries
    # the first attempt's alias never reached the run (a crash before it): it seeds again
    again = seed_standin_s0(operator, alias="s0-again", key="run-2", seeded_by="a test")
    assert again == first
    assert operator.get_bank(again).entries == versions
    assert operator.get_alias("s0-again").bank_id == first
