"""The analyst hardened as the registry is, tried as a new user and as an attacker would
(issue 34), against the real `intraskill analyst serve` process on loopback (the live
registry). Each test names the issue's item it holds to."""

from __future__ import annotations

import pytest

from tests.service_bodies import assert_bodies_are_limited_then_authenticated_then_parsed
from tests.service_servers import analyst_serving, bearer


@pytest.fixture(scope="module")
def analyst(registry_url, tmp_path_factory):
    with analyst_serving(registry_url, tmp_path_factory.mktemp("analyst-hardening")) as url:
        yield url


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("/v1/all-wrong-groups", "trainer"),
        ("/v1/compile-jobs", "trainer"),
        ("/v1/cold-start-jobs", "operator"),
    ],
)
def test_1_bodies_are_limited_then_authenticated_then_parsed(analyst, path, role):
    assert_bodies_are_limited_then_authenticated_then_parsed(analyst, path, bearer(role))
