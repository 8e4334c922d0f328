"""Runs that trained to byte-identical weights are tested under one checkpoint id, so the
evaluator rolls them out once; any difference in the weight files keeps them apart."""

from __future__ import annotations

from pathlib import Path

from shared.apps.experiment.run import _local_weights_digest, same_weights_checkpoints
from shared.contracts.hashing import weights_digest


def checkpoint(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    (folder / "config.json").write_text("{}")  # not weights: never part of the digest
    return folder


def test_the_digest_covers_every_weight_file_by_name_and_bytes(tmp_path):
    a = checkpoint(tmp_path / "a", {"model.safetensors": b"w1", "tied-lm-head.safetensors": b"h"})
    same = checkpoint(
        tmp_path / "same", {"tied-lm-head.safetensors": b"h", "model.safetensors": b"w1"}
    )
    (same / "config.json").write_text('{"other": true}')
    assert weights_digest(a) == weights_digest(same)
    byte = checkpoint(
        tmp_path / "byte", {"model.safetensors": b"w2", "tied-lm-head.safetensors": b"h"}
    )
    head = checkpoint(tmp_path / "head", {"model.safetensors": b"w1"})
    renamed = checkpoint(tmp_path / "renamed", {"model.safetensors": b"w1", "x.safetensors": b"h"})
    digests = {weights_digest(p) for p in (a, byte, head, renamed)}
    assert len(digests) == 4
    assert weights_digest(checkpoint(tmp_path / "empty", {})) is None


def test_runs_with_one_digest_share_the_first_runs_checkpoint_id(tmp_path):
    folders = {
        "intraskill": checkpoint(tmp_path / "i", {"model.safetensors": b"w"}),
        "grpo": checkpoint(tmp_path / "g", {"model.safetensors": b"other"}),
        "fixed-s0": checkpoint(tmp_path / "f", {"model.safetensors": b"w"}),
    }
    finals = {
        name: {"checkpoint_id": f"{name}-r1", "weights": _local_weights_digest(f"file://{path}")}
        for name, path in folders.items()
    }
    finals["remote"] = {"checkpoint_id": "remote-r1", "weights": _local_weights_digest("s3://b/k")}
    finals["gone"] = {
        "checkpoint_id": "gone-r1",
        "weights": _local_weights_digest(f"file://{tmp_path / 'missing'}"),
    }
    assert same_weights_checkpoints(finals) == {
        "intraskill": "intraskill-r1",
        "grpo": "grpo-r1",
        "fixed-s0": "intraskill-r1",
        "remote": "remote-r1",  # weights not on this machine: tested as itself
        "gone": "gone-r1",
    }
