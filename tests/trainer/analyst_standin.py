"""A TEST DOUBLE of the analyst service: it records the trainer's calls and compiles nothing.

It answers the analyst's HTTP contract (`shared/contracts/analyst_api`) for the routes the trainer uses:
all-wrong group submissions (idempotent on run, round, step and group index; a different body
under the same key is a 409) and round compile jobs (idempotent on the Idempotency-Key), which
succeed at once with no candidates and the round's funnel counts. Every call is appended to
`calls.jsonl` and the state survives a restart (`state.json`), so a resumed trainer sees what it
already submitted. Tests that count the trainer's calls start it (`run_support.analyst_standin`)
and pass its URL with `--analyst-url`; the trainer never starts it.

    python -m tests.trainer.analyst_standin --port 8200 --folder runs/x/analyst-standin
"""

from __future__ import annotations

import argparse
import json
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, HTTPException, Request

STANDIN_NAME = "analyst-stand-in (records calls, compiles no candidates)"


def _now() -> str:
    return datetime.now(UTC).isoformat()


class Recorder:
    """The stand-in's persistent state: groups by key, jobs by id and by idempotency key."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        path = folder / "state.json"
        state = json.loads(path.read_text()) if path.is_file() else {}
        self.groups: dict[str, dict[str, Any]] = state.get("groups", {})
        self.jobs: dict[str, dict[str, Any]] = state.get("jobs", {})
        self.keys: dict[str, str] = state.get("keys", {})

    def log(self, route: str, body: Any, replayed: bool) -> None:
        line = {"at": _now(), "route": route, "body": body, "replayed": replayed}
        with (self.folder / "calls.jsonl").open("a") as handle:
            handle.write(json.dumps(line) + "\n")

    def save(self) -> None:
        path = self.folder / "state.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(
            json.dumps({"groups": self.groups, "jobs": self.jobs, "keys": self.keys})
        )
        temporary.replace(path)


def create_app(folder: Path) -> FastAPI:
    recorder = Recorder(folder)
    app = FastAPI(title=STANDIN_NAME)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "service": STANDIN_NAME}

    @app.get("/readyz")
    def readyz() -> dict[str, Any]:
        return {"ready": True, "checks": {"service": STANDIN_NAME}}

    @app.post("/v1/all-wrong-groups")
    async def submit_group(request: Request) -> dict[str, Any]:
        body = await request.json()
        key = ":".join(str(body.get(k)) for k in ("run_id", "round", "step", "group_index"))
        with recorder.lock:
            stored = recorder.groups.get(key)
            if stored is not None and stored["request"] != body:
                raise HTTPException(409, f"group {key} was submitted with another body")
            replayed = stored is not None
            if stored is None:
                stored = recorder.groups[key] = {
                    "id": uuid.uuid4().hex[:12],
                    "request": body,
                    "status": "pending",
                    "created_at": _now(),
                }
                recorder.save()
            recorder.log("POST /v1/all-wrong-groups", body, replayed)
        return {**stored, "replayed": replayed}

    @app.get("/v1/all-wrong-groups")
    def list_groups(run_id: str | None = None, round: int | None = None) -> list[dict]:
        return [
            group
            for group in recorder.groups.values()
            if (run_id is None or group["request"]["run_id"] == run_id)
            and (round is None or group["request"]["round"] == round)
        ]

    @app.post("/v1/compile-jobs", status_code=202)
    async def compile_round(
        request: Request, idempotency_key: str | None = Header(None)
    ) -> dict[str, Any]:
        body = await request.json()
        with recorder.lock:
            if idempotency_key and idempotency_key in recorder.keys:
                job = recorder.jobs[recorder.keys[idempotency_key]]
                recorder.log("POST /v1/compile-jobs", body, True)
                return job
            groups = [
                g
                for g in recorder.groups.values()
                if g["request"]["run_id"] == body.get("run_id")
                and g["request"]["round"] == body.get("round")
            ]
            now = _now()
            job = {
                "id": uuid.uuid4().hex[:12],
                "kind": "compile",
                "status": "succeeded",
                "request": body,
                "created_at": now,
                "started_at": now,
                "finished_at": now,
                "progress": {},
                "result": {
                    "candidate_ids": [],
                    "candidates": [],
                    "card_ids": [],
                    "evidence_only_card_ids": [],
                    "funnel": {
                        "run_id": body.get("run_id", ""),
                        "round": body.get("round", 0),
                        "all_wrong_groups": len(groups),
                    },
                    "note": f"{STANDIN_NAME}: no analysis ran",
                },
                "error": None,
            }
            recorder.jobs[job["id"]] = job
            if idempotency_key:
                recorder.keys[idempotency_key] = job["id"]
            recorder.save()
            recorder.log("POST /v1/compile-jobs", body, False)
        return job

    @app.get("/v1/jobs/{job_id}")
    def get_job(job_id: str) -> dict[str, Any]:
        job = recorder.jobs.get(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return job

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=STANDIN_NAME)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--folder", type=Path, required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(args.folder), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
