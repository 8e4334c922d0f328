"""`intraskill agent ...` end to end with the tiny model on the ShopSim test preset."""

from __future__ import annotations

import json

import pytest

from shared.apps.cli import main
from shared.contracts.chunks import ChunkContent, InjectedChunk

pytest.importorskip("torch")


def test_prepare_and_rollout(tmp_path, capsys, model_cache) -> None:
    assert main(["agent", "prepare-model", "tiny", "--cache-dir", str(model_cache)]) == 0
    prepared = json.loads(capsys.readouterr().out)
    assert prepared["model_id"] == "intraskill/tiny-chatml-seed0"

    chunk = InjectedChunk(
        chunk_id="c1",
        version=1,
        content=ChunkContent(title="t", applies_when="w", procedure=["p"], verify="v", avoid="a"),
    )
    bank = tmp_path / "bank.json"
    bank.write_text(
        json.dumps(
            {
                "bank_id": "b1",
                "bank_hash": "h1",
                "chunks": [
                    chunk.model_dump(),
                    chunk.model_copy(update={"chunk_id": "c2"}).model_dump(),
                ],
            }
        )
    )
    out = tmp_path / "runs" / "episodes.jsonl"
    code = main(
        [
            "agent",
            "rollout",
            "--out",
            str(out),
            "--env-preset",
            "test",
            "--tasks",
            "2",
            "--seeds",
            "0,1",
            "--model",
            "tiny",
            "--cache-dir",
            str(model_cache),
            "--max-new-tokens",
            "4",
            "--threads",
            "1",
            "--bank",
            str(bank),
            "--inclusion",
            "0,1",
            "--max-turns",
            "2",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] == 4 and summary["scored"] == 4
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4
    assert {record["provenance"]["seed"] for record in records} == {0, 1}
    assert all(record["provenance"]["inclusion"] == [0, 1] for record in records)
    assert all(record["provenance"]["injected"] == ["c2@1"] for record in records)
    assert all(record["provenance"]["bank_id"] == "b1" for record in records)


def test_bad_arguments_exit_2(tmp_path, capsys) -> None:
    assert main(["agent", "prepare-model", "gpt5"]) == 2
    assert (
        main(
            [
                "agent",
                "rollout",
                "--out",
                str(tmp_path / "x.jsonl"),
                "--model",
                str(tmp_path / "none"),
                "--env-preset",
                "test",
                "--tasks",
                "1",
            ]
        )
        == 2
    )
    assert main(["agent", "rollout", "--out", str(tmp_path / "x.jsonl"), "--inclusion", "1"]) == 2
    assert main(["agent", "rollout", "--no-such-option"]) == 2
