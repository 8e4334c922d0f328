"""How long the console takes to render its pages on a registry of 100 banks and 1,000 chunk
versions (the issue's bar: well under a second per page).

A real registry (SQLite file, or Postgres with --database) and a real console, each an
`intraskill ... serve` process on loopback. The registry gets `seed-demo`'s history (3 banks,
3 gates), then 100 more chunks of 10 versions each (1,005 versions in all) and 97 more frozen
banks of 10 chunks each (100 banks), each a child of the one before. One user logs in; each
page is fetched once cold (the console's frozen-bank cache empty for it) and then `--repeat`
times warm, end to end over HTTP (the console's calls to the registry included). Prints
median / p90 / max per page, and the CPU time the console and the registry processes spent per
warm page (read from /proc: what the page costs, whatever else the machine is doing), and
writes them to a JSON file.

    python benchmarks/console_render.py                       # SQLite, 10 warm fetches a page
    python benchmarks/console_render.py --database postgresql://postgres@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from services.registry.seed_demo import seed  # noqa: E402
from shared.contracts.chunks import ChunkContent  # noqa: E402
from shared.contracts.registry_api.client import RegistryClient  # noqa: E402
from shared.kit.loopback import free_port, mint_tokens, start_registry, start_service  # noqa: E402

N_CHUNKS, N_VERSIONS, N_BANKS, BANK_SIZE = 100, 10, 100, 10


def content(chunk: int, version: int) -> ChunkContent:
    return ChunkContent(
        title=f"Skill {chunk}: check attribute {chunk % 7} before buying (rev {version})",
        applies_when=f"the task names attribute {chunk % 7} or a budget near {10 * version}",
        procedure=[f"open the item page and read attribute {chunk % 7}",
                   f"compare it with the task, pass {version}", "choose every option axis"],
        verify=f"attribute {chunk % 7} matches the task on revision {version}",
        avoid="buying on the first plausible match",
    )  # fmt: skip


def populate(registry: RegistryClient) -> dict[str, int]:
    """seed-demo, then the chunk versions and banks that make the page sizes of the bar."""
    seeded = seed(registry)
    started = time.perf_counter()
    versions: list[list[int]] = []
    for chunk in range(N_CHUNKS):
        created = registry.create_chunk(f"bench-skill-{chunk:03d}", content(chunk, 1))
        ids = [created.latest.id]
        for version in range(2, N_VERSIONS + 1):
            ids.append(registry.add_chunk_version(created.id, content(chunk, version)).id)
        versions.append(ids)
        print(f"\r  chunks {chunk + 1}/{N_CHUNKS}", end="", flush=True)
    parent = seeded.bank_ids[-1]
    for bank in range(N_BANKS - len(seeded.bank_ids)):
        entries = [
            {"chunk_version_id": versions[(bank + k) % N_CHUNKS][(bank + k) % N_VERSIONS],
             "rho": round(0.2 + 0.07 * k, 2), "coefficient": round(0.01 * (BANK_SIZE - k), 3)}
            for k in range(BANK_SIZE)
        ]  # fmt: skip
        draft = registry.create_bank(entries, round=3 + bank, parent_bank_id=parent)
        registry.freeze_bank(draft.id)
        parent = draft.id
        print(f"\r  banks {bank + 1}/{N_BANKS - len(seeded.bank_ids)}   ", end="", flush=True)
    print(f"\n  populated in {time.perf_counter() - started:.0f} s")
    return {"first_bank": seeded.bank_ids[0], "last_bank": parent,
            "chunk": registry.list_chunks(slug_prefix="bench-skill-", limit=1).items[0].id,
            "gate": seeded.gate_ids[1]}  # fmt: skip


def log_in(console_url: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=console_url, timeout=60)
    nonce = re.search(r'name="nonce" value="([^"]+)"', client.get("/login").text).group(1)
    answer = client.post("/login", data={"token": token, "nonce": nonce})
    assert answer.status_code == 303, answer.text
    return client


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc): unlike wall time, it barely
    moves with other load on the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(client: httpx.Client, path: str, repeat: int, pids: dict[str, int]) -> dict[str, float]:
    def fetch() -> float:
        started = time.perf_counter()
        answer = client.get(path)
        elapsed = time.perf_counter() - started
        assert answer.status_code == 200, f"{path}: {answer.status_code}"
        return elapsed * 1000

    cold = fetch()
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    warm = sorted(fetch() for _ in range(repeat))
    cpu = {
        f"{name}_cpu_ms": round((cpu_seconds(pid) - before[name]) * 1000 / repeat, 1)
        for name, pid in pids.items()
    }
    return {
        **cpu,
        "cold_ms": round(cold, 1),
        "median_ms": round(statistics.median(warm), 1),
        "p90_ms": round(warm[int(0.9 * (len(warm) - 1))], 1),
        "max_ms": round(warm[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="registry DATABASE_URL (default: a new SQLite file)")
    parser.add_argument("--repeat", type=int, default=10, help="warm fetches per page")
    parser.add_argument("--out", type=Path, default=REPO / "runs/benchmarks/console_render.json")
    args = parser.parse_args()
    folder = args.out.parent / "console_render"
    folder.mkdir(parents=True, exist_ok=True)
    sqlite = folder / "registry.sqlite"
    if not args.database:
        sqlite.unlink(missing_ok=True)
    tokens, grants = mint_tokens("bench")
    registry_process = start_registry(
        database_url=args.database or f"sqlite:///{sqlite}", grants=grants,
        log=folder / "registry.log",
    )  # fmt: skip
    console_process = None
    try:
        registry_process.wait_ready()
        print(f"registry {registry_process.url}: populating")
        with RegistryClient(registry_process.url, tokens["operator"]) as registry:
            ids = populate(registry)
        port = free_port()
        console_process = start_service(
            "console", ["console", "serve", "--port", str(port)], port=port,
            env={"CONSOLE_REGISTRY_URL": registry_process.url}, log=folder / "console.log",
        )  # fmt: skip
        console_process.wait_ready()
        client = log_in(console_process.url, tokens["operator"])
        pids = {"console": console_process.process.pid, "registry": registry_process.process.pid}
        pages = {
            "banks (100 banks, 2 aliases)": "/banks",
            "bank (10 chunks)": f"/banks/{ids['last_bank']}",
            "bank diff (S0 -> last)": f"/banks/diff?from={ids['first_bank']}&to={ids['last_bank']}",
            "chunk (10 versions)": f"/chunks/{ids['chunk']}",
            "chunks (first 100)": "/chunks",
            "gates": "/gates",
            "gate (decision + plot)": f"/gates/{ids['gate']}",
            "review queue": "/review",
            "audit log (newest 50)": "/audit",
        }
        results = {}
        for name, path in pages.items():
            results[name] = measure(client, path, args.repeat, pids)
            r = results[name]
            print(f"{name:<30} cold {r['cold_ms']:>6.1f}  median {r['median_ms']:>6.1f}"
                  f"  p90 {r['p90_ms']:>6.1f}  max {r['max_ms']:>6.1f} ms   CPU per page:"
                  f" console {r['console_cpu_ms']:>5.1f},"
                  f" registry {r['registry_cpu_ms']:>5.1f} ms")  # fmt: skip
        args.out.write_text(json.dumps({
            "registry": "postgres" if args.database else "sqlite",
            "banks": N_BANKS, "chunk_versions": N_CHUNKS * N_VERSIONS + 6,
            "repeat": args.repeat, "load_average": os.getloadavg(), "pages": results,
        }, indent=2))  # fmt: skip
        print(f"figures in {args.out}")
    finally:
        if console_process is not None:
            console_process.stop()
        registry_process.stop()


if __name__ == "__main__":
    main()
