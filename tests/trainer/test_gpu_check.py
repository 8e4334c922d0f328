"""The device check (deploy/gpu-check.sh, `make gpu-wheels`) as far as a CPU can check it.

Specification (issue 32): without CUDA the script exits 2 with one sentence and runs nothing;
the wheels it installs are pinned and exclude what must not travel (wordfreq's 57 MB, Postgres,
vLLM); neither the script nor its Python module imports from tests/; the measurement module's
update, generation, run figures and merge produce the JSON the lease reads (here on the CPU with
a small config of the same architecture).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.trainer.run_support import REPO

torch = pytest.importorskip("torch")
SCRIPT = REPO / "deploy" / "gpu-check.sh"
SMALL = REPO / "tests" / "fixtures" / "trainer" / "qwen3.5-small" / "config.json"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine runs the check itself")
def test_without_cuda_it_exits_2_with_one_sentence_and_runs_nothing(tmp_path):
    env = {**ENV, "PYTHON": sys.executable, "GPU_CHECK_WORK": str(tmp_path / "work")}
    done = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "out.json")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0]
    assert not (tmp_path / "work").exists() and not (tmp_path / "out.json").exists()


def test_the_wheels_are_pinned_and_leave_out_what_must_not_travel():
    lines = [
        line.strip()
        for line in (REPO / "deploy" / "gpu-wheels.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert all(re.fullmatch(r"[a-z0-9-]+==[0-9][0-9a-z.]*", line) for line in lines), lines
    names = {line.split("==")[0] for line in lines}
    assert {"trl", "datasets", "fastapi", "pydantic", "sqlmodel", "sqlalchemy"} <= names
    assert not names & {"wordfreq", "psycopg", "psycopg-binary", "vllm", "torch", "transformers"}


def test_neither_the_script_nor_its_module_imports_tests():
    for path in (SCRIPT, REPO / "services" / "trainer" / "gpu_check.py"):
        text = path.read_text()
        assert not re.search(r"(from|import)\s+tests\b|-m tests\.|tests/", text), path


def test_the_measurements_write_the_json_on_a_small_model(tmp_path):
    def check(*argv: str) -> dict:
        out = tmp_path / f"{argv[0]}.json"
        subprocess.run(
            [sys.executable, "-m", "services.trainer.gpu_check", *argv, "--out", str(out)],
            env=ENV, cwd=REPO, check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        return json.loads(out.read_text())

    small = ["--model-config", str(SMALL), "--device", "cpu"]
    update = check("update", *small, "--micro-batch-tokens", "64", "256", "--row-tokens", "64")
    assert [b["micro_batch_tokens"] for b in update["budgets"]] == [64, 256]
    for budget in update["budgets"]:
        assert "error" not in budget, budget
        assert budget["tokens"] == 8 * 64 and budget["tokens_per_s"] > 0 and budget["mfu"] > 0
    assert update["mixed_precision"] == "bf16"  # the paper preset: bf16 over fp32 masters
    generate = check(
        "generate", *small, "--batch", "2", "--prompt-tokens", "8", "--new-tokens", "4"
    )
    assert generate["generated_tokens"] == 2 * 4  # fixed lengths: no early end
    merged = check("merge", str(tmp_path / "update.json"), str(tmp_path / "missing.json"))
    assert merged["update"] == update and "error" in merged["missing"]
    assert merged["environment"]["versions"]["torch"]
