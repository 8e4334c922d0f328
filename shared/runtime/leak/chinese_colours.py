"""Chinese colour words read as the CSS colour names they are (墨绿 is forest green, 海军蓝 navy),
so that the firewall's option rules read a colour option translated into Chinese as they read it
in English.

The words and their names come from `chinese_colours.json`, derived from CC-CEDICT by
`scripts/derive_chinese_colours.py` (every dictionary word of 2-4 characters glossed as a CSS
colour name): no library the firewall uses holds Chinese colour names. A word is read at its
longest, with the names of the shorter words it starts with (天蓝色 azure, 天蓝 sky blue; 海军
in 海军蓝, the 蓝 left over is no word alone), and a 色 after it ("colour") taken into it.
Whether the text *chooses* the colour is read from the Chinese words around it, as the English
rules read "pick red" or "the red model": a word of choosing before it, or an option noun after
it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_TABLE = json.loads(Path(__file__).with_name("chinese_colours.json").read_text(encoding="utf-8"))
COLOUR_WORDS: dict[str, tuple[str, ...]] = {
    word: tuple(names) for word, names in _TABLE["words"].items()
}
_LONGEST = max(map(len, COLOUR_WORDS))
# The Chinese of the English rules' words of choosing and option nouns (_CHOOSING, _OPTION_CONTEXT
# and _PRODUCT_NOUNS in shared/runtime/leak): "选红色" is "pick red", "红色款" "the red model".
_CHOOSING = (
    "选", "选择", "挑", "挑选", "选用", "买", "购买", "要", "想要", "优先", "首选", "推荐", "偏好",
    "喜欢", "认准", "换成", "颜色", "配色",
)  # fmt: skip
_OPTION_NOUNS = ("款", "版", "型号", "系列", "颜色", "色号", "款式", "配色", "尺码", "版本")
_BEFORE_CONTEXT = re.compile(r"[\s:：,，、]*$")  # spacing or a colon between "颜色：" and the word
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


@dataclass(frozen=True)
class ColourWord:
    written: str  # as in the text, with its 色
    names: tuple[str, ...]  # the CSS colour names the dictionary glosses it as
    chosen: bool  # after a word of choosing, or before an option noun


@lru_cache(maxsize=1024)
def colour_words(text: str) -> tuple[ColourWord, ...]:
    """Every Chinese colour word of `text`, written at its longest, with the names of every
    dictionary word that starts there (天蓝色 is azure, and its 天蓝 sky blue)."""
    found, at = [], 0
    while at < len(text):
        words = _words_at(text, at)
        if not words:
            at += 1
            continue
        end = at + len(words[0])
        if not words[0].endswith("色") and text.startswith("色", end):
            end += 1
        names = tuple(dict.fromkeys(name for word in words for name in COLOUR_WORDS[word]))
        found.append(ColourWord(text[at:end], names, _chosen(text, at, end)))
        at = end
    return tuple(found)


def _words_at(text: str, at: int) -> list[str]:
    """The dictionary's colour words that start at `at`, longest first."""
    if not _HAN.match(text, at):
        return []
    spans = (text[at : at + size] for size in range(_LONGEST, 1, -1))
    return [span for span in spans if span in COLOUR_WORDS]


def _chosen(text: str, start: int, end: int) -> bool:
    before = _BEFORE_CONTEXT.sub("", text[:start])
    after = text[end:].removeprefix("的")
    return before.endswith(_CHOOSING) or after.startswith(_OPTION_NOUNS)
