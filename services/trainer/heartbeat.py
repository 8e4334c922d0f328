"""A heartbeat file in the run folder while the trainer waits on another service.

On Kubernetes the trainer's liveness probe is progress: "something in the run folder changed in
the last 90 minutes" (deploy/k8s/base/trainer.yaml). A rollout step writes metrics, but while
the trainer waits on a compile or a gate it writes nothing, and a 400-task gate can take longer
than the probe's window; the heartbeat keeps a waiting trainer alive without hiding a stuck
one (a hung step still goes silent).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HEARTBEAT_FILE = "heartbeat"
HEARTBEAT_EVERY_S = 60.0


@contextmanager
def heartbeat(folder: Path, every_s: float = HEARTBEAT_EVERY_S) -> Iterator[Path]:
    """Touch `folder/heartbeat` now and every `every_s` seconds until the block ends."""
    path = Path(folder) / HEARTBEAT_FILE
    stop = threading.Event()

    def beat() -> None:
        while True:
            path.touch()
            if stop.wait(every_s):
                return

    thread = threading.Thread(target=beat, name="trainer-heartbeat", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join()
