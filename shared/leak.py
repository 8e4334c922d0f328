"""The gold firewall: deployable skill text must not carry product ids, task ids or gold facts.

One function, `find_leaks`, serves the registry (on every chunk version and eligible card it
stores, without gold) and the analyst (on every card, cluster, chunk and candidate, with the
`GoldFacts` of the task it investigated). Findings name the rule and the text that matched.

Plain substring checks are easy to evade, so the text is normalized before any rule runs:
HTML entities and percent-encoding decoded, Unicode NFKC, accents dropped, Cyrillic and Greek
look-alikes folded to Latin, zero-width and other format characters removed, casefolded. Each
rule then reads one of three views of it:

- `norm`: the normalized text, whitespace collapsed (patterns with word boundaries);
- `cased`: the same before casefolding (is a word that is also a brand written as a name?);
- `compact`: letters and digits only (a gold term written with extra spaces, dashes or dots,
  or with none: `StudioProWireless` is the title fragment `studio pro wireless`).

Gold terms are normalized the same way, so case, spacing and look-alikes never hide a match.
Whether a word is "ordinary" (a brand that is also a verb, a title word that names a product
line) is read from English word frequencies (`wordfreq`), never from a hand list.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from text_to_num import alpha2digit

from shared.chinese_numerals import arabic_numerals

# Minimum lengths (compact characters) below which a gold term is too generic to be a leak.
MIN_TERM_CHARS = {
    "title": 6, "brand": 3, "option": 6, "model_number": 5, "product_id": 4,
    "model_code": 3,  # a letter-digit mix as short as XM5 or Q30 names one model
    "line": 4,  # a product-line name (Soundcore)
}  # fmt: skip
# A word at least this common in English (Zipf scale: log10 of uses per billion words, so 2 is
# once in ten million) is an ordinary word: not a product-line name, and a brand spelled like
# it may be that word ("beats" the verb). Rarer title words name the instance (Soundcore: 0).
ORDINARY_WORD_ZIPF = 2.0
# A price written without a currency sign or cents leaks from this many digits (348 does; 45
# alone is any number, "$45" is a price).
MIN_BARE_PRICE_DIGITS = 3
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
# Words after a number that make it a count, not an id ("A task: 30 steps").
_COUNT_NOUNS = (
    r"(?:steps?|turns?|actions?|clicks?|pages?|results?|items?|quer(?:y|ies)|candidates?|"
    r"options?|words?|tasks?|minutes?|seconds?|times?|tries|attempts?|rounds?|episodes?|"
    r"percent|%)"
)
_PATTERNS: dict[str, re.Pattern[str]] = {
    # "asin", also spelled out with one repeated separator (a.s.i.n, A S I N); "as in" is not.
    "asin_word": re.compile(r"(?<![0-9a-z])a([.\-_\s]?)s\1i\1n(?![0-9a-z])"),
    # B0 + 8 letters or digits as a whole token (ShopSim and Amazon ids).
    "product_id": re.compile(r"(?<![0-9a-z])b0[0-9a-z]{8}(?![0-9a-z])"),
    # 10+ digits in a run, also split by single spaces, dashes, dots or commas.
    "long_digit_run": re.compile(r"\d(?:[\s\-.,]?\d){9,}"),
    # task ids: task + optional separator + digits, and the Chinese word for task; a number
    # that counts something ("task: 30 steps") is not an id.
    "task_id": re.compile(
        rf"(?:(?<![0-9a-z])task[\s\-_#:.]{{0,2}}|任务[\s\-_#:：]{{0,2}})\d+(?!\d)"
        rf"(?!\s*{_COUNT_NOUNS}(?![a-z]))"
    ),
}
# The id shape with the letter O for the zero (BOABCDEFGH); a word of that shape
# ("boundaries") is not an id.
_ID_WITH_LETTER_O = re.compile(r"(?<![0-9a-z])bo[0-9a-z]{8}(?![0-9a-z])")
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

# Letter runs that make a letter-digit token a quantity, an ordinal or a phrase, not a model
# code (64GB, 500ml, 2nd, 3-in-1, A12 read as "a 12").
_NOT_CODE_LETTERS_TEXT = """
    mm cm m km in inch inches ft feet yd oz floz lb lbs g kg mg ml l ltr gal qt pt
    gb tb mb kb w kw v mah wh ah hz khz ghz db mp k p x pcs pc pk pack packs ct count
    st nd rd th by of and to for h hr hrs min s sec a an i at on or is it no up
    """
_NOT_CODE_LETTERS = frozenset(_NOT_CODE_LETTERS_TEXT.split())
# Standards and formats a title may name that are ordinary advice, not one model.
_STANDARD_CODES_TEXT = """
    mp3 mp4 usb2 usb3 ddr4 ddr5 h264 h265 4k 8k 5g 4g 3g wifi6 wpa2 wpa3 a4 a5 ps4 ps5
    i3 i5 i7 i9 m2 ipx4 ipx5 ipx6 ipx7 ipx8 ip67 ip68 qi2 cr2032
    """
_STANDARD_CODES = frozenset(_STANDARD_CODES_TEXT.split())
# Digits a code may be written with as letters (O for zero, l or I for one).
_CODE_CHARS = {"0": "[0o]", "1": "[1li]"}
# A brand that also is an ordinary word is that word when a determiner or an -ing word follows
# ("a query beats the rest", "nothing beats checking"), unless a word of choosing precedes it
# ("prefer beats the most"); "prefer beats headphones" and "Beats" mid-sentence are the brand.
_CHOOSING_TEXT = """
    prefer prefers choose pick buy select get try favor favour want recommend like from by
    than over with brand brands
    """
_CHOOSING = frozenset(_CHOOSING_TEXT.split())
_DETERMINERS_TEXT = """
    a an the this that these those any every each all most some other others another its
    their his her your our my it them one no both either neither
    """
_DETERMINERS = frozenset(_DETERMINERS_TEXT.split())
# A price written as a price: a currency before or after the number, or cents.
_AMOUNT = re.compile(
    r"(?P<before>(?:us\$|\$|usd|eur|€|£|¥|rmb|cny)\s?)?"
    r"(?<![\d.,])(?P<number>\d{1,3}(?:[,.]\d{3})+|\d+)(?:[.,](?P<cents>\d{1,2}))?(?![\d])"
    r"(?![.,]\d)"
    r"(?P<after>\s?(?:dollars?|bucks|usd|元|圆|块)(?:\s(?:and\s)?(?P<word_cents>\d{1,2})\s?cents?)?)?"
    r"(?P<percent>\s?(?:%|percent))?"
)
MAX_DECODE_ROUNDS = 3

_NEXT_WORD = re.compile(r"\W*(\w*)")
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
    price: float | None = None  # the gold variant's price

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GoldFacts:
        """From the firewall contract's `gold` object (missing fields are empty); a `price`
        that is not a finite number >= 0 is a ValueError."""
        return cls(
            task_id=data.get("task_id") or "",
            goal_title=data.get("goal_title") or "",
            purchase_title=data.get("purchase_title") or "",
            visited_titles=tuple(data.get("visited_titles") or ()),
            brands_seen=tuple(data.get("brands_seen") or ()),
            gold_options=tuple(data.get("gold_options") or ()),
            product_ids=tuple(data.get("product_ids") or ()),
            price=_contract_price(data.get("price")),
        )

    def as_json(self) -> dict[str, Any]:
        """The firewall contract's `gold` object."""
        return {name: list(v) if isinstance(v, tuple) else v for name, v in asdict(self).items()}

    @property
    def titles(self) -> tuple[str, ...]:
        return tuple(t for t in (self.goal_title, self.purchase_title, *self.visited_titles) if t)


