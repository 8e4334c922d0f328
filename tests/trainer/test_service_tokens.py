"""The trainer's tokens for its three services: from TRAINER_*_TOKEN for a service it is given
by URL (refused at start when missing: a 401 would otherwise end the first round, after its
training), and the local stack's trainer token for a service it starts itself."""

from __future__ import annotations

import pytest

from services.trainer.local_stack import local_stack
from services.trainer.run_context import RunError
from services.trainer.service_lifecycle import ENV_TOKENS, SERVICES, service_token
from shared.kit.auth import hash_token


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_given_by_url_needs_its_token_from_the_environment(
    service, tmp_path, monkeypatch
):
    stack = local_stack(tmp_path)
    monkeypatch.delenv(ENV_TOKENS[service], raising=False)
    with pytest.raises(RunError, match=ENV_TOKENS[service]):
        service_token(service, "http://evaluator:8100", stack)
    monkeypatch.setenv(ENV_TOKENS[service], "from-the-secret")
    assert service_token(service, "http://evaluator:8100", stack) == "from-the-secret"
    assert not (
        tmp_path / "services" / "tokens.json"
    ).exists()  # nothing minted for a remote service


def test_a_service_started_here_gets_the_local_trainer_token(tmp_path, monkeypatch):
    """Even with a token in the environment (meant for a remote one): the local service admits
    only the local grants."""
    stack = local_stack(tmp_path)
    for service in SERVICES:
        monkeypatch.setenv(ENV_TOKENS[service], "for-a-remote-service")
    tokens = {service_token(service, None, stack) for service in SERVICES}
    assert tokens == {stack.tokens()["trainer"]}
    # the grant list every local service (registry, evaluator, analyst) is started with
    grants = {grant["token_sha256"]: grant["role"] for grant in stack.grants()}
    assert grants[hash_token(stack.tokens()["trainer"])] == "trainer"
