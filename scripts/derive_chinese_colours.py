"""Derive the firewall's table of Chinese colour words from CC-CEDICT (issue 31).

    .venv/bin/python scripts/derive_chinese_colours.py PATH/cedict_1_0_ts_utf-8_mdbg.txt

No library the firewall uses holds Chinese colour names (webcolors, pypinyin, pykakasi and
unidecode do not), so the table is derived from CC-CEDICT, the community-maintained
Chinese-English dictionary (CC BY-SA 4.0, MDBG), and the CSS colour names of `webcolors`: every
entry of 2 to 4 Chinese characters one of whose English glosses ("red (color)", "forest green",
"olive-green (color)") is a CSS colour name. Single characters are left out: they are ordinary
morphemes as often as colours (金 in 金额 "amount", 白 in 白天 "daytime"), and each basic colour is
in the table as its X色 word (红色 red). Writes shared/runtime/leak/chinese_colours.json.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import webcolors

TABLE = Path(__file__).resolve().parents[1] / "shared" / "runtime" / "leak" / "chinese_colours.json"
_ENTRY = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/$")


def colour_words(lines: list[str]) -> dict[str, list[str]]:
    """simplified word -> the CSS colour names among its glosses, in the dictionary's order."""
    css = {name.casefold() for name in webcolors.names("css3")}
    words: dict[str, list[str]] = {}
    for line in lines:
        entry = _ENTRY.match(line.strip())
        if not entry or not re.fullmatch(r"[\u4e00-\u9fff]{2,4}", entry.group(2)):
            continue
        for gloss in entry.group(3).split("/"):
            name = re.sub(r"\s*\(colou?r\)", "", gloss).strip().casefold().replace("-", " ")
            if name.replace(" ", "") in css and name not in words.get(entry.group(2), []):
                words.setdefault(entry.group(2), []).append(name)
    return dict(sorted(words.items()))


def main(path: str) -> None:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    stamp = next((line.split("=", 1)[1] for line in lines if line.startswith("#! date=")), "")
    words = colour_words(lines)
    source = f"CC-CEDICT of {stamp} (CC BY-SA 4.0, MDBG): glosses that are CSS colour names"
    rows = ",\n".join(
        f"  {json.dumps(w, ensure_ascii=False)}: {json.dumps(n)}" for w, n in words.items()
    )
    TABLE.write_text(
        f'{{"source": {json.dumps(source)},\n "words": {{\n{rows}\n }}\n}}\n', encoding="utf-8"
    )
    print(f"{len(words)} words -> {TABLE}")


if __name__ == "__main__":
    main(sys.argv[1])
