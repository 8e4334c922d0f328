"""The clipped surrogate: the reference's worked cases, and its rules on cases nobody wrote down.

Rules come from the method and the issue's contract: loss only on generated tokens, ratio clipped
to [1 - clip_low, 1 + clip_high], a clipped token has no gradient and counts in clip_fraction,
sample_mean = mean over samples of token means, token_mean = mean over all generated tokens.
The independent reference below is plain Python with finite-difference gradients.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from services.trainer.loss import (
    aggregate,
    check_case,
    check_cases,
    clipped_surrogate_loss,
    importance_sampling_weights,
    pad,
)

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "trainer" / "grpo-loss-cases"
REPO = Path(__file__).resolve().parents[2]


def reference_loss(case: dict) -> tuple[float, float]:
    """Plain-Python loss and clip fraction, written from the contract, not from loss.py."""
    low, high = 1 - case["clip_low"], 1 + case["clip_high"]
    per_sample, per_sample_clip, tokens, token_loss, token_clip = [], [], 0, 0.0, 0.0
    for sample in case["samples"]:
        a = sample["advantage"]
        losses, clips = [], []
        for lp, old, m in zip(
            sample["logprobs"], sample["old_logprobs"], sample["loss_mask"], strict=True
        ):
            if not m:
                continue
            r = math.exp(lp - old)
            unclipped, clipped = -a * r, -a * min(max(r, low), high)
            losses.append(max(unclipped, clipped))
            clips.append(1.0 if clipped > unclipped else 0.0)
        per_sample.append(sum(losses) / len(losses) if losses else 0.0)
        per_sample_clip.append(sum(clips) / len(clips) if clips else 0.0)
        tokens += len(losses)
        token_loss += sum(losses)
        token_clip += sum(clips)
    if case["aggregation"] == "sample_mean":
        n = len(case["samples"])
        return sum(per_sample) / n, sum(per_sample_clip) / n
    return token_loss / max(tokens, 1), token_clip / max(tokens, 1)


def random_case(rng: random.Random, aggregation: str) -> dict:
    samples = []
    for _ in range(rng.randint(1, 5)):
        n = rng.randint(1, 12)
        logprobs = [rng.uniform(-4, -0.1) for _ in range(n)]
        # ratios from 0.5 to 1.6 so every case mixes clipped and unclipped tokens
        old = [lp - math.log(rng.uniform(0.5, 1.6)) for lp in logprobs]
        mask = [rng.randint(0, 1) for _ in range(n)]
        samples.append(
            {
                "logprobs": logprobs,
                "old_logprobs": old,
                "loss_mask": mask,
                "advantage": rng.uniform(-2, 2),
            }
        )
    return {
        "clip_low": 0.2,
        "clip_high": rng.choice([0.2, 0.28, 0.35]),
        "aggregation": aggregation,
        "samples": samples,
    }


def test_reference_cases_match_to_1e12():
    cases = json.loads((CASES / "cases.json").read_text())["cases"]
    assert len(cases) == 8
    for case in cases:
        result, expected = check_case(case), case["expected"]
        assert result["loss"] == pytest.approx(expected["loss"], abs=1e-12), case["name"]
        assert result["clip_fraction"] == pytest.approx(expected["clip_fraction"], abs=1e-12)
        for got, want in zip(result["grad_logprobs"], expected["grad_logprobs"], strict=True):
            assert got == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("aggregation", ["sample_mean", "token_mean"])
def test_random_cases_match_an_independent_reference_and_finite_differences(aggregation):
    rng = random.Random(7)
    for _ in range(40):
        case = random_case(rng, aggregation)
        result = check_case(case)
        loss, fraction = reference_loss(case)
        assert result["loss"] == pytest.approx(loss, abs=1e-12)
        assert result["clip_fraction"] == pytest.approx(fraction, abs=1e-12)
        sample = rng.randrange(len(case["samples"]))
        token = rng.randrange(len(case["samples"][sample]["logprobs"]))
        h = 1e-6
        shifted = json.loads(json.dumps(case))
        shifted["samples"][sample]["logprobs"][token] += h
        numeric = (reference_loss(shifted)[0] - loss) / h
        # a kink (ratio exactly at a bound) is measure-zero; a one-sided difference is enough
        assert result["grad_logprobs"][sample][token] == pytest.approx(numeric, abs=1e-4)


def test_masked_and_clipped_tokens_carry_no_gradient_and_clipped_ones_count():
    case = {
        "clip_low": 0.2,
        "clip_high": 0.28,
        "aggregation": "token_mean",
        "samples": [
            {
                "logprobs": [math.log(1.5), math.log(1.1), 0.0],
                "old_logprobs": [0.0, 0.0, 5.0],
                "loss_mask": [1, 1, 0],
                "advantage": 1.0,
            },
            {
                "logprobs": [math.log(0.5)],
                "old_logprobs": [0.0],
                "loss_mask": [1],
                "advantage": -1.0,
            },
        ],
    }
    result = check_case(case)
    grads = result["grad_logprobs"]
    assert grads[0][0] == 0.0  # ratio 1.5 > 1.28 with A > 0: clipped
    assert grads[0][1] == pytest.approx(-1.1 / 3)  # inside the range: -A * r / tokens
    assert grads[0][2] == 0.0  # a prompt token
    assert grads[1][0] == 0.0  # ratio 0.5 < 0.8 with A < 0: clipped
    assert result["clip_fraction"] == pytest.approx(2 / 3)
    assert result["loss"] == pytest.approx((-1.28 - 1.1 + 0.8) / 3)


def test_sample_mean_weights_samples_equally_and_token_mean_weights_tokens():
    def case(aggregation):
        return {
            "clip_low": 0.2,
            "clip_high": 0.2,
            "aggregation": aggregation,
            "samples": [
                {"logprobs": [0.0], "old_logprobs": [0.0], "loss_mask": [1], "advantage": 1.0},
                {
                    "logprobs": [0.0] * 3,
                    "old_logprobs": [0.0] * 3,
                    "loss_mask": [1] * 3,
                    "advantage": -1.0,
                },
                {"logprobs": [0.0], "old_logprobs": [0.0], "loss_mask": [0], "advantage": 5.0},
            ],
        }

    # at ratio 1 the loss is -A per token
    assert check_case(case("sample_mean"))["loss"] == pytest.approx((-1 + 1 + 0) / 3)
    assert check_case(case("token_mean"))["loss"] == pytest.approx((-1 + 3) / 4)
    # token_mean over a batch with one generated token: that token's loss, -A with A = -1
    single = case("token_mean")
    single["samples"] = single["samples"][1:]
    single["samples"][0]["loss_mask"] = [0, 0, 1]
    assert check_case(single)["loss"] == pytest.approx(1.0)


def test_micro_batches_with_global_totals_sum_to_the_whole_batch():
    rng = random.Random(3)
    case = random_case(rng, "sample_mean")
    case["samples"] += random_case(rng, "sample_mean")["samples"]
    for aggregation in ("sample_mean", "token_mean"):
        tensors = [
            pad([s[key] for s in case["samples"]])
            for key in ("logprobs", "old_logprobs", "loss_mask")
        ]
        advantages = torch.tensor([s["advantage"] for s in case["samples"]], dtype=torch.float64)
        options = {"clip_low": 0.2, "clip_high": 0.28, "aggregation": aggregation}
        whole = clipped_surrogate_loss(*tensors[:2], advantages, tensors[2], **options)
        totals = {"total_samples": len(advantages), "total_tokens": int(tensors[2].sum())}
        half = len(advantages) // 2
        parts = [
            clipped_surrogate_loss(
                tensors[0][part],
                tensors[1][part],
                advantages[part],
                tensors[2][part],
                **options,
                **totals,
            )
            for part in (slice(0, half), slice(half, None))
        ]
        assert whole.clip_fraction > 0  # the case clips some tokens: the sum below means something
        assert float(sum(p.loss for p in parts)) == pytest.approx(float(whole.loss), abs=1e-12)
        fraction = sum(p.clip_fraction for p in parts)  # aggregated like the loss
        assert float(fraction) == pytest.approx(float(whole.clip_fraction), abs=1e-12)


def test_cli_loss_check_prints_the_contract(tmp_path):
    case = json.loads((CASES / "cases.json").read_text())["cases"][1]
    path = tmp_path / "case.json"
    path.write_text(
        json.dumps({k: case[k] for k in ("clip_low", "clip_high", "aggregation", "samples")})
    )
    done = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "train", "loss-check", str(path), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    assert set(result) == {"loss", "clip_fraction", "grad_logprobs"}
    assert result["loss"] == pytest.approx(case["expected"]["loss"], abs=1e-12)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda case: [case.pop(k) for k in ("clip_high", "samples")],
            "the case lacks clip_high, samples "
            "(it needs clip_low, clip_high, aggregation, samples)",
        ),
        (
            lambda case: case.update(aggregation="seq_mean"),
            "aggregation must be one of ('sample_mean', 'token_mean'), not 'seq_mean'",
        ),
        (
            lambda case: [case["samples"][1].pop(k) for k in ("advantage", "loss_mask")],
            "sample 1 lacks loss_mask, advantage",
        ),
        (
            lambda case: case["samples"][1]["old_logprobs"].append(0.0),
            "sample 1: logprobs, old_logprobs and loss_mask differ in length",
        ),
        (
            lambda case: case["samples"][0]["loss_mask"].__setitem__(0, 2),
            "sample 0: loss_mask must be 0/1",
        ),
    ],
)
def test_a_malformed_case_is_refused_with_what_is_wrong(change, message):
    case = json.loads((CASES / "cases.json").read_text())["cases"][1]
    case = {k: case[k] for k in ("clip_low", "clip_high", "aggregation", "samples")}
    change(case)
    with pytest.raises(ValueError) as refused:
        check_case(case)
    assert message in str(refused.value)


def test_the_cli_refuses_a_malformed_case_with_exit_1_and_the_reason(tmp_path):
    path = tmp_path / "case.json"
    path.write_text(json.dumps({"clip_low": 0.2, "aggregation": "token_mean", "samples": []}))
    done = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "train", "loss-check", str(path), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "the case lacks clip_high (it needs clip_low, clip_high, aggregation, samples)" in (
        done.stderr
    )


def test_the_trainer_refuses_an_unknown_aggregation_by_name():
    values = torch.zeros(1, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"one of \('sample_mean', 'token_mean'\), not 'mean'"):
        aggregate(values, torch.ones_like(values), "mean")


def reference_weights(old, sampling, mask, mode, clip_min, clip_max) -> list[float]:
    """TRL's importance weights in plain Python, from its documented modes."""
    low = clip_min if clip_min is not None else -math.inf
    high = clip_max if clip_max is not None else math.inf
    if mode.startswith("sequence"):
        total = sum(o - s for o, s, m in zip(old, sampling, mask, strict=True) if m)
        ratios = [math.exp(total)] * len(old)
    else:
        ratios = [math.exp(o - s) for o, s in zip(old, sampling, strict=True)]
    out = []
    for ratio, m in zip(ratios, mask, strict=True):
        if not m:
            out.append(1.0)
        elif mode.endswith("truncate"):
            out.append(min(max(ratio, low), high))
        else:
            out.append(ratio if low <= ratio <= high else 0.0)
    return out


