"""The trainer's console lines as JSON log records (`--json-logs`, TRAINER_JSON_LOGS), the shape
the services log with `*_JSON_LOGS` (`time`, `level`, `logger`, `message`, one object per line on
stderr), for a log collector reading `kubectl logs`.

The run speaks through `RunContext.console`, a rich Console; `LogConsole` stands in for it and
turns each `print` into an INFO record of logger `intraskill.trainer`, markup stripped. The
progress bar is off (a collector wants lines, not redraws); each step's summary is a record.
"""

from __future__ import annotations

import logging
import logging.config
import sys
from typing import Any

from rich.text import Text

from shared.kit.observability import log_config

logger = logging.getLogger("intraskill.trainer")


class LogConsole:
    """What the run needs of rich's Console, as log records: `print` is one INFO line."""

    structured = True  # the run skips its progress bar and logs step summaries instead
    is_terminal = False

    def print(self, *objects: Any, **_style: Any) -> None:
        logger.info(" ".join(_plain(item) for item in objects))

    log = print


def _plain(item: Any) -> str:
    return Text.from_markup(item).plain if isinstance(item, str) else str(item)


def use_json_logs() -> LogConsole:
    """Send every log record (the trainer's, its libraries') to stderr as one JSON object per
    line, without the Hugging Face progress bars (loading and writing weights) that would sit
    between them; returns the console the run should print through."""
    from huggingface_hub.utils import disable_progress_bars

    logging.config.dictConfig(log_config(json_logs=True))
    # one INFO line per HTTP request (every gate poll) would drown the run's; the plain console
    # shows none of them either
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    disable_progress_bars()  # transformers reads this when it is imported (later, lazily)
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    return LogConsole()
