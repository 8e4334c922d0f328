"""How long the gold firewall takes per card: `find_leaks` over the 86 texts of
`tests/analyst/test_firewall.py` (40 safe, 46 evasions) under both of its golds, after one warm-up
pass (imports, the gold's cached terms), median of `--passes` passes; a card is taken as 8
deployable texts. The firewall runs on every card, cluster, chunk and candidate.

    python benchmarks/firewall_speed.py
"""

from __future__ import annotations

import argparse
import statistics
import time

from shared.runtime.leak import find_leaks
from tests.analyst.test_firewall import EN_GOLD, LEAKS, SAFE, ZH_GOLD

TEXTS_PER_CARD = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    texts = [*SAFE, *(text for _, text, _ in LEAKS)]
    golds = (EN_GOLD, ZH_GOLD)
    for text in texts:
        find_leaks(text, gold=EN_GOLD)
    per_text = []
    for _ in range(args.passes):
        started = time.perf_counter()
        for gold in golds:
            for text in texts:
                find_leaks(text, gold=gold)
        per_text.append((time.perf_counter() - started) / (len(golds) * len(texts)))
    median = statistics.median(per_text)
    print(
        f"{len(texts)} texts x {len(golds)} golds: {median * 1e3:.2f} ms per text, "
        f"{TEXTS_PER_CARD * median * 1e3:.1f} ms per card ({TEXTS_PER_CARD} texts)"
    )


if __name__ == "__main__":
    main()