@pytest.mark.parametrize(
    "mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]
)
@pytest.mark.parametrize("bounds", [(None, 3.0), (0.5, 2.0), (None, None)])
def test_importance_weights_follow_trls_modes(mode, bounds):
    rng = random.Random(7)
    for _ in range(20):
        n = rng.randint(1, 8)
        old = [rng.uniform(-4, -0.1) for _ in range(n)]
        sampling = [o + rng.uniform(-1.5, 1.5) for o in old]
        mask = [rng.randint(0, 1) for _ in range(n)]
        got = importance_sampling_weights(
            torch.tensor([old], dtype=torch.float64),
            torch.tensor([sampling], dtype=torch.float64),
            torch.tensor([mask]),
            mode=mode,
            clip_min=bounds[0],
            clip_max=bounds[1],
        )
        want = reference_weights(old, sampling, mask, mode, *bounds)
        assert got[0].tolist() == pytest.approx(want, rel=1e-12)


def test_importance_weights_scale_each_tokens_loss_and_gradient_not_the_clip_fraction():
    case = random_case(random.Random(3), "token_mean")
    logprobs = pad([s["logprobs"] for s in case["samples"]]).requires_grad_(True)
    mask = pad([s["loss_mask"] for s in case["samples"]])
    weights = 0.25 + 2 * torch.rand(logprobs.shape, dtype=torch.float64)
    arguments = dict(
        old_logprobs=pad([s["old_logprobs"] for s in case["samples"]]),
        advantages=torch.tensor([s["advantage"] for s in case["samples"]], dtype=torch.float64),
        loss_mask=mask,
        clip_low=case["clip_low"],
        clip_high=case["clip_high"],
        aggregation="token_mean",
    )
    weighted = clipped_surrogate_loss(logprobs, importance_weights=weights, **arguments)
    weighted.loss.backward()
    weighted_grad = logprobs.grad.clone()
    logprobs.grad = None
    plain = clipped_surrogate_loss(logprobs, **arguments)
    plain.loss.backward()
    assert torch.allclose(weighted_grad, logprobs.grad * weights, atol=1e-12)
    assert float(weighted.clip_fraction) == float(plain.clip_fraction)
    per_token = []  # the loss is the weighted mean of the same per-token terms
    for index, sample in enumerate(case["samples"]):
        single = {**case, "samples": [sample]}
        for t, m in enumerate(sample["loss_mask"]):
            if m:
                only = [1 if u == t else 0 for u in range(len(sample["loss_mask"]))]
                token_case = {**single, "samples": [{**sample, "loss_mask": only}]}
                per_token.append(reference_loss(token_case)[0] * float(weights[index, t]))
    expected = sum(per_token) / len(per_token)
    assert float(weighted.loss.detach()) == pytest.approx(expected, rel=1e-10)