def _contract_price(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"gold.price must be a number >= 0, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"gold.price must be finite, not {value!r}")
    return float(value)


def decode(text: str) -> str:
    """HTML entities and percent-encoding undone, nested ones too (`&amp;#65;` is `A`)."""
    for _ in range(MAX_DECODE_ROUNDS):
        decoded = unquote(html.unescape(text))
        if decoded == text:
            break
        text = decoded
    return text


def _fold(text: str) -> str:
    """Decoded, NFKC, accents and format characters dropped, look-alikes folded; case kept."""
    text = unicodedata.normalize("NFKC", decode(text)).translate(_CONFUSABLES)
    decomposed = unicodedata.normalize("NFKD", text)
    kept = (
        char
        for char in decomposed
        if unicodedata.category(char) not in ("Mn", "Cf") and char not in "\u200b\u2060\ufeff"
    )
    text = unicodedata.normalize("NFKC", "".join(kept)).translate(_CONFUSABLES)
    return re.sub(r"\s+", " ", text).strip()


@lru_cache(maxsize=8192)  # gold terms are normalized again for every text checked
def normalize(text: str) -> str:
    """Decoded, NFKC, accents and format characters dropped, look-alikes folded, casefolded."""
    return re.sub(r"\s+", " ", _fold(text).casefold()).strip()


def compact(normalized: str) -> str:
    """Letters and digits only: spacing and punctuation can no longer split a term."""
    return "".join(char for char in normalized if char.isalnum())


def words(normalized: str) -> list[str]:
    return re.findall(r"\w+", normalized.replace("_", " "))


@lru_cache(maxsize=65536)
def is_ordinary_word(word: str) -> bool:
    """As common in English as ORDINARY_WORD_ZIPF or more (wordfreq's frequency lists)."""
    from wordfreq import zipf_frequency  # imported on first use: 0.2-2 s a registry rarely needs

    return zipf_frequency(word, "en") >= ORDINARY_WORD_ZIPF


@dataclass(frozen=True)
class _Views:
    norm: str
    cased: str
    compact: str

    @classmethod
    def of(cls, text: str) -> _Views:
        cased = _fold(text)
        norm = re.sub(r"\s+", " ", cased.casefold()).strip()
        return cls(norm, cased, compact(norm))


def find_leaks(text: str, *, gold: GoldFacts | None = None) -> list[LeakFinding]:
    """Every leak in `text`: the fixed patterns, plus the gold facts when given."""
    views = _Views.of(text)
    findings = [
        LeakFinding(rule, match.group(0))
        for rule, pattern in _PATTERNS.items()
        for match in pattern.finditer(views.norm)
    ]
    findings += [LeakFinding("product_id", m.group(0)) for m in _SPACED_ID.finditer(views.norm)]
    findings += [
        LeakFinding("product_id", m.group(0))
        for m in _ID_WITH_LETTER_O.finditer(views.norm)
        if not is_ordinary_word(m.group(0))
    ]
    if gold is not None:
        findings += _gold_findings(views, gold)
    return _unique(findings)


def admitted(text: str, gold: GoldFacts | None = None) -> bool:
    return not find_leaks(text, gold=gold)


def _gold_findings(views: _Views, gold: GoldFacts) -> list[LeakFinding]:
    findings: list[LeakFinding] = []
    for product_id in gold.product_ids:
        findings += _product_id_findings(views, product_id)
    if gold.task_id:
        findings += _task_id_findings(views, gold.task_id)
    if gold.price is not None:
        findings += _price_findings(views, gold.price)
    for title in gold.titles:
        findings += _title_findings(views, title)
    for line in line_names(gold.titles, gold.brands_seen):
        if _word_matches(views, line):
            findings.append(LeakFinding("gold_line", line))
    for brand in gold.brands_seen:
        if _brand_matches(views, brand):
            findings.append(LeakFinding("gold_brand", brand))
    for option in gold.gold_options:
        term = compact(normalize(option))
        if len(term) >= MIN_TERM_CHARS["option"] and term in views.compact:
            findings.append(LeakFinding("gold_option", option))
    return findings


def _product_id_findings(views: _Views, product_id: str) -> list[LeakFinding]:
    """A given id, whole or cut in two halves written apart (each half long enough alone)."""
    term = compact(normalize(product_id))
    least = MIN_TERM_CHARS["product_id"]
    if len(term) < least:
        return []
    if term in views.compact:
        return [LeakFinding("product_id", product_id)]
    for cut in range(least, len(term) - least + 1):
        if term[:cut] in views.compact and term[cut:] in views.compact:
            return [LeakFinding("product_id", product_id)]
    return []


def _task_id_findings(views: _Views, task_id: str) -> list[LeakFinding]:
    term = compact(normalize(task_id))
    findings = [LeakFinding("task_id", task_id)] if term and term in views.compact else []
    digits = "".join(re.findall(r"\d", term))
    number = digits.lstrip("0")
    # The task's number alone is as identifying as the id: with or without its leading zeros
    # when the number itself is long enough, else only as written in the id (000042).
    if len(number) >= MIN_TASK_DIGITS:
        pattern = rf"(?<!\d)0*{number}(?!\d)"
    elif len(digits) >= MIN_TASK_DIGITS:
        pattern = rf"(?<!\d){digits}(?!\d)"
    else:
        return findings
    if re.search(pattern, views.norm):
        shown = number if len(number) >= MIN_TASK_DIGITS else digits
        findings.append(LeakFinding("task_id", shown))
    return findings


def _price_findings(views: _Views, price: float) -> list[LeakFinding]:
    """The gold price as any amount equal to it: `$348.00`, `348,00`, `USD 348`, `348`, "three
    hundred forty-eight dollars", 三百四十八元, 叁佰肆拾捌 (full-width digits are NFKC's). A bare
    integer counts from MIN_BARE_PRICE_DIGITS digits; a percentage is never a price."""
    text = alpha2digit(arabic_numerals(views.norm), "en")  # Chinese numerals, number words
    return [
        LeakFinding("gold_price", match.group(0).strip())
        for match in _AMOUNT.finditer(text)
        if not match["percent"] and _is_written_price(match, price)
    ]


def _is_written_price(match: re.Match[str], price: float) -> bool:
    number = re.sub(r"[,.]", "", match["number"])
    cents = match["cents"] or match["word_cents"] or ""
    value = int(number) + (int(cents) / 10 ** len(cents) if cents else 0)
    if abs(value - price) >= 0.005:
        return False
    written_as_price = match["before"] or match["after"] or cents
    return bool(written_as_price) or len(number.lstrip("0")) >= MIN_BARE_PRICE_DIGITS


def _title_findings(views: _Views, title: str) -> list[LeakFinding]:
    findings = []
    term = compact(normalize(title))
    if len(term) >= MIN_TERM_CHARS["title"] and term in views.compact:
        return [LeakFinding("gold_title", title)]
    found = [code for code in model_codes(title) if _code_matches(views, code)]
    findings += [LeakFinding("gold_model_number", code) for code in _outermost(found)]
    for fragment in _title_fragments(title):
        if fragment.replace(" ", "") in views.compact:  # spaced, dashed or glued alike
            findings.append(LeakFinding("gold_title", fragment))
    return findings


@lru_cache(maxsize=4096)
def model_codes(title: str) -> tuple[str, ...]:
    """A title's model codes: every stretch of its tokens (hyphens and underscores joined, and
    each hyphen part) of MIN_TERM_CHARS["model_code"]+ characters that mixes digits with a
    letter run that is no unit, ordinal or short word (XM5, 1000XM5, WH1000XM5, 760NC; not
    64GB, 2nd, 3-in-1), and is no common standard (MP3, USB3)."""
    found: list[str] = []
    for token in re.findall(r"[0-9a-z]+(?:[\-_][0-9a-z]+)*", normalize(title)):
        for part in (re.sub(r"[\-_]", "", token), *re.split(r"[\-_]", token)):
            runs = re.findall(r"\d+|[a-z]+", part)  # alternating: a stretch of 2+ mixes
            for start in range(len(runs)):
                for end in range(start + 2, len(runs) + 1):
                    code = "".join(runs[start:end])
                    letters = [run for run in runs[start:end] if run.isalpha()]
                    if (
                        len(code) >= MIN_TERM_CHARS["model_code"]
                        and any(run not in _NOT_CODE_LETTERS for run in letters)
                        and code not in _STANDARD_CODES
                        and code not in found
                    ):
                        found.append(code)
    return tuple(found)


def _code_matches(views: _Views, code: str) -> bool:
    """A code alone, split by spaces or hyphens, or with O/l for 0/1; a long one also glued
    to other text."""
    if len(code) >= MIN_TERM_CHARS["model_number"] and code in views.compact:
        return True
    return bool(_code_pattern(code).search(views.norm))


@lru_cache(maxsize=4096)
def _code_pattern(code: str) -> re.Pattern[str]:
    body = r"[\s\-_]?".join(_CODE_CHARS.get(char, re.escape(char)) for char in code)
    return re.compile(rf"(?<![0-9a-z]){body}(?![0-9a-z])")


def _outermost(codes: list[str]) -> list[str]:
    """The codes no longer found code contains (WH1000XM5, not also XM5)."""
    return [code for code in codes if not any(code != other and code in other for other in codes)]


@lru_cache(maxsize=1024)
def line_names(titles: tuple[str, ...], brands: tuple[str, ...]) -> tuple[str, ...]:
    """Product-line and sub-brand names: title words of MIN_TERM_CHARS["line"]+ Latin letters
    that are no ordinary English word, no generic word and no brand (brands have their rule)."""
    skip = {compact(normalize(brand)) for brand in brands} | GENERIC_WORDS
    found: list[str] = []
    for title in titles:
        for word in words(normalize(title)):
            if (
                re.fullmatch(r"[a-z]+", word)
                and len(word) >= MIN_TERM_CHARS["line"]
                and word not in skip
                and word not in found
                and not is_ordinary_word(word)
            ):
                found.append(word)
    return tuple(found)


@lru_cache(maxsize=4096)
def _title_fragments(title: str) -> tuple[str, ...]:
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
    return tuple(fragments)


def _brand_matches(views: _Views, brand: str) -> bool:
    term = compact(normalize(brand))
    if len(_CJK.findall(term)) >= MIN_CJK_BRAND_CHARS:
        return term in views.compact
    if len(_LATIN.findall(term)) < MIN_TERM_CHARS["brand"]:
        return False
    # A brand spelled like an ordinary word counts only where it is written as a name.
    ordinary = is_ordinary_word(term)
    hits = _word_hits(views, term)
    return any(not ordinary or _written_as_name(text, match) for text, match in hits)


def _word_matches(views: _Views, term: str) -> bool:
    return any(True for _ in _word_hits(views, term))


def _word_hits(views: _Views, term: str) -> Iterator[tuple[str, re.Match[str]]]:
    """A term as a whole word, its letters possibly split by separators ("A n k e r", "An-ker")
    or written with digits for letters ("S0ny"), in the cased view."""
    spaced = (_SEPARATOR + "{0,2}").join(re.escape(char) for char in term)
    pattern = re.compile(rf"(?<![0-9a-z]){spaced}(?![0-9a-z])", re.IGNORECASE)
    for text in (views.cased, _unleet(views.cased)):
        for match in pattern.finditer(text):
            yield text, match


def _written_as_name(text: str, match: re.Match[str]) -> bool:
    """In capitals, capitalized inside a sentence, after a word of choosing, or not followed by
    a determiner or an -ing word (see _CHOOSING)."""
    letters = [char for char in match.group(0) if char.isalpha()]  # 3+: a brand's minimum
    if all(char.isupper() for char in letters):
        return True
    if letters[0].isupper() and not _starts_sentence(text, match.start()):
        return True
    before = re.search(r"(\w+)\W*$", text[: match.start()])
    if before and before.group(1).casefold() in _CHOOSING:
        return True
    following = _NEXT_WORD.match(text, match.end())[1].casefold()  # \w* always matches
    return not (following in _DETERMINERS or following.endswith("ing"))


def _starts_sentence(text: str, index: int) -> bool:
    before = text[:index].rstrip()
    return not before or before[-1] in ".!?:;•*-–—()\"'"  # a sentence, a clause, a list item


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
