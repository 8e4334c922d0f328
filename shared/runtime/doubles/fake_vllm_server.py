"""Test double: a FAKE vLLM server (no model) with vLLM 0.32's weight-update endpoints.

Run as its own process (`python -m shared.runtime.doubles.fake_vllm_server --port P`), so the trainer's
`WeightSync` is tested over real HTTP against another process, as it talks to real servers. It
keeps the state a real server would: the weight version (`/update_weight_version`,
`/weight_info`), the folder it reloaded (`/collective_rpc` `reload_weights`, which checks the
folder holds HF weights), pause/resume, and LoRA adapters (`/v1/load_lora_adapter`, `/v1/models`).

With `--api-key KEY` it checks the key as vLLM 0.32's `AuthenticationMiddleware` does: a request
under `/v1`, `/v2`, `/inference` or `/cohere` without `Authorization: Bearer KEY` is a 401, every
other path answers anyone. It also lists, in its state's `unkeyed`, each call (outside `/fake`
and `/health`) that came without the key, so a test can see that a client sent it everywhere.

Misbehaviour on purpose: `POST /fake/fail-reload {"on": true}` makes reload_weights answer 500,
as a worker that cannot read the folder. `POST /fake/restart` forgets everything pushed, as a
restarted server that came back on its original weights. `GET /fake/state` shows the state.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse

INITIAL_VERSION = "initial"
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")  # vLLM 0.32's, not one path more
UNCHECKED = ("/fake/", "/health")  # the test's own controls and the probes


def make_app(served_model: str, api_key: str | None = None) -> FastAPI:
    app = FastAPI(title="fake vLLM server (test double)")
    state: dict[str, Any] = {}
    behaviour = {"fail_reload": False}

    @app.middleware("http")
    async def check_key(request: Request, call_next):
        keyed = api_key is None or request.headers.get("authorization") == f"Bearer {api_key}"
        path = request.url.path
        if not keyed and not path.startswith(UNCHECKED):
            state["unkeyed"].append(f"{request.method} {path}")
            if path.startswith(GUARDED_PREFIX):
                return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return await call_next(request)

    def reset() -> None:
        state.update(
            version=INITIAL_VERSION,
            weights_path=None,
            weights_sha=None,
            paused=False,
            adapters={},
            calls=[],
            unkeyed=[],
        )

    reset()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        names = [served_model, *state["adapters"]]
        return {"object": "list", "data": [{"id": name, "object": "model"} for name in names]}

    @app.post("/pause")
    def pause(mode: str = Query("abort")) -> dict[str, str]:
        state["calls"].append(f"pause:{mode}")
        state["paused"] = True
        return {"status": "paused"}

    @app.post("/resume")
    def resume() -> dict[str, str]:
        state["calls"].append("resume")
        state["paused"] = False
        return {"status": "resumed"}

    @app.post("/collective_rpc")
    def collective_rpc(body: dict[str, Any] = Body(...)) -> dict[str, Any]:
        method = body.get("method")
        state["calls"].append(f"rpc:{method}")
        if method != "reload_weights":
            raise HTTPException(400, f"the fake server knows only reload_weights, not {method}")
        if not state["paused"]:
            raise HTTPException(409, "reload while serving: pause first")
        if behaviour["fail_reload"]:
            raise HTTPException(500, "worker failed to reload weights")
        folder = Path(body.get("kwargs", {}).get("weights_path", ""))
        files = sorted(folder.glob("*.safetensors"))
        if not (folder / "config.json").exists() or not files:
            raise HTTPException(400, f"{folder} holds no HF weights (config.json, *.safetensors)")
        digest = hashlib.sha256()
        for file in files:
            digest.update(file.read_bytes())
        state.update(weights_path=str(folder), weights_sha=digest.hexdigest())
        return {"results": [None]}

    @app.post("/update_weight_version")
    def update_weight_version(new_version: str = Body(..., embed=True)) -> dict[str, Any]:
        state["calls"].append(f"version:{new_version}")
        state["version"] = new_version
        return {"success": True, "new_version": new_version}

    @app.get("/weight_info")
    def weight_info() -> dict[str, str]:
        return {"weight_version": state["version"]}

    @app.post("/v1/load_lora_adapter")
    def load_lora_adapter(body: dict[str, Any] = Body(...)) -> str:
        name, folder = body["lora_name"], Path(body["lora_path"])
        state["calls"].append(f"load_lora:{name}")
        if name in state["adapters"]:
            raise HTTPException(400, f"The lora adapter '{name}' has already been loaded.")
        if not (folder / "adapter_config.json").exists():
            raise HTTPException(400, f"{folder} holds no peft adapter (adapter_config.json)")
        state["adapters"][name] = str(folder)
        return f"Success: LoRA adapter '{name}' added successfully."

    @app.post("/v1/unload_lora_adapter")
    def unload_lora_adapter(body: dict[str, Any] = Body(...)) -> str:
        name = body["lora_name"]
        state["calls"].append(f"unload_lora:{name}")
        if state["adapters"].pop(name, None) is None:
            raise HTTPException(404, f"The lora adapter '{name}' cannot be found.")
        return f"Success: LoRA adapter '{name}' removed successfully."

    @app.get("/fake/state")
    def fake_state() -> dict[str, Any]:
        return state

    @app.post("/fake/restart")
    def fake_restart() -> dict[str, str]:
        reset()
        behaviour["fail_reload"] = False
        return {"status": "restarted"}

    @app.post("/fake/fail-reload")
    def fake_fail_reload(on: bool = Body(..., embed=True)) -> dict[str, bool]:
        behaviour["fail_reload"] = on
        return behaviour

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model", default="policy")
    parser.add_argument("--api-key", default=None, help="checked as vLLM checks --api-key")
    args = parser.parse_args()
    app = make_app(args.served_model, args.api_key)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
