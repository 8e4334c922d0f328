"""vllm-eval as a FAKE vLLM server (TEST DOUBLE: `shared/runtime/doubles/fake_vllm_server.py`,
the weight endpoints, no model), started on the Service's loopback port with the API key the
rendered Deployment reads from its Secret, so every call the evaluator makes is checked for it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import httpx

from shared.apps.deploy.manifests import REPO, Objects
from shared.apps.deploy.smoke.pods import SmokeFailure

MODULE = "shared.runtime.doubles.fake_vllm_server"
LABEL = "TestDouble/vllm-eval"
START_S = 900  # its imports take minutes on a loaded machine


def vllm_eval_key(objects: Objects) -> str:
    """The API key the rendered vllm-eval container starts with (its VLLM_API_KEY)."""
    (server,) = [
        container
        for doc in objects.docs
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "vllm-eval"
        for container in doc["spec"]["template"]["spec"]["containers"]
    ]
    key = objects.env(server).get("VLLM_API_KEY", "")
    if not key:
        raise SmokeFailure("Deployment/vllm-eval", "starts without an API key (VLLM_API_KEY)")
    return key


def start_fake_vllm(port: int, key: str, log: Path) -> subprocess.Popen:
    """The double on `port`, ready on /health; fails naming it when it does not start."""
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", MODULE, "--port", str(port), "--served-model", "policy"]
    with log.open("w") as out:
        process = subprocess.Popen(
            [*argv, "--api-key", key], cwd=REPO, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return process
        time.sleep(0.5)
    process.kill()
    raise SmokeFailure(LABEL, "the fake vLLM server did not start", log)


def check_served(port: int, checkpoint_id: str) -> None:
    """The double serves the round's checkpoint and every call to it carried the key."""
    served = httpx.get(f"http://127.0.0.1:{port}/fake/state", timeout=10).json()
    if served["version"] != checkpoint_id:
        raise SmokeFailure("Deployment/evaluator", f"vllm-eval serves {served['version']}")
    if served["unkeyed"]:
        raise SmokeFailure(
            "Deployment/evaluator", f"called vllm-eval without its API key: {served['unkeyed']}"
        )
