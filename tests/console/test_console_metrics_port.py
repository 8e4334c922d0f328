"""The console with a metrics port of its own (CONSOLE_METRICS_PORT, as deploy/ sets it):
`/metrics` answers there and not beside the pages, so the operators' ingress, admitted to the
pages' port, cannot read it (a NetworkPolicy admits ports, not paths)."""

from __future__ import annotations

import httpx
from fastapi.testclient import TestClient

from services.console.app import create_app
from services.console.settings import ConsoleSettings
from shared.kit.loopback import free_port


def test_metrics_answer_on_their_own_port_and_not_on_the_pages_port() -> None:
    port = free_port()
    app = create_app(ConsoleSettings(metrics_port=port, registry_url="http://127.0.0.1:9"))
    with TestClient(app) as pages:  # the lifespan opens the metrics port
        assert pages.get("/healthz").status_code == 200
        assert pages.get("/metrics").status_code == 404
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert 'route="/healthz",service="console",status="200"' in text
    assert "console_sessions " in text
    # closed with the app
    try:
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
        closed = False
    except httpx.TransportError:
        closed = True
    assert closed
