"""The gold firewall: deployable skill text must not carry product ids, task ids or gold facts.

One function, `find_leaks`, serves the registry (on every chunk version and eligible card it
stores, without gold) and the analyst (on every card, cluster, chunk and candidate, with the
`GoldFacts` of the task it investigated). Findings name the rule and the text that matched.

Plain substring checks are easy to evade, so the text is normalized before any rule runs:
Unicode NFKC, accents dropped, Cyrillic and Greek look-alikes folded to Latin, zero-width and
other format characters removed, casefolded. Each rule then reads one of two views of it:

- `norm`: the normalized text, whitespace collapsed (patterns with word boundaries);
- `compact`: letters and digits only (a gold term written with extra spaces, dashes or dots,
  or with none: `StudioProWireless` is the title fragment `studio pro wireless`).

Gold terms are normalized the same way, so case, spacing and look-alikes never hide a match.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# Minimum lengths (compact characters) below which a gold term is too generic to be a leak.
MIN_TERM_CHARS = {"title": 6, "brand": 3, "option": 6, "model_number": 5, "product_id": 4}
# The gold task's number alone is a leak from this many digits (leading zeros count).
MIN_TASK_DIGITS = 3
MIN_CJK_BRAND_CHARS = 2
# A run of this many compact characters of a CJK title is a copied fragment.
CJK_FRAGMENT_CHARS = 8
# Runs of consecutive title words that count as a copied fragment: (words, how many of them
# must be specific, i.e. not generic category words and at least SPECIFIC_WORD_CHARS long).
FRAGMENT_RULES = ((3, 2), (4, 1))
SPECIFIC_WORD_CHARS = 3

# Look-alikes an adversary swaps in for Latin letters (upper and lower case kept apart, since
# a Greek capital Nu looks like N and its small letter like v).
_CONFUSABLES = str.maketrans(
    {
        # Cyrillic capitals
        "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "I", "Ј": "J", "К": "K",
        "М": "M", "О": "O", "Р": "P", "Ѕ": "S", "Т": "T", "Х": "X", "У": "Y", "Ԛ": "Q",
        "Ԝ": "W", "Ү": "Y",
        # Cyrillic small letters
        "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j",
        "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s", "т": "t",
        "у": "y", "х": "x", "ԝ": "w", "ү": "y", "ӏ": "l",
        # Greek capitals
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
        "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
        # Greek small letters
        "α": "a", "β": "b", "γ": "y", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
        "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w",
        # Latin look-alikes outside ASCII that NFKC keeps
        "ı": "i", "ȷ": "j", "ɡ": "g", "ℓ": "l",
    }
)  # fmt: skip

_SEPARATOR = r"[\s.\-_·•*/|'’+]"
_PATTERNS: dict[str, re.Pattern[str]] = {
    # "asin", also spelled out with one repeated separator (a.s.i.n, A S I N); "as in" is not.
    "asin_word": re.compile(r"(?<![0-9a-z])a([.\-_\s]?)s\1i\1n(?![0-9a-z])"),
    # B0 + 8 letters or digits as a whole token (ShopSim and Amazon ids).
    "product_id": re.compile(r"(?<![0-9a-z])b0[0-9a-z]{8}(?![0-9a-z])"),
    # 10+ digits in a run, also split by single spaces, dashes or dots.
    "long_digit_run": re.compile(r"\d(?:[\s\-.]?\d){9,}"),
    # task ids: task + optional separator + digits, and the Chinese word for task.
    "task_id": re.compile(r"(?<![0-9a-z])task[\s\-_#:.]{0,2}\d+|任务[\s\-_#:：]{0,2}\d+"),
}
# The id shape with a separator between some characters ("B0C-7X2-LQ9P", "b 0 c 7 ...").
_SPACED_ID = re.compile(rf"(?<![0-9a-z])b{_SEPARATOR}?0(?:{_SEPARATOR}?[0-9a-z]){{8}}(?![0-9a-z])")

# Words that name a kind of product or a common property: a title fragment made only of
# these is category language, not a copied instance title.
_GENERIC_TEXT = """
    a an and the for with of in on to by or from set pack pcs piece pieces kit new
    wireless bluetooth noise canceling cancelling cancellation active hybrid over ear on-ear
    in-ear headphones headphone earbuds earphones headset lightweight portable compact mini
    smart home kitchen office outdoor indoor travel sports gaming pro plus max ultra lite
    black white blue red green grey gray silver gold pink purple yellow brown beige navy
    small medium large extra size color colour edition standard premium deluxe classic
    men women mens womens kids unisex adult baby cotton leather plastic steel stainless metal
    wood wooden glass rechargeable battery usb charger cable adapter stand holder case cover
    bag bottle cup mug shoes shoe shirt t-shirt jacket pants dress socks watch phone laptop
    tablet camera speaker keyboard mouse monitor lamp light led chair table desk bed pillow
    blanket towel brush cleaner vacuum washer machine maker oven heater fan filter water
    coffee tea organic natural fresh original long short high low slim thin thick soft hard
    waterproof durable professional electric cordless automatic digital analog 1 2 3 4 5
