"""The one loopback stack (the trainer's local services, the demo's, the tests'): tokens kept
per run folder, services started ready and stopped in reverse order."""

from __future__ import annotations

import json
import os

import httpx
import pytest

from shared.kit.auth import hash_token
from shared.kit.loopback import ROLES, LoopbackStack


def test_tokens_are_minted_once_per_folder_and_every_service_admits_them(tmp_path):
    stack = LoopbackStack(tmp_path, tmp_path / "logs")
    tokens = stack.tokens()
    assert set(tokens) == set(ROLES)
    assert LoopbackStack(tmp_path, tmp_path / "logs").tokens() == tokens  # a resumed run
    assert (tmp_path / "tokens.json").stat().st_mode & 0o777 == 0o600
    grants = {grant["token_sha256"]: grant["role"] for grant in stack.grants()}
    assert {grants[hash_token(token)] for token in tokens.values()} == set(ROLES)


def test_a_folder_of_the_older_layout_gets_fresh_tokens(tmp_path):
    """The trainer once kept `{role: token}` alone: services get their grants at each start,
    so minting anew loses nothing."""
    (tmp_path / "tokens.json").write_text(json.dumps({role: "old" for role in ROLES}))
    tokens = LoopbackStack(tmp_path, tmp_path).tokens()
    assert set(tokens) == set(ROLES) and "old" not in tokens.values()


def test_a_stack_starts_its_registry_ready_and_stops_it(tmp_path):
    seen: list[str] = []
    stack = LoopbackStack(tmp_path, tmp_path / "logs", on_start=seen.append)
    try:
        registry = stack.start_registry()
        assert seen == ["registry"] and stack.urls() == {"registry": registry.url}
        token = stack.tokens()["reader"]
        answer = httpx.get(
            f"{registry.url}/v1/banks", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        assert answer.status_code == 200  # the stack's grants are the registry's
        assert (tmp_path / "registry.sqlite").is_file()
    finally:
        stack.stop()
    assert stack.started == [] and registry.process.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(registry.process.pid, 0)
