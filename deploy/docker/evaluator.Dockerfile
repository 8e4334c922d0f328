# syntax=docker/dockerfile:1.7
# The evaluator (validation gates, test-set evaluation), CPU only: it drives rollouts on a vLLM
# server through the agent runtime's `openai` backend, so it needs no torch. Build from the root:
#   docker build -f deploy/docker/evaluator.Dockerfile -t intraskill/evaluator:0.1.0 .

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir /wheels/intraskill-*.whl

FROM python:3.11.14-slim-bookworm
RUN useradd --uid 10001 --home-dir /home/app --create-home --shell /usr/sbin/nologin app
COPY --from=build /opt/venv /opt/venv
# numba (ShopSim's search kernel) caches compiled code; the root filesystem is read-only.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/tmp/numba \
    EVALUATOR_BACKEND=openai
USER 10001
WORKDIR /home/app
EXPOSE 8100
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8100/healthz', timeout=4)"]
ENTRYPOINT ["intraskill", "gate"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8100"]
