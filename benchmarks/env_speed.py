"""ShopSim speed: mixed steps/s replaying heuristic-agent episodes, search latency p50/p99,
catalogue and index build time and resident memory, per catalogue size.

    python benchmarks/env_speed.py                         # 20k, 100k and 1M products
    python benchmarks/env_speed.py --sizes 20000 --tasks 100 --out /tmp/env_speed.json
    python benchmarks/env_speed.py --compare-engines --sizes 20000,100000   # bm25 / FTS5 / tantivy

Each size runs in a fresh child process pinned to one core, so its memory figures are its own.
Goals (issue 3): >= 3,000 mixed steps/s on one core at 20k; search p99 <= 10 ms at 1M.
The heuristic agent's own thinking is not timed: its episodes are recorded first, then their
action strings are replayed through fresh episodes, and only the environment is on the clock.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def load_search_kernel() -> float:
    """Seconds to load (or, the first time, compile) the search kernel: once per process."""
    from shared.runtime.shopsim.catalog import generate_catalog
    from shared.runtime.shopsim.search import Bm25Index

    started = time.perf_counter()
    Bm25Index(generate_catalog(100, 1).catalog).search("black")
    return time.perf_counter() - started


def measure(size: int, tasks: int, replays: int, queries: int, seed: int) -> dict[str, object]:
    """Everything for one catalogue size (runs inside the child process)."""
    from shared.runtime.shopsim.agents import HeuristicAgent, run_episode
    from shared.runtime.shopsim.catalog import generate_catalog
    from shared.runtime.shopsim.env import ShopEnv
    from shared.runtime.shopsim.presets import PRESETS
    from shared.runtime.shopsim.tasks import TaskSettings, generate_tasks
    from shared.runtime.shopsim.world import World

    kernel_seconds = load_search_kernel()
    baseline = rss_mib()
    started = time.perf_counter()
    generated = generate_catalog(size, seed)
    catalog_seconds = time.perf_counter() - started
    catalog_rss = rss_mib()
    started = time.perf_counter()
    task_list = generate_tasks(generated, TaskSettings({"train": tasks}), seed)
    tasks_seconds = time.perf_counter() - started
    world = World(
        catalog=generated.catalog,
        tasks={task.task_id: task for task in task_list},
        site=PRESETS["paper"].site,
        name=f"bench-{size}",
    )
    assert world.index is not None
    world.index.cache_size = 0  # type: ignore[attr-defined]  # cold queries only
    index_seconds = world.index.build_seconds
    built_rss = rss_mib()
    env = ShopEnv(world)

    ids = env.task_ids("train")
    recorded = [
        run_episode(env, task_id, HeuristicAgent(env.task_view(task_id))) for task_id in ids
    ]
    success = sum(record.success for record in recorded) / len(recorded)
    total_steps, started, cpu_started = 0, time.perf_counter(), time.process_time()
    for _ in range(replays):
        for record in recorded:
            episode, _ = env.reset(record.task_id)
            for action in record.actions:
                episode.step(action)
            total_steps += len(record.actions)
    replay_seconds = time.perf_counter() - started
    replay_cpu_seconds = time.process_time() - cpu_started

    rng = random.Random(seed)
    searches = [a[7:-1] for r in recorded for a in r.actions if a.startswith("search[")]
    products = generated.catalog.products
    while len(searches) < queries:
        product = rng.choice(products)
        noun = product.category.split(" › ")[-1]
        pick = rng.random()
        if pick < 0.3:
            searches.append(product.title)
        else:
            words = rng.sample(product.attributes, min(len(product.attributes), rng.randint(1, 4)))
            searches.append(" ".join([noun, *words]))
    for query in searches[:20]:  # warm caches once
        world.index.search(query)
    latencies, cpu_latencies = [], []
    for query in searches[:queries]:
        started, cpu_started = time.perf_counter(), time.thread_time()
        world.index.search(query)
        latencies.append((time.perf_counter() - started) * 1000)
        cpu_latencies.append((time.thread_time() - cpu_started) * 1000)
    return {
        "products": size,
        "catalog_build_s": round(catalog_seconds, 2),
        "tasks_build_s": round(tasks_seconds, 2),
        "index_build_s": round(index_seconds, 2),
        "search_kernel_load_s": round(kernel_seconds, 2),
        "rss_baseline_mib": round(baseline, 1),
        "rss_catalog_mib": round(catalog_rss, 1),
        "rss_catalog_and_index_mib": round(built_rss, 1),
        "index_mib": round(built_rss - catalog_rss, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "episodes_replayed": len(recorded) * replays,
        "mixed_steps": total_steps,
        "mixed_steps_per_s": round(total_steps / replay_seconds, 1),
        # Per CPU-second of this process: the figure that does not depend on other load.
        "mixed_steps_per_cpu_s": round(total_steps / replay_cpu_seconds, 1),
        "mean_steps_per_episode": round(total_steps / (len(recorded) * replays), 2),
        "heuristic_success": round(success, 3),
        "search_queries": len(latencies),
        "search_p50_ms": round(percentile(latencies, 50), 3),
        "search_p99_ms": round(percentile(latencies, 99), 3),
        "search_mean_ms": round(statistics.fmean(latencies), 3),
        "search_max_ms": round(max(latencies), 3),
        "search_cpu_p50_ms": round(percentile(cpu_latencies, 50), 3),
        "search_cpu_p99_ms": round(percentile(cpu_latencies, 99), 3),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


class TantivyIndex:
    """The engine ShopSim used before (tantivy, one boosted term query per field and token:
    per-field BM25 summed, not FTS5's row-level bm25()), kept here only as a baseline."""

    engine = "tantivy"

    def __init__(self, catalog: object) -> None:
        import tantivy

        from shared.runtime.shopsim.search_text import FIELDS, FieldTokenizer

        started = time.perf_counter()
        products = catalog.products  # type: ignore[attr-defined]
        builder = tantivy.SchemaBuilder()
        for name in FIELDS:
            builder.add_text_field(name, tokenizer_name="whitespace", index_option="freq")
        self._schema = builder.build()
        index = tantivy.Index(self._schema)
        writer = index.writer(heap_size=1_500_000_000, num_threads=1)
        # Documents in product-id order: tantivy's own top-k then breaks ties by product id.
        self._by_rank = sorted(range(len(products)), key=lambda p: products[p].asin)
        fields = FieldTokenizer(" ".join).fields
        for position in self._by_rank:
            document = tantivy.Document()
            for name, text in zip(FIELDS, fields(products[position]), strict=True):
                document.add_text(name, text)
            writer.add_document(document)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._searcher = index.searcher()
        assert self._searcher.num_segments == 1
        self._tantivy = tantivy
        self.build_seconds = time.perf_counter() - started

    def search(self, query: str, k: int = 150) -> list[int]:
        from shared.runtime.shopsim.search_text import FIELD_WEIGHTS, query_phrases

        make, should = self._tantivy.Query, self._tantivy.Occur.Should
        clauses = [  # a phrase's tokens as separate terms: tantivy had no phrases here
            (should, make.boost_query(make.term_query(self._schema, name, token), weight))
            for phrase in query_phrases(query)
            for token in phrase
            for name, weight in FIELD_WEIGHTS.items()
        ]
        if not clauses:
            return []
        hits = self._searcher.search(make.boolean_query(clauses), k, count=False).hits
        return [self._by_rank[doc] for _, doc in sorted((-s, a.doc) for s, a in hits)]


def compare_engines(size: int, queries: int, seed: int) -> dict[str, object]:
    """Build and query the engines on one catalogue and one query set: ShopSim's `bm25`
    (precomputed FTS5 bm25() postings), SQLite FTS5 itself (the reference's engine) and, when
    tantivy is installed, the former tantivy engine. Agreement is measured against FTS5."""
    from shared.runtime.shopsim.catalog import generate_catalog
    from shared.runtime.shopsim.search import Bm25Index
    from shared.runtime.shopsim.search_fts5 import Fts5Index

    load_search_kernel()
    generated = generate_catalog(size, seed)
    products = generated.catalog.products
    rng = random.Random(seed)
    sample = []
    for _ in range(queries):
        product = rng.choice(products)
        noun = product.category.split(" › ")[-1]
        words = rng.sample(product.attributes, min(len(product.attributes), rng.randint(1, 4)))
        sample.append(product.title if rng.random() < 0.3 else " ".join([noun, *words]))
    engines: dict[str, object] = {
        "bm25": lambda catalog: Bm25Index(catalog, cache_size=0),
        "fts5": Fts5Index,
    }
    try:
        import tantivy  # noqa: F401

        engines["tantivy"] = TantivyIndex
    except ImportError:
        pass
    figures: dict[str, object] = {"products": size, "queries": queries}
    results: dict[str, list[list[int]]] = {}
    for name, engine in engines.items():
        before = rss_mib()
        index = engine(generated.catalog)  # type: ignore[operator]
        memory = rss_mib() - before
        latencies, cpu_latencies, hits = [], [], []
        for query in sample:
            started, cpu_started = time.perf_counter(), time.thread_time()
            hits.append(index.search(query))
            latencies.append((time.perf_counter() - started) * 1000)
            cpu_latencies.append((time.thread_time() - cpu_started) * 1000)
        results[name] = hits
        figures[name] = {
            "build_s": round(index.build_seconds, 2),
            "p50_ms": round(percentile(latencies, 50), 3),
            "p99_ms": round(percentile(latencies, 99), 3),
            "cpu_p99_ms": round(percentile(cpu_latencies, 99), 3),
            "extra_rss_mib": round(memory, 1),
        }
        del index
    for name in results:
        if name != "fts5":
            pairs = list(zip(results[name], results["fts5"], strict=True))
            overlap = [len(set(a[:20]) & set(b[:20])) / max(1, len(b[:20])) for a, b in pairs]
            figures[name]["vs_fts5"] = {  # type: ignore[index]
                "top20_overlap": round(statistics.fmean(overlap), 3),
                "top150_identical": round(statistics.fmean(a == b for a, b in pairs), 3),
            }
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000,100000,1000000", help="comma-separated sizes")
    parser.add_argument("--tasks", type=int, default=300, help="heuristic episodes to replay")
    parser.add_argument("--replays", type=int, default=3, help="times each episode is replayed")
    parser.add_argument("--queries", type=int, default=2000, help="search latency sample")
    parser.add_argument("--seed", type=int, default=20260830)
    parser.add_argument("--out", default="env_speed.json", help="JSON file for the figures")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--core", type=int, default=0, help="CPU core to pin each run to")
    parser.add_argument(
        "--compare-engines", action="store_true", help="bm25 vs SQLite FTS5 (vs tantivy) instead"
    )
    args = parser.parse_args()
    if args.compare_engines:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {args.core})
        report = [compare_engines(int(s), min(args.queries, 300), args.seed)
                  for s in args.sizes.split(",") if s.strip()]  # fmt: skip
        print(json.dumps(report, indent=2))
        Path(args.out).write_text(json.dumps(report, indent=2))
        return 0
    if args.child:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {args.core})
        figures = measure(args.child, args.tasks, args.replays, args.queries, args.seed)
        print(json.dumps(figures))
        return 0
    results = []
    for size in (int(s) for s in args.sizes.split(",") if s.strip()):
        command = [sys.executable, __file__, "--child", str(size), "--tasks", str(args.tasks),
                   "--replays", str(args.replays), "--queries", str(args.queries),
                   "--seed", str(args.seed), "--core", str(args.core)]  # fmt: skip
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return done.returncode
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        figures["wall_s"] = round(time.perf_counter() - started, 1)
        results.append(figures)
        print(
            f"{size:>9,} products: {figures['mixed_steps_per_s']:>7,.0f} mixed steps/s "
            f"({figures['mixed_steps_per_cpu_s']:,.0f} per CPU-s) | "
            f"search p50 {figures['search_p50_ms']:.2f} ms p99 {figures['search_p99_ms']:.2f} ms "
            f"(CPU p99 {figures['search_cpu_p99_ms']:.2f} ms) | "
            f"catalog {figures['catalog_build_s']} s, index {figures['index_build_s']} s | "
            f"RSS {figures['rss_catalog_and_index_mib']:,.0f} MiB "
            f"(index {figures['index_mib']:,.0f} MiB, peak {figures['peak_rss_mib']:,.0f} MiB) | "
            f"load {figures['load_average_1m']}"
        )
    report = {
        "machine": {
            "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
            "cores_visible": os.cpu_count(),
            "pinned_core": args.core,
        },
        "settings": {
            "tasks": args.tasks,
            "replays": args.replays,
            "queries": args.queries,
            "seed": args.seed,
            "results_per_page": 20,
            "top_k": 150,
        },
        "results": results,
    }
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
