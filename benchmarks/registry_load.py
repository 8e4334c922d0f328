"""Load benchmark of the registry against Postgres on loopback.

Scenarios, each at the same concurrency (default 32 keep-alive connections) for a fixed time:
  bank_get        GET /v1/banks/{id} of a frozen 10-chunk bank (full body, strong ETag)
  bank_get_304    the same with If-None-Match: its ETag (304, no body)
  bank_get_routed bank_get with the frozen-bank response cache off (routing + auth + handler)
  card_post       POST /v1/cards (a card, its privileged audit and an audit entry; one commit)
  card_post_keyed the same POST with a fresh Idempotency-Key each time (the key claimed and the
                  answer stored for replays, in the same commit)
  card_post_replay the same POST with one Idempotency-Key throughout: one write, then replays
                  of the stored answer (what a client's retries after a lost answer cost)
  healthz         GET /healthz of the same registry process (no database, no auth): what a
                  request costs before the handler does any work; card_post is printed beside it
                  with the ratio card_post / healthz, which machine load moves far less than
                  either rate alone
  constant_get    a bare FastAPI endpoint returning a constant JSON body of the bank's size,
                  served by the same uvicorn settings: the ceiling the registry is compared with

Prints req/s, p50 and p99 latency per scenario and the bank_get / constant_get ratio, and writes
the figures to a JSON file. The goals on the 2-core development machine: bank_get >= 1,500
req/s with p99 <= 25 ms and >= 0.5x the constant endpoint; card_post >= 600 req/s with
p99 <= 100 ms.

    python benchmarks/registry_load.py                      # defaults: 32 connections, 5 s each
    python benchmarks/registry_load.py --duration 10 --workers 2 --out runs/bench/registry.json
    python benchmarks/registry_load.py --scenarios card_post healthz --workers 1 \
        --database postgres sqlite                          # the write path on both databases

Side by side with another version of the registry (a checkout of an older commit), several
rounds alternating between the two so that machine noise hits both alike:

    git worktree add /tmp/registry-old <commit>
    python benchmarks/registry_load.py --scenarios card_post bank_get --repeat 3 \
        --baseline /tmp/registry-old

The load generator is a minimal asyncio HTTP/1.1 client (uvloop when installed), so it spends
little of the machine's CPU on itself. Needs Postgres (default: 127.0.0.1:5432, trust auth); it
creates and drops a scratch database of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import psycopg  # noqa: E402

from shared.contracts.http_retry import wait_until_ready  # noqa: E402
from shared.kit.auth import hash_token  # noqa: E402

TOKENS = {"operator": "bench-operator", "analyst": "bench-analyst", "reader": "bench-reader"}


# ---------------------------------------------------------------- the constant endpoint


def constant_app():
    """uvicorn factory: one GET route answering a fixed JSON body (path in BENCH_PAYLOAD)."""
    from fastapi import FastAPI, Response

    body = Path(os.environ["BENCH_PAYLOAD"]).read_bytes()
    app = FastAPI()

    @app.get("/constant")
    async def constant():  # no return annotation: a string-ified Response confuses FastAPI
        return Response(body, media_type="application/json")

    return app


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def uvicorn_process(
    target: str,
    *,
    workers: int,
    env: dict[str, str],
    app_dir: Path | None = None,
    source: Path = ROOT,
    start_timeout: float = 300,
):
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        target,
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--http",
        "httptools",
        "--loop",
        "uvloop",
        "--log-level",
        "warning",
        "--no-access-log",
        "--backlog",
        "2048",
    ]
    if app_dir is not None:
        command += ["--app-dir", str(app_dir)]
    process = subprocess.Popen(
        command, env={**os.environ, **env, "PYTHONPATH": str(source)}, cwd=source
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # a loaded machine starts servers slowly
        wait_until_ready(url, process, path="/openapi.json", timeout=start_timeout, poll=0.1)
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(timeout=15)


# ---------------------------------------------------------------- load generator


Requests = Callable[[], bytes]  # the next request's bytes


async def _connection(
    port: int, requests: Requests, stop_at: float, latencies: list[float], statuses: dict
):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            writer.write(requests())
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
                    break
            if length:
                await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        writer.close()


async def _load(port: int, requests: Requests, concurrency: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(
        *(_connection(port, requests, stop_at, latencies, statuses) for _ in range(concurrency))
    )
    elapsed = time.perf_counter() - started
    latencies.sort()
    quantiles = (
        statistics.quantiles(latencies, n=100, method="inclusive")
        if len(latencies) > 1
        else [0] * 99
    )
    return {
        "requests": len(latencies),
        "seconds": round(elapsed, 3),
        "req_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(quantiles[49] * 1000, 2),
        "p99_ms": round(quantiles[98] * 1000, 2),
        "max_ms": round(latencies[-1] * 1000, 2) if latencies else None,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its live descendants (Linux /proc).

    CPU time per request barely moves with other load on the machine, unlike req/s and
    latency, so it is the fairer side-by-side figure on a shared machine.
    """
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def run_load(
    server: tuple[int, int], requests: Requests, concurrency: int, seconds: float, warmup: float
) -> dict[str, Any]:
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    port, pid = server
    runner(_load(port, requests, concurrency, warmup))
    cpu_before = tree_cpu_seconds(pid)
    result = runner(_load(port, requests, concurrency, seconds))
    cpu = tree_cpu_seconds(pid) - cpu_before
    result["server_cpu_ms_per_request"] = round(1000 * cpu / max(result["requests"], 1), 3)
    return result


