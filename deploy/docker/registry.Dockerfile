# syntax=docker/dockerfile:1.7
# The SkillBank registry (FastAPI on Postgres), CPU only. Build from the repository root:
#   docker build -f deploy/docker/registry.Dockerfile -t intraskill/registry:0.1.0 .
# Schema migrations run as their own Job (`intraskill registry migrate`), never at start.

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
# The project as a wheel, installed with its base dependencies only (no torch, no extras).
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir /wheels/intraskill-*.whl

FROM python:3.11.14-slim-bookworm
RUN useradd --uid 10001 --home-dir /home/app --create-home --shell /usr/sbin/nologin app
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001
WORKDIR /home/app
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
ENTRYPOINT ["intraskill", "registry"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--no-migrate", "--workers", "1"]
