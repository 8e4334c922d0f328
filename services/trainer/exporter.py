"""The trainer's Prometheus figures, served on a metrics port and read from the run folder.

A collector, not instrumentation: at each scrape it reads what the run already writes
(`metrics.jsonl` from where it left off, `state.json`, `run.json`), so the training loop holds
no metric calls and a resumed run (whose metrics.jsonl is rewound) is counted afresh. A port,
not a pushgateway: the trainer is one long-lived pod that Prometheus can reach like the
services, and a pushgateway would keep the last figures of a dead run looking alive.

    intraskill train run ... --metrics-port 9400     # GET http://<pod>:9400/metrics
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from services.trainer.environment import TrainerEnvironment

PHASES = ("train", "compile", "gate")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # not written yet, or caught mid-replace
        return None


class StepTotals:
    """Sums over metrics.jsonl's lines, read incrementally; a replaced or shorter file (a
    resume rewinds it by writing a new one) starts the sums over."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.steps = 0
        self.episodes_generated = 0
        self.episodes_admitted = 0
        self.step_seconds = 0.0
        self.last: dict[str, Any] = {}

    def refresh(self) -> None:
        try:
            stat = self.path.stat()
        except OSError:
            return
        if stat.st_ino != self.inode or stat.st_size < self.offset:
            self.__init__(self.path)
            self.inode = stat.st_ino
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits for the next
        self.offset += len(complete)
        for raw in complete.splitlines():
            if raw.strip():
                self._add(json.loads(raw))

    def _add(self, line: dict[str, Any]) -> None:
        self.steps += 1
        self.episodes_generated += line.get("episodes_generated") or 0
        self.episodes_admitted += line.get("episodes_admitted") or 0
        self.step_seconds += (line.get("timings") or {}).get("step_s") or 0.0
        self.last = line


class RunFolderCollector:
    """Step time, episodes, reward and the gate's state of the run in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.totals = StepTotals(folder / "metrics.jsonl")
        self.lock = threading.Lock()  # scrapes may overlap

    def collect(self):
        with self.lock:
            self.totals.refresh()
            totals = self.totals
            last = totals.last
        yield SummaryMetricFamily(
            "trainer_step_seconds", "rollout step wall time (rollouts, update, logging)",
            count_value=totals.steps, sum_value=totals.step_seconds,
        )  # fmt: skip
        episodes = CounterMetricFamily("trainer_episodes", "episodes", labels=["stage"])
        episodes.add_metric(["generated"], totals.episodes_generated)
        episodes.add_metric(["admitted"], totals.episodes_admitted)
        yield episodes
        for name, help in (("reward", "mean reward"), ("success", "mean success")):
            if last.get(name) is not None:
                yield GaugeMetricFamily(f"trainer_{name}", f"{help}, last step", value=last[name])
        yield from self._gate_state()

    def _gate_state(self):
        state = _read_json(self.folder / "state.json") or {}
        record = _read_json(self.folder / "run.json") or {}
        if "round" in state:
            yield GaugeMetricFamily("trainer_round", "the round in progress", value=state["round"])
        phase = GaugeMetricFamily("trainer_phase", "1 for the phase in progress", labels=["phase"])
        for name in PHASES:
            phase.add_metric([name], float(state.get("phase") == name))
        yield phase
        gates = CounterMetricFamily("trainer_gates", "finished gates", labels=["status"])
        statuses = [r["gate_status"] for r in record.get("rounds", []) if r.get("gate_status")]
        for status in sorted(set(statuses)):
            gates.add_metric([status], statuses.count(status))
        yield gates
        adopted = sum(bool(r.get("adopted")) for r in record.get("rounds", []))
        yield CounterMetricFamily("trainer_banks_adopted", "gates that moved the bank", adopted)


def serve_run_metrics(folder: Path, port: int, host: str = "0.0.0.0") -> bool:
    """Serve the run folder's figures on `port`; only the main process does (torchrun and
    accelerate set RANK on every rank; the others would fight for the port). Whether served."""
    if not TrainerEnvironment().main_process:
        return False
    registry = CollectorRegistry()
    registry.register(RunFolderCollector(Path(folder)))
    start_http_server(port, addr=host, registry=registry)
    return True