"""
GENERIC_WORDS = frozenset(_GENERIC_TEXT.split())

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[a-z]")


@dataclass(frozen=True)
class LeakFinding:
    rule: str
    text: str


@dataclass(frozen=True)
class GoldFacts:
    """What the analyst knows privately about one task; none of it may reach a chunk."""

    task_id: str = ""
    goal_title: str = ""
    purchase_title: str = ""
    visited_titles: tuple[str, ...] = ()
    brands_seen: tuple[str, ...] = ()
    gold_options: tuple[str, ...] = ()
    product_ids: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GoldFacts:
        """From the firewall contract's `gold` object (missing fields are empty)."""
        return cls(
            task_id=data.get("task_id") or "",
            goal_title=data.get("goal_title") or "",
            purchase_title=data.get("purchase_title") or "",
            visited_titles=tuple(data.get("visited_titles") or ()),
            brands_seen=tuple(data.get("brands_seen") or ()),
            gold_options=tuple(data.get("gold_options") or ()),
            product_ids=tuple(data.get("product_ids") or ()),
        )

    def as_json(self) -> dict[str, Any]:
        """The firewall contract's `gold` object."""
        return {name: list(v) if isinstance(v, tuple) else v for name, v in asdict(self).items()}

    @property
    def titles(self) -> tuple[str, ...]:
        return tuple(t for t in (self.goal_title, self.purchase_title, *self.visited_titles) if t)


def normalize(text: str) -> str:
    """NFKC, accents and format characters dropped, look-alikes folded, casefolded."""
    text = unicodedata.normalize("NFKC", text).translate(_CONFUSABLES)
    decomposed = unicodedata.normalize("NFKD", text)
    kept = (
        char
        for char in decomposed
        if unicodedata.category(char) not in ("Mn", "Cf") and char not in "\u200b\u2060\ufeff"
    )
    text = unicodedata.normalize("NFKC", "".join(kept)).translate(_CONFUSABLES).casefold()
    return re.sub(r"\s+", " ", text).strip()


def compact(normalized: str) -> str:
    """Letters and digits only: spacing and punctuation can no longer split a term."""
    return "".join(char for char in normalized if char.isalnum())


def words(normalized: str) -> list[str]:
    return re.findall(r"\w+", normalized.replace("_", " "))


@dataclass(frozen=True)
class _Views:
    norm: str
    compact: str

    @classmethod
    def of(cls, text: str) -> _Views:
        norm = normalize(text)
        return cls(norm, compact(norm))


def find_leaks(text: str, *, gold: GoldFacts | None = None) -> list[LeakFinding]:
    """Every leak in `text`: the fixed patterns, plus the gold facts when given."""
    views = _Views.of(text)
    findings = [
        LeakFinding(rule, match.group(0))
        for rule, pattern in _PATTERNS.items()
        for match in pattern.finditer(views.norm)
    ]
    findings += [LeakFinding("product_id", m.group(0)) for m in _SPACED_ID.finditer(views.norm)]
    if gold is not None:
        findings += _gold_findings(views, gold)
    return _unique(findings)


def admitted(text: str, gold: GoldFacts | None = None) -> bool:
    return not find_leaks(text, gold=gold)