def test_loss_check_reads_the_shared_cases_file_one_result_per_case():
    document = json.loads((CASES / "cases.json").read_text())
    results = check_cases(document)
    assert [r["name"] for r in results] == [c["name"] for c in document["cases"]]
    for case, result in zip(document["cases"], results, strict=True):
        expected = case["expected"]
        assert result["loss"] == pytest.approx(expected["loss"], abs=1e-9), case["name"]
        assert result["clip_fraction"] == pytest.approx(expected["clip_fraction"], abs=1e-9)
        for got, want in zip(result["grad_logprobs"], expected["grad_logprobs"], strict=True):
            assert got == pytest.approx(want, abs=1e-9), case["name"]


def test_loss_check_names_the_malformed_case_of_a_cases_file():
    document = json.loads((CASES / "cases.json").read_text())
    document["cases"][2].pop("clip_low")
    with pytest.raises(ValueError, match=rf"case 2 \({document['cases'][2]['name']}\): the case "):
        check_cases(document)
    with pytest.raises(ValueError, match="must be a list"):
        check_cases({"cases": {"a": 1}})


def test_the_cli_prints_one_json_line_per_case_of_the_cases_file():
    document = json.loads((CASES / "cases.json").read_text())
    path = CASES / "cases.json"
    done = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "train", "loss-check", str(path), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["name"] for line in lines] == [case["name"] for case in document["cases"]]
    for case, line in zip(document["cases"], lines, strict=True):
        assert line["loss"] == pytest.approx(case["expected"]["loss"], abs=1e-9)
