"""The llm analyst once against a real model: vLLM (CPU build, in `.venv-vllm`) serving
SmolLM2-135M-Instruct with tool calls. A 135M model may well fail to produce a valid card;
the analysis must then end in NO_PROPOSAL, never in a crash. Slow; skipped without the
vLLM environment."""

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from services.analyst.llm_backend import LLMAnalyst
from services.analyst.rules_backend import AnalysisInput
from shared.contracts.registry_api.schemas import CardCreate, CardOutcome
from tests.analyst.support import failed_traces, small_env

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not VLLM_PYTHON.exists(), reason="needs the vLLM environment .venv-vllm")
def test_smollm2_on_vllm_cpu_analyses_without_crashing(tmp_path):
    log = tmp_path / "vllm.log"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "shared.apps.cli", "agent", "serve", "smollm2", "--python",
         str(VLLM_PYTHON), "--port", "0", "--dtype", "float32", "--max-model-len", "8192",
         # on the CPU build this is the share of host memory vLLM reserves
         "--gpu-memory-utilization", "0.1", "--log-file", str(log),
         # eager mode: graph compilation alone outlasted the start-up deadline on a shared CPU
         "--vllm-arg=--enforce-eager"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        base_url = None
        deadline = time.monotonic() + 900
        while base_url is None and time.monotonic() < deadline:
            line = launcher.stdout.readline()
            if not line and launcher.poll() is not None:
                pytest.fail(f"vLLM did not start:\n{log.read_text()[-3000:]}")
            if line.startswith("base_url:"):
                base_url = line.split(":", 1)[1].strip()
        assert base_url, "vLLM did not report its URL in time"
        env = small_env()
        failure = failed_traces(env, n=5)[0]
        models = httpx.get(f"{base_url}/models", timeout=30).json()["data"]
        analyst = LLMAnalyst(base_url, models[0]["id"], max_rounds=6, repairs=1, timeout_s=600)
        card = analyst.analyze(AnalysisInput(env=env, trajectory=failure, bank=[], round=0))
        assert isinstance(card, CardCreate)
        if card.outcome != CardOutcome.NO_PROPOSAL:
            checked = card.extras["verification"]
            assert checked["with"] >= 1 and checked["with"] > checked["without"]
        (tmp_path / "card.json").write_text(card.model_dump_json(indent=1))
        print(card.outcome, card.forced_no_proposal_reason)
    finally:
        launcher.terminate()
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            launcher.kill()