def _gold_findings(views: _Views, gold: GoldFacts) -> list[LeakFinding]:
    findings: list[LeakFinding] = []
    for product_id in gold.product_ids:
        term = compact(normalize(product_id))
        if len(term) >= MIN_TERM_CHARS["product_id"] and term in views.compact:
            findings.append(LeakFinding("product_id", product_id))
    if gold.task_id:
        findings += _task_id_findings(views, gold.task_id)
    for title in gold.titles:
        findings += _title_findings(views, title)
    for brand in gold.brands_seen:
        if _brand_matches(views, brand):
            findings.append(LeakFinding("gold_brand", brand))
    for option in gold.gold_options:
        term = compact(normalize(option))
        if len(term) >= MIN_TERM_CHARS["option"] and term in views.compact:
            findings.append(LeakFinding("gold_option", option))
    return findings


def _task_id_findings(views: _Views, task_id: str) -> list[LeakFinding]:
    term = compact(normalize(task_id))
    findings = [LeakFinding("task_id", task_id)] if term and term in views.compact else []
    digits = "".join(re.findall(r"\d", term))
    # The task's number alone (leading zeros and all) is as identifying as the id.
    if len(digits) >= MIN_TASK_DIGITS and re.search(rf"(?<!\d){digits}(?!\d)", views.norm):
        findings.append(LeakFinding("task_id", digits))
    return findings


def _title_findings(views: _Views, title: str) -> list[LeakFinding]:
    findings = []
    term = compact(normalize(title))
    if len(term) >= MIN_TERM_CHARS["title"] and term in views.compact:
        return [LeakFinding("gold_title", title)]
    for token in model_numbers(title):
        if token in views.compact:
            findings.append(LeakFinding("gold_model_number", token))
    for fragment in _title_fragments(title):
        if fragment.replace(" ", "") in views.compact:  # spaced, dashed or glued alike
            findings.append(LeakFinding("gold_title", fragment))
    return findings


def model_numbers(title: str) -> list[str]:
    """Tokens of a title that look like model numbers: 5+ characters mixing letters and digits
    (hyphens ignored), and the hyphen-separated parts that still do."""
    found: list[str] = []
    for token in re.findall(r"[\w\-]+", normalize(title)):
        for part in (token, *token.split("-")):
            part = part.replace("-", "").replace("_", "")
            if (
                len(part) >= MIN_TERM_CHARS["model_number"]
                and re.search(r"\d", part)
                and re.search(r"[^\W\d_]", part)
                and part not in found
            ):
                found.append(part)
    return found


def _title_fragments(title: str) -> list[str]:
    """Runs of title words specific enough that copying them copies the instance."""
    tokens = words(normalize(title))
    fragments = []
    latin = [t for t in tokens if not _CJK.search(t)]
    for size, needed in FRAGMENT_RULES:
        for start in range(len(latin) - size + 1):
            window = latin[start : start + size]
            specific = [
                t for t in window if t not in GENERIC_WORDS and len(t) >= SPECIFIC_WORD_CHARS
            ]
            if len(specific) >= needed:
                fragments.append(" ".join(window))
    cjk_run = compact(normalize(title))
    for start in range(len(cjk_run) - CJK_FRAGMENT_CHARS + 1):
        window = cjk_run[start : start + CJK_FRAGMENT_CHARS]
        if len(_CJK.findall(window)) >= CJK_FRAGMENT_CHARS - 2:
            fragments.append(window)
    return fragments


def _brand_matches(views: _Views, brand: str) -> bool:
    term = compact(normalize(brand))
    if len(_CJK.findall(term)) >= MIN_CJK_BRAND_CHARS:
        return term in views.compact
    if len(_LATIN.findall(term)) < MIN_TERM_CHARS["brand"]:
        return False
    # A whole word, letters possibly split by separators ("A n k e r", "An-ker").
    spaced = (_SEPARATOR + "{0,2}").join(re.escape(char) for char in term)
    pattern = rf"(?<![0-9a-z]){spaced}(?![0-9a-z])"
    return bool(re.search(pattern, views.norm) or re.search(pattern, _unleet(views.norm)))


# Digits that stand in for letters in a brand name ("S0ny", "Ank3r").
_LEET = str.maketrans(
    {"0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
)


def _unleet(text: str) -> str:
    return text.translate(_LEET)


def _unique(findings: list[LeakFinding]) -> list[LeakFinding]:
    """One finding per rule and matched term, however it was spelled."""
    seen: dict[tuple[str, str], LeakFinding] = {}
    for finding in findings:
        seen.setdefault((finding.rule, compact(normalize(finding.text))), finding)
    return list(seen.values())
