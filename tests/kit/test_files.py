"""Whole-file writes: the reader sees the old file or the new one, and the new one reached the
disk (fsync) before it replaced the old."""

from __future__ import annotations

import json
import os

import pytest

from shared.kit import files
from shared.kit.files import write_atomic, write_json_atomic


def test_the_new_text_replaces_the_old_and_no_temporary_is_left(tmp_path):
    path = tmp_path / "state.json"
    write_json_atomic(path, {"a": 1})
    write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_value_that_cannot_be_written_leaves_the_old_file(tmp_path):
    path = tmp_path / "state.json"
    write_json_atomic(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}


def test_the_text_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    real_replace = type(tmp_path).replace
    monkeypatch.setattr(
        type(tmp_path), "replace", lambda self, target: (events.append("rename"),
                                                           real_replace(self, target))[1]
    )  # fmt: skip
    write_atomic(tmp_path / "metrics.jsonl", "line\n")
    assert events == ["fsync", "rename"]
    assert (tmp_path / "metrics.jsonl").read_text() == "line\n"
