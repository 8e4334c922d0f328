"""Fixtures for the agent runtime tests: the tiny random model, its renderer, the scripted shop."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny_dir(model_cache):
    from shared.runtime.agent.models import build_tiny_model

    return build_tiny_model(model_cache, seed=0)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_dir, local_files_only=True)


@pytest.fixture(scope="session")
def renderer(tiny_tokenizer):
    from shared.runtime.agent.chat import ChatRenderer

    return ChatRenderer(tiny_tokenizer)


@pytest.fixture(scope="session", autouse=True)
def _few_threads():
    try:
        import torch
    except ImportError:  # pure tests still run
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add contention
    yield
    torch.set_num_threads(previous)
