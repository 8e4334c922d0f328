"""Episode replay: one trajectory, turn by turn (the page the agent saw, its reply, the action
it became), with the reward breakdown. A card's all-wrong group names its full-skill retry's
trace; the console reads it only from under CONSOLE_TRACES_DIR."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from services.console.deps import Login, SettingsDep
from services.console.views import render
from shared.runtime.agent.trajectory import Trajectory

router = APIRouter()


def trace_path(uri: str, root: Path | None) -> Path:
    """The file a `file://` trace URI names, if it lies under `root` (never elsewhere)."""
    if root is None:
        raise HTTPException(404, "episode replay is off: CONSOLE_TRACES_DIR is not set")
    parsed = urlparse(uri)
    path = Path(unquote(parsed.path)).resolve()
    if parsed.scheme != "file" or not path.is_relative_to(root.resolve()):
        raise HTTPException(404, f"the trace {uri} is not under the console's traces folder")
    if not path.is_file():
        raise HTTPException(404, f"the trace {uri} is not (or no longer) there")
    return path


@router.get("/cards/{card_id}/episode")
def card_episode(request: Request, session: Login, settings: SettingsDep, card_id: int) -> Response:
    """The full-skill retry behind a card: the trajectory its all-wrong group recorded."""
    registry = session.registry
    card = registry.get_card(card_id)
    if card.evidence_id is None:
        raise HTTPException(404, f"card {card_id} came from no all-wrong group: no episode")
    evidence = registry.get_evidence(card.evidence_id)
    if not evidence.retry_trace_uri:
        raise HTTPException(404, f"all-wrong group {evidence.id} recorded no retry trace")
    path = trace_path(evidence.retry_trace_uri, settings.traces_dir)
    trajectory = Trajectory.model_validate_json(path.read_text(encoding="utf-8"))
    return render(
        request, "episode.html", session, card=card, evidence=evidence, episode=trajectory
    )