def always(request: bytes) -> Requests:
    return itertools.repeat(request).__next__


def fresh_keys(method: str, path: str, *, token: str, body: bytes) -> Requests:
    """The same request under a new Idempotency-Key each time."""
    run, counter = uuid.uuid4().hex[:8], itertools.count()
    return lambda: http_request(
        method, path, token=token, body=body,
        headers={"Idempotency-Key": f"bench-{run}-{next(counter)}"},
    )  # fmt: skip


def http_request(
    method: str, path: str, *, token: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {token}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body or method == "POST":
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# ---------------------------------------------------------------- scenario data


def seed(url: str) -> tuple[int, str, bytes]:
    """A frozen bank of 10 Chinese chunks; returns its id, ETag and document bytes."""
    with httpx.Client(
        base_url=url,
        headers={"Authorization": f"Bearer {TOKENS['operator']}"},
        timeout=120,  # a loaded machine answers slowly
    ) as http:
        versions = []
        for index in range(10):
            content = {
                "title": f"搜索查询构建 - 显式约束整合 {index}",
                "applies_when": "任务包含明确属性约束（品牌、颜色、尺寸、价格、功能等）时",
                "procedure": [
                    "将所有核心属性约束整合为单一搜索查询词",
                    "将价格约束、产品形态、核心成分等关键要素直接融入搜索词",
                    "避免使用泛化搜索词或分步搜索",
                ],
                "verify": "验证搜索结果首屏是否出现匹配所有核心约束的商品",
                "avoid": "搜索词过于宽泛或遗漏关键约束导致结果不相关",
            }
            chunk = http.post(
                "/v1/chunks",
                json={"slug": f"chunk-{index}", "content": content, "source": "cold_start"},
            )
            chunk.raise_for_status()
            versions.append(chunk.json()["latest"]["id"])
        entries = [
            {"chunk_version_id": v, "rho": 0.2 + 0.07 * i, "coefficient": 0.01 * i}
            for i, v in enumerate(versions)
        ]
        bank = http.post("/v1/banks", json={"entries": entries})
        bank.raise_for_status()
        bank_id = bank.json()["id"]
        http.post(f"/v1/banks/{bank_id}/freeze").raise_for_status()
        document = http.get(f"/v1/banks/{bank_id}")
        return bank_id, document.headers["etag"], document.content


CARD = {
    "round": 0,
    "task_id": "train-000123",
    "outcome": "ADD",
    "eligible": True,
    "privileged_audit": {"earliest_divergence": "step 3", "minimal_repair": "add the budget"},
    "deployable": {
        "failure_mechanism": "查询遗漏了预算约束",
        "applicable_when": "任务给出预算时",
        "observable_trigger": "首屏商品价格超出预算",
        "corrective_procedure": "把预算写进搜索词",
        "verification_step": "首屏价格均在预算内",
    },
}


# ---------------------------------------------------------------- main

REGISTRY_SCENARIOS = (
    "bank_get", "bank_get_304", "card_post", "card_post_keyed", "card_post_replay", "healthz"
)  # fmt: skip
ALL_SCENARIOS = (*REGISTRY_SCENARIOS, "bank_get_routed", "constant_get")


def migrate(database_url: str, source: Path) -> None:
    """Alembic upgrade with the migrations of the registry under `source`."""
    code = "import sys; from services.registry.migrate import upgrade; upgrade(sys.argv[1])"
    subprocess.run(
        [sys.executable, "-c", code, sqlalchemy_url(database_url)],
        check=True,
        cwd=source,
        env={**os.environ, "PYTHONPATH": str(source)},
    )


@contextmanager
def scratch_database(admin_url: str, kind: str = "postgres"):
    """A fresh database URL of `kind` (postgres: a scratch database; sqlite: a temp file)."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="registry_bench_") as folder:
            yield f"sqlite:///{folder}/registry.db"
        return
    database = f"registry_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{database}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def sqlalchemy_url(database_url: str) -> str:
    return database_url.replace("postgresql://", "postgresql+psycopg://", 1)


def measure(
    args, source: Path, scenarios: list[str], database: str = "postgres"
) -> tuple[dict[str, Any], bytes]:
    """One pass over `scenarios` against the registry under `source`, on a fresh database."""
    results: dict[str, Any] = {}
    document = b""
    with scratch_database(args.admin_url, database) as database_url:
        migrate(database_url, source)
        grants = [
            {"name": f"bench-{role}", "role": role, "token_sha256": hash_token(token)}
            for role, token in TOKENS.items()
        ]
        env = {"DATABASE_URL": database_url, "REGISTRY_TOKENS": json.dumps(grants)}
        app = "services.registry.app:create_app"
        with uvicorn_process(
            app, workers=args.workers, env=env, source=source, start_timeout=args.start_timeout
        ) as server:
            bank_id, etag, document = seed(f"http://127.0.0.1:{server[0]}")
            get = always(http_request("GET", f"/v1/banks/{bank_id}", token=TOKENS["reader"]))
            card = json.dumps(CARD).encode()
            post = {"method": "POST", "path": "/v1/cards", "token": TOKENS["analyst"], "body": card}
            requests = {
                "bank_get": get,
                "bank_get_304": always(
                    http_request(
                        "GET",
                        f"/v1/banks/{bank_id}",
                        token=TOKENS["reader"],
                        headers={"If-None-Match": etag},
                    )
                ),
                "card_post": always(http_request(**post)),
                "healthz": always(http_request("GET", "/healthz", token=TOKENS["reader"])),
                "card_post_keyed": fresh_keys(**post),
                "card_post_replay": always(
                    http_request(**post, headers={"Idempotency-Key": f"bench-{uuid.uuid4().hex}"})
                ),
            }
            for name in REGISTRY_SCENARIOS:
                if name in scenarios:
                    results[name] = run_load(
                        server, requests[name], args.concurrency, args.duration, args.warmup
                    )
                    print(f"  {name:16s} {results[name]}", flush=True)
        if "bank_get_routed" in scenarios:
            # The same GET with the response cache in front of the app switched off: every
            # request goes through routing, auth and dependency resolution.
            routed_env = {**env, "REGISTRY_FROZEN_BANK_FAST_PATH": "false"}
            with uvicorn_process(
                app, workers=args.workers, env=routed_env, source=source
            ) as server:
                results["bank_get_routed"] = run_load(
                    server, get, args.concurrency, args.duration, args.warmup
                )
                print(f"  {'bank_get_routed':16s} {results['bank_get_routed']}", flush=True)
    return results, document


def measure_constant(args, document: bytes) -> dict[str, Any]:
    payload = args.out.parent / "constant_payload.json"
    payload.parent.mkdir(parents=True, exist_ok=True)
    payload.write_bytes(document)
    with uvicorn_process(
        "registry_load:constant_app",
        workers=args.workers,
        env={"BENCH_PAYLOAD": str(payload)},
        app_dir=ROOT / "benchmarks",
    ) as server:
        request = http_request("GET", "/constant", token="unused")
        result = run_load(server, always(request), args.concurrency, args.duration, args.warmup)
    print(f"  {'constant_get':16s} {result}", flush=True)
    return result


def spread(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = [run[key] for run in runs]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def write_vs_healthz(figures: dict[str, Any]) -> dict[str, float] | None:
    """card_post beside healthz of the same server: the rate ratio and the CPU ratio."""
    if "card_post" not in figures or "healthz" not in figures:
        return None
    post, health = figures["card_post"], figures["healthz"]
    return {
        "card_post_req_per_s": post["req_per_s"]["median"],
        "healthz_req_per_s": health["req_per_s"]["median"],
        "rate_ratio": round(post["req_per_s"]["median"] / health["req_per_s"]["median"], 3),
        "card_post_cpu_ms": post["server_cpu_ms_per_request"]["median"],
        "healthz_cpu_ms": health["server_cpu_ms_per_request"]["median"],
        "cpu_ratio": round(
            post["server_cpu_ms_per_request"]["median"]
            / health["server_cpu_ms_per_request"]["median"],
            2,
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per scenario")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers for both servers")
    parser.add_argument("--repeat", type=int, default=1, help="rounds over the scenarios")
    parser.add_argument(
        "--start-timeout", type=float, default=300, help="seconds a server may take to start"
    )
    parser.add_argument(
        "--scenarios", nargs="+", choices=ALL_SCENARIOS, default=list(ALL_SCENARIOS)
    )
    parser.add_argument(
        "--database",
        nargs="+",
        choices=("postgres", "sqlite"),
        default=["postgres"],
        help="the registry's database for each pass (constant_get runs with the first only)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of another registry version, measured in alternation with this one",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "runs" / "benchmarks" / "registry_load.json"
    )
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()

    sources = {"current": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    # One label per (version, database): "current" alone on the default single database.
    labels = {
        (f"{name}/{database}" if len(args.database) > 1 else name): (source, database)
        for name, source in sources.items()
        for database in args.database
    }
    registry_scenarios = [name for name in args.scenarios if name != "constant_get"]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        label: {name: [] for name in args.scenarios} for label in labels
    }
    first_label = next(iter(labels))
    for round_index in range(args.repeat):
        for label, (source, database) in labels.items():
            print(f"round {round_index + 1}/{args.repeat}: {label} ({source})", flush=True)
            results, document = measure(args, source, registry_scenarios, database)
            for name, figures in results.items():
                runs[label][name].append(figures)
            if "constant_get" in args.scenarios and label == first_label:
                runs[label]["constant_get"].append(measure_constant(args, document))

    summary = {
        label: {
            name: {
                key: spread(figures, key)
                for key in ("req_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_request")
            }
            for name, figures in scenarios.items()
            if figures
        }
        for label, scenarios in runs.items()
    }
    current = summary[first_label]
    goals: dict[str, bool] = {}
    if "card_post" in current:
        goals["card_post_req_per_s>=600"] = current["card_post"]["req_per_s"]["median"] >= 600
        goals["card_post_p99_ms<=100"] = current["card_post"]["p99_ms"]["median"] <= 100
    if "bank_get" in current:
        goals["bank_get_req_per_s>=1500"] = current["bank_get"]["req_per_s"]["median"] >= 1500
        goals["bank_get_p99_ms<=25"] = current["bank_get"]["p99_ms"]["median"] <= 25
    if "bank_get" in current and "constant_get" in current:
        ratio = (
            current["bank_get"]["req_per_s"]["median"]
            / current["constant_get"]["req_per_s"]["median"]
        )
        summary["bank_get_vs_constant"] = round(ratio, 3)
        goals["bank_get_vs_constant>=0.5"] = ratio >= 0.5
    side_by_side = {label: write_vs_healthz(summary[label]) for label in labels}
    summary["card_post_vs_healthz"] = {k: v for k, v in side_by_side.items() if v}
    report = {
        "config": {
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "workers": args.workers,
            "repeat": args.repeat,
            "databases": args.database,
            "sources": {label: str(path) for label, path in sources.items()},
            "server": "uvicorn httptools+uvloop",
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": os.getloadavg(),
        },
        "runs": runs,
        "summary": summary,
        "goals": goals,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print()
    header = f"{'version':17s} {'scenario':16s} {'req/s median [min-max]':>24s}"
    print(header + f" {'p99 ms':>8s} {'server CPU ms/request [min-max]':>32s}")
    for label in labels:
        for name, figures in summary[label].items():
            rate, p99 = figures["req_per_s"], figures["p99_ms"]
            cpu = figures["server_cpu_ms_per_request"]
            span = f"{rate['median']:.0f} [{rate['min']:.0f}-{rate['max']:.0f}]"
            cpu_span = f"{cpu['median']:.2f} [{cpu['min']:.2f}-{cpu['max']:.2f}]"
            print(f"{label:17s} {name:16s} {span:>24s} {p99['median']:8.1f} {cpu_span:>32s}")
    if summary["card_post_vs_healthz"]:
        print()
        print(f"{'version':17s} {'card_post req/s':>15s} {'healthz req/s':>14s} {'ratio':>7s}"
              f" {'card_post CPU ms':>17s} {'healthz CPU ms':>15s} {'CPU ratio':>10s}")  # fmt: skip
        for label, row in summary["card_post_vs_healthz"].items():
            print(
                f"{label:17s} {row['card_post_req_per_s']:15.0f} {row['healthz_req_per_s']:14.0f}"
                f" {row['rate_ratio']:7.3f} {row['card_post_cpu_ms']:17.2f}"
                f" {row['healthz_cpu_ms']:15.2f} {row['cpu_ratio']:10.2f}"
            )
    if args.baseline:
        for database in args.database:
            now, then = (
                next(
                    label for label, (src, db) in labels.items() if src == source and db == database
                )
                for source in (ROOT, args.baseline)
            )
            for name in registry_scenarios:
                base, cur = summary[then].get(name), summary[now].get(name)
                if base and cur:
                    ratio = cur["req_per_s"]["median"] / base["req_per_s"]["median"]
                    cpu_ratio = (
                        cur["server_cpu_ms_per_request"]["median"]
                        / base["server_cpu_ms_per_request"]["median"]
                    )
                    print(
                        f"{name} ({database}): current / baseline = {ratio:.2f}x req/s, "
                        f"{cpu_ratio:.2f}x server CPU per request"
                    )
    print("goals: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in goals.items()))
    print(
        f"load average {load_at_start[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end, on "
        f"{os.cpu_count()} CPUs; figures in {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
