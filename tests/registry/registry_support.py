"""Shared helpers of the registry tests (constants, request helpers, a live-server runner).

A module of its own, not conftest.py: test folders each have a conftest, and importing names
from "conftest" would pick whichever folder's was imported first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi.testclient import TestClient

from shared.contracts.registry_api.schemas import Role
from tests.live_servers import ADMIN_URL as ADMIN_URL  # re-exported to the registry tests
from tests.live_servers import free_port

TOKENS = {role: f"test-token-{role.value}" for role in Role}
ACTORS = {role: f"{role.value}-bot" for role in Role}

# The verbatim frozen cold-start chunk from the method text (the released bank is Chinese).
CHINESE_CHUNK = {
    "title": "搜索查询构建 - 显式约束整合",
    "applies_when": "任务包含明确属性约束（品牌、颜色、尺寸、价格、功能等）时",
    "procedure": [
        "将所有核心属性约束整合为单一搜索查询词",
        "将价格约束、产品形态、核心成分等关键要素直接融入搜索词",
        "避免使用泛化搜索词或分步搜索",
    ],
    "verify": "验证搜索结果首屏是否出现匹配所有核心约束的商品",
    "avoid": "搜索词过于宽泛或遗漏关键约束导致结果不相关",
}


# What a gate run records about its rollouts (the registry stores it as given).
GATE_IDENTITY = {
    "model": "qwen-test",
    "decoding": "dec-5f1c",
    "prompt_version": "shop-tools-v2",
    "prompt_fingerprint": "fp-77aa",
    "env_version": "shopsim-v1:test",
    "action_protocol": "tools-v3",
}


def gate_protocol(n_tasks: int, **overrides: Any) -> dict[str, Any]:
    """The fields every gate run carries besides its pool: task count, identity, bare baseline."""
    return {
        "n_tasks": n_tasks,
        "identity": GATE_IDENTITY,
        "bare_baseline": {"source": "fresh", "plan_sha256": "ab" * 32},
        **overrides,
    }


def headers(role: Role | None, **extra: str) -> dict[str, str]:
    base = {} if role is None else {"Authorization": f"Bearer {TOKENS[role]}"}
    return {**base, **extra}


def chunk_content(tag: str = "a", **overrides: Any) -> dict[str, Any]:
    content = {
        "title": f"Check the price before buying ({tag})",
        "applies_when": "the task states a budget",
        "procedure": ["open the item page", "compare the price with the budget"],
        "verify": "the selected option's price is within budget",
        "avoid": "buying before every option axis is chosen",
    }
    return {**content, **overrides}


class Api:
    """Thin helpers over the test client: act as a role, assert a status, return JSON."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    def call(
        self,
        method: str,
        path: str,
        role: Role | None = Role.operator,
        expect: int | None = None,
        **kwargs: Any,
    ) -> Any:
        extra = kwargs.pop("headers", {})
        response = self.client.request(method, path, headers=headers(role, **extra), **kwargs)
        if expect is not None:
            assert response.status_code == expect, (response.status_code, response.text)
        return response

    def json(
        self, method: str, path: str, role: Role = Role.operator, expect: int = 200, **kwargs: Any
    ) -> Any:
        return self.call(method, path, role, expect, **kwargs).json()

    # Factories: each builds one object through the API as an operator.
    def chunk(self, slug: str, **content: Any) -> dict:
        return self.json(
            "POST",
            "/v1/chunks",
            json={"slug": slug, "content": chunk_content(slug, **content)},
            expect=201,
        )

    def bank(
        self, version_ids: list[int], *, rho: float = 0.5, freeze: bool = True, **fields: Any
    ) -> dict:
        entries = [
            {"chunk_version_id": vid, "rho": rho, "coefficient": 0.01 * (i + 1)}
            for i, vid in enumerate(version_ids)
        ]
        bank = self.json("POST", "/v1/banks", json={"entries": entries, **fields}, expect=201)
        if freeze:
            self.json("POST", f"/v1/banks/{bank['id']}/freeze")
        return bank

    def checkpoint(self, checkpoint_id: str = "ckpt-r0", step: int = 20, round: int = 0) -> dict:
        body = {
            "id": checkpoint_id,
            "uri": f"file:///runs/{checkpoint_id}",
            "step": step,
            "round": round,
        }
        return self.json("POST", "/v1/checkpoints", json=body, expect=201)


@contextmanager
def serve(asgi_app, port: int | None = None) -> Iterator[str]:
    """Serve an ASGI app over real HTTP on loopback (uvicorn in a thread); yields its base URL."""
    port = port or free_port()
    config = uvicorn.Config(
        asgi_app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
