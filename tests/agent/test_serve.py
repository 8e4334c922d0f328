"""`intraskill agent serve`'s argument list and start-up, without vLLM (the real server is in
test_vllm_server.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shared.runtime.agent.serve import ServeOptions, ServerStartError, server_args, start_server


def flag(args: list[str], name: str) -> list[str]:
    """The values after `name`, up to the next flag."""
    start = args.index(name) + 1
    end = next((i for i in range(start, len(args)) if args[i].startswith("--")), len(args))
    return args[start:end]


def test_every_flag_the_runtime_relies_on_is_passed() -> None:
    args = server_args(
        ServeOptions(
            model="/m", served_model_name="policy", checkpoint_id="abc", dtype="float32", seed=7
        )
    )
    # The list: processed log-probs, prompt token details, tool parser, dtype, seed, name.
    assert flag(args, "--logprobs-mode") == ["processed_logprobs"]
    assert "--enable-prompt-tokens-details" in args
    assert "--enable-auto-tool-choice" in args and flag(args, "--tool-call-parser") == ["hermes"]
    assert flag(args, "--dtype") == ["float32"] and flag(args, "--seed") == ["7"]
    assert flag(args, "--served-model-name") == ["policy", "checkpoint:abc"]
    assert flag(args, "--generation-config") == ["vllm"]  # no model-side sampling defaults


def test_text_only_servers_and_unpublished_weights() -> None:
    args = server_args(ServeOptions(model="/m", served_model_name="p", tool_call_parser=None))
    assert "--enable-auto-tool-choice" not in args and "--tool-call-parser" not in args
    assert flag(args, "--served-model-name") == ["p"]


def test_a_server_that_dies_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "python"  # a test double for vLLM's interpreter: says why and exits
    fake.write_text("#!/bin/sh\necho 'no vllm here' >&2\nexit 3\n")
    fake.chmod(0o755)
    log = tmp_path / "server.log"
    with pytest.raises(ServerStartError, match="exited with code 3") as failure:
        start_server(
            ServeOptions(model="/m", served_model_name="p", port=1),
            python=str(fake),
            log=log,
            timeout_s=30,
        )
    assert "no vllm here" in str(failure.value)


def test_cli_serve_fails_cleanly_without_vllm(tmp_path: Path) -> None:
    import subprocess

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    result = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "agent", "serve", str(model), "--python", str(fake),
         "--port", "0", "--timeout", "30"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1 and "vLLM exited with code 1" in result.stderr
    assert "Traceback" not in result.stderr
    assert "clients must pass --checkpoint-id" in result.stderr  # no identity file: none published
    assert "base_url" not in result.stdout
