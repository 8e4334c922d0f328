"""Project-wide test setup: hardware and speed markers that skip cleanly."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow")


def _has_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reasons = {
        "gpu": None if _has_cuda() else "needs a CUDA device",
        "vllm": None if importlib.util.find_spec("vllm") else "needs vllm (see README: vllm venv)",
        "slow": None if config.getoption("--run-slow") else "slow; pass --run-slow",
    }
    for item in items:
        for marker, reason in reasons.items():
            if reason and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
