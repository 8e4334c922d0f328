"""Load a checkpoint into a running vLLM OpenAI server, and read which weights it serves.

vLLM 0.32's own endpoints (server started with `VLLM_SERVER_DEV_MODE=1`; the trainer's
`services/trainer/weight_sync.py` uses the same sequence for its rollout servers):
`POST /pause?mode=wait` (in-flight requests end; the prefix cache, computed by the old weights,
is cleared), `POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": F}}`
(every worker reloads in place from the HF folder F, which the server must see at that path),
`POST /update_weight_version {"new_version": V}`, `POST /resume`; `GET /weight_info` answers
`{"weight_version": V}`.

The evaluator loads each gate's frozen checkpoint into its gate server this way and refuses to
roll out unless the server then reports exactly that checkpoint id.

Servers started with `--api-key` (deploy/: from the `vllm-api-key` Secret) check it only on
paths under `/v1` (vLLM 0.32's `AuthenticationMiddleware` guards `/v1`, `/v2`, `/inference`,
`/cohere`): the endpoints above answer anyone who reaches the port, which is why the
NetworkPolicy admits only the trainer and the evaluator. Clients send the key on every call
anyway (`server_client`), so nothing changes for them if vLLM widens its guard.
"""

from __future__ import annotations

import httpx


class WeightLoadError(RuntimeError):
    """The server did not load the weights, or serves other weights than the ones asked for."""


def server_client(api_key: str | None, timeout: httpx.Timeout | float) -> httpx.Client:
    """An HTTP client for a vLLM server that sends its API key as `Authorization: Bearer`."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(headers=headers, timeout=timeout)


def server_root(base_url: str) -> str:
    """The control root of an OpenAI base URL (`http://host:8000/v1` -> `http://host:8000`)."""
    return base_url.rstrip("/").removesuffix("/v1")


def served_version(client: httpx.Client, root: str) -> str | None:
    """The weight version the server reports (None when it reports none)."""
    reply = client.get(f"{root}/weight_info")
    _raise_for(reply, "GET /weight_info")
    return reply.json().get("weight_version")


def load_weights(client: httpx.Client, root: str, folder: str, version: str) -> None:
    """Make the server at `root` serve the HF weights in `folder` under `version`, then check
    that it says so; WeightLoadError otherwise."""
    _post(client, f"{root}/pause", "POST /pause", params={"mode": "wait"})
    try:
        _post(
            client,
            f"{root}/collective_rpc",
            "reload_weights",
            json={"method": "reload_weights", "kwargs": {"weights_path": folder}},
        )
        _post(client, f"{root}/update_weight_version", "update_weight_version",
              json={"new_version": version})  # fmt: skip
    finally:
        _post(client, f"{root}/resume", "POST /resume")
    require_version(client, root, version)


def require_version(client: httpx.Client, root: str, version: str) -> None:
    """WeightLoadError unless the server at `root` reports serving `version`."""
    served = served_version(client, root)
    if served != version:
        raise WeightLoadError(
            f"{root} serves weights {served!r}, not {version!r}: a server that restarted or "
            "was reloaded by someone else; refusing to use it"
        )


def _post(client: httpx.Client, url: str, what: str, **kwargs) -> None:
    _raise_for(client.post(url, **kwargs), what)


def _raise_for(reply: httpx.Response, what: str) -> None:
    if reply.status_code >= 400:
        raise WeightLoadError(f"{what} -> {reply.status_code}: {reply.text[:300]}")
