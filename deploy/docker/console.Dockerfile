# syntax=docker/dockerfile:1.7
# The operator console (server-rendered pages over the registry's API), CPU only. Build from the
# repository root:
#   docker build -f deploy/docker/console.Dockerfile -t intraskill/console:0.1.0 .
# It holds no database and no token of its own: each user logs in with their registry token.

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
# The project as a wheel (templates and stylesheet inside), base dependencies only.
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
EXPOSE 8300
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8300/healthz', timeout=4)"]
ENTRYPOINT ["intraskill", "console"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8300"]
