"""The evaluator and the analyst with a metrics port of their own (EVALUATOR_METRICS_PORT,
ANALYST_METRICS_PORT, as deploy/ sets them), as Prometheus and the operators meet them: the
real `serve` processes on loopback. `/metrics` answers on the metrics port and not on the API
port, which the operators' namespace reaches (a NetworkPolicy admits ports, not paths), and it
still counts the API port's requests."""

from __future__ import annotations

import httpx
import pytest

from tests.live_servers import free_port
from tests.service_servers import analyst_serving, evaluator_serving

SERVING = {"evaluator": evaluator_serving, "analyst": analyst_serving}


@pytest.mark.parametrize("service", sorted(SERVING))
def test_metrics_answer_on_their_own_port_and_not_on_the_api_port(
    service, registry_url, tmp_path
) -> None:
    port = free_port()
    extra = {f"{service.upper()}_METRICS_PORT": str(port)}
    with SERVING[service](registry_url, tmp_path, extra) as url:
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        assert httpx.get(f"{url}/metrics", timeout=30).status_code == 404
        assert not url.endswith(f":{port}")
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    assert f'route="/healthz",service="{service}",status="200"' in text
