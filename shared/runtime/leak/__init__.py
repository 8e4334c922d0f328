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
Beside the views, the rules read the text as an agent would (`shared/runtime/leak/canonical.py`,
`shared/runtime/leak/numbers.py`): leetspeak with every reading of a digit, kana and Chinese
characters in romaji and pinyin, US and UK spellings, colour codes, and numbers in words, in locale
formats and in simple arithmetic. Whether a word is "ordinary" (a brand that is also a verb) is read
from English word frequencies (`wordfreq`), and whether it is distinctive from the catalog
(`shared/runtime/leak/catalog.py`), never from a hand list. Each finding carries the reading that
matched, so an operator sees why (`reason`).
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property, lru_cache
from typing import Any
from urllib.parse import unquote

from shared.runtime.leak import canonical, chinese_colours
from shared.runtime.leak.catalog import CatalogIndex
from shared.runtime.leak.numbers import Amount, amounts, price_matches

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
# Digits of a model code alone ("model 720" for KX720) name it from this many digits.
MIN_CODE_DIGITS = 3
# A whole gold option shorter than MIN_TERM_CHARS["option"] ("King") counts from this many
# characters, where the text chooses it (see _OPTION_CONTEXT).
MIN_SHORT_OPTION_CHARS = 2
# The gold task's number alone is a leak from this many digits (leading zeros count).
MIN_TASK_DIGITS = 3
MIN_CJK_BRAND_CHARS = 2
# A Latin name is looked for in Chinese characters from this many syllables (Sony: 索尼).
MIN_HAN_NAME_SYLLABLES = 2
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
# A brand or a distinctive title word that also is an ordinary English word counts only where
# the text writes it as a name: in capitals or capitalized inside a sentence, after a word of
# choosing ("prefer beats"), before a product or option noun ("the Aurora one", "shark
# vacuum"), alone as its sentence ("Beats."), or in a sentence about brands ("Shark, that is
# the brand to filter on"). Elsewhere it is the word: "a sale price beats three coupons".
_CHOOSING_TEXT = """
    prefer prefers choose pick buy select get try favor favour want recommend like from by
    than over with brand brands go take set
    """
_CHOOSING = frozenset(_CHOOSING_TEXT.split())
_DETERMINERS_TEXT = """
    a an the this that these those any every each all most some other others another its
    their his her your our my it them one no both either neither
    """
_DETERMINERS = frozenset(_DETERMINERS_TEXT.split())
# Nouns after a name that make it a product's or an option's name ("the Aurora one" only after
# a determiner: "beats one query" is the verb); the catalog's category words count too.
_PRODUCT_NOUNS_TEXT = """
    model models line series version versions edition brand brands product products item items
    variant variants option options size sizes color colors colour colours style finish
    """
_PRODUCT_NOUNS = frozenset(_PRODUCT_NOUNS_TEXT.split())
_BRAND_SENTENCE = re.compile(r"\b(?:brand|brands|maker|manufacturer|label|logo)\b", re.IGNORECASE)
MAX_DECODE_ROUNDS = 3

_NEXT_WORD = re.compile(r"\W*(\w*)")
_PREVIOUS_WORD = re.compile(r"(\w+)\W*$")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[a-z]")
_SENTENCE_END = re.compile(r"[.!?;:•\n]")


@dataclass(frozen=True)
class LeakFinding:
    rule: str
    text: str
    reading: str = ""  # the canonical form that matched, when the text was read ("ソニー → sonii")


def canonical_form(finding: LeakFinding) -> str:
    """The form that matched: the reading when the text was read ("ソニー → sonii ≈ sony"),
    else the finding's own text normalized."""
    return finding.reading or normalize(finding.text)


def reason(finding: LeakFinding) -> str:
    """One line an operator reads: the rule, what matched, and the canonical form of it."""
    return f"{finding.rule}: {finding.text!r} ({canonical_form(finding)})"


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
    # The catalog that distinctiveness is measured against; None: the gold's own titles and ids.
    catalog: CatalogIndex | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GoldFacts:
        """From the firewall contract's `gold` object (missing fields are empty); a `price`
        that is not a finite number >= 0, or a `catalog` that is no list of objects, is a
        ValueError."""
        catalog = data.get("catalog")
        return cls(
            task_id=data.get("task_id") or "",
            goal_title=data.get("goal_title") or "",
            purchase_title=data.get("purchase_title") or "",
            visited_titles=tuple(data.get("visited_titles") or ()),
            brands_seen=tuple(data.get("brands_seen") or ()),
            gold_options=tuple(data.get("gold_options") or ()),
            product_ids=tuple(data.get("product_ids") or ()),
            price=_contract_price(data.get("price")),
            catalog=None if catalog is None else CatalogIndex.from_json(catalog),
        )

    def as_json(self) -> dict[str, Any]:
        """The firewall contract's `gold` object (without the catalog, which stays with it)."""
        facts = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "catalog"}
        return {name: list(v) if isinstance(v, tuple) else v for name, v in facts.items()}

    @property
    def titles(self) -> tuple[str, ...]:
        return tuple(t for t in (self.goal_title, self.purchase_title, *self.visited_titles) if t)

    @property
    def catalog_index(self) -> CatalogIndex:
        return self.catalog or _own_catalog(self.titles, self.product_ids)


@lru_cache(maxsize=256)
def _own_catalog(titles: tuple[str, ...], product_ids: tuple[str, ...]) -> CatalogIndex:
    return CatalogIndex.build(titles, product_ids)


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


@lru_cache(maxsize=8192)
def _term(text: str) -> str:
    """A gold term (or a finding's text) normalized and compact, once per term."""
    return compact(normalize(text))


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
    # The cased text with every leetspeak reading ("P1xel": "Pixel", "Plxel").
    leet: tuple[str, ...] = ()
    # The decoded NFKC text before look-alikes are folded: "Сони" is a Russian word to read
    # aloud, not Latin letters in disguise.
    raw: str = ""

    @classmethod
    def of(cls, text: str) -> _Views:
        cased = _fold(text)
        norm = cased.casefold()  # _fold collapsed and stripped the whitespace already
        raw = unicodedata.normalize("NFKC", decode(text))
        return cls(norm, cased, compact(norm), canonical.leet_readings(cased), raw)

    # Readings computed once per text, on first use (every gold term reads them again).
    @cached_property
    def compact_readings(self) -> tuple[str, ...]:
        """The compact view, then each leetspeak reading of it."""
        return (self.compact, *(compact(text.casefold()) for text in self.leet))

    @cached_property
    def spelled(self) -> str:
        """The normalized text with digit words read as digits (for ids spelled aloud)."""
        return canonical.spelled_digits(self.norm)

    @cached_property
    def spelled_compact(self) -> str:
        return compact(self.spelled)

    @cached_property
    def token_bounds(self) -> tuple[frozenset[int], frozenset[int]]:
        """Where the spelled text's tokens start and end, as offsets in its compact form."""
        starts, ends, offset = set(), set(), 0
        for token in re.findall(r"[^\W_]+", self.spelled):
            starts.add(offset)
            offset += len(compact(token))
            ends.add(offset)
        return frozenset(starts), frozenset(ends)

    @cached_property
    def amounts(self) -> list[Amount]:
        return amounts(self.norm)

    @cached_property
    def colour_words(self) -> tuple[chinese_colours.ColourWord, ...]:
        """Chinese colour words, each with the CSS colour names it reads as."""
        return chinese_colours.colour_words(self.raw)

    @cached_property
    def tokens(self) -> frozenset[str]:
        return frozenset(re.findall(r"[0-9a-z]+", self.norm))


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
    catalog = gold.catalog_index
    findings: list[LeakFinding] = []
    for product_id in gold.product_ids:
        findings += _product_id_findings(views, product_id, catalog)
    if gold.task_id:
        findings += _task_id_findings(views, gold.task_id)
    if gold.price is not None:
        findings += _price_findings(views, gold.price)
    for title in gold.titles:
        findings += _title_findings(views, title, catalog)
    findings += _code_findings(views, gold.titles, catalog)
    for word in name_words(gold.titles, gold.brands_seen, catalog):
        findings += [
            LeakFinding("gold_line", word, read) for read in _name_hits(views, word, catalog)
        ]
    for brand in gold.brands_seen:
        findings += [
            LeakFinding("gold_brand", brand, read) for read in _brand_hits(views, brand, catalog)
        ]
    findings += _option_findings(views, gold.gold_options, catalog)
    return findings


def _product_id_findings(
    views: _Views, product_id: str, catalog: CatalogIndex
) -> list[LeakFinding]:
    """A given id anywhere, spacing ignored and spelled digits read; else its longest fragment
    of 4+ characters, written as whole tokens, that no other id of the catalog holds (an id in
    pieces, its last four)."""
    term = _term(product_id)
    if len(term) < MIN_TERM_CHARS["product_id"]:
        return []
    if term in views.compact or term in views.spelled_compact:
        return [LeakFinding("product_id", product_id)]
    for size in range(len(term) - 1, MIN_TERM_CHARS["product_id"] - 1, -1):
        for start in range(len(term) - size + 1):
            fragment = term[start : start + size]
            if _fragment_written(fragment, views) and not catalog.fragment_elsewhere(
                fragment, term
            ):
                return [LeakFinding("product_id", fragment, f"{fragment} = part of {product_id}")]
    return []


def _fragment_written(fragment: str, views: _Views) -> bool:
    """A fragment written as whole tokens, spacing ignored ("4KX 7R2M" is 4kx7r2m): one
    that starts or ends inside a word is chance ("most 3 candidates" holds "t3ca")."""
    starts, ends = views.token_bounds
    at = views.spelled_compact.find(fragment)
    while at >= 0:
        if at in starts and at + len(fragment) in ends:
            return True
        at = views.spelled_compact.find(fragment, at + 1)
    return False


def _task_id_findings(views: _Views, task_id: str) -> list[LeakFinding]:
    term = _term(task_id)
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
    """Any amount the text writes or computes that is the gold price within the tolerance of
    `numbers.price_matches` (see that module for every form it reads)."""
    return [
        LeakFinding("gold_price", amount.shown, f"{amount.shown} → {amount.value:g} ≈ {price:g}")
        for amount in views.amounts
        if price_matches(amount, price)
    ]


def _title_findings(views: _Views, title: str, catalog: CatalogIndex) -> list[LeakFinding]:
    term = _term(title)
    if len(term) >= MIN_TERM_CHARS["title"] and any(term in r for r in views.compact_readings):
        return [LeakFinding("gold_title", title)]
    found = [code for code in model_codes(title) if _code_matches(views, code)]
    findings = [LeakFinding("gold_model_number", code) for code in _outermost(found)]
    for fragment in _title_fragments(title, catalog):
        glued = fragment.replace(" ", "")  # spaced, dashed or glued alike
        if any(glued in reading for reading in views.compact_readings):
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


def _code_findings(
    views: _Views, titles: tuple[str, ...], catalog: CatalogIndex
) -> list[LeakFinding]:
    """A model code's parts written apart: its digits alone as a number ("model 720" for
    KX720) when MIN_CODE_DIGITS+ long and common in no catalog title, or every part of it as
    its own token ("begins with KX and ends with 720")."""
    tokens = views.tokens
    amounts_written = {a.shown for a in views.amounts if a.written_as_price}
    findings = []
    for code, parts in _code_parts(titles):
        for digits in (p for p in parts if p.isdigit() and len(p) >= MIN_CODE_DIGITS):
            if (
                digits in tokens
                and not catalog.is_common(digits)
                and not any(digits in shown for shown in amounts_written)
            ):
                findings.append(
                    LeakFinding("gold_model_number", digits, f"{digits} = digits of {code}")
                )
        named = [p for p in parts if p.isalpha() and len(p) >= 2 and p not in _NOT_CODE_LETTERS]
        if named and len(parts) > 1 and all(part in tokens for part in parts):
            spaced = " ".join(parts)
            findings.append(LeakFinding("gold_model_number", code, f"{spaced} = {code}"))
    return findings


@lru_cache(maxsize=1024)
def _code_parts(titles: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each model code of the titles with its digit and letter runs."""
    codes = dict.fromkeys(code for title in titles for code in model_codes(title))
    return tuple((code, tuple(re.findall(r"\d+|[a-z]+", code))) for code in codes)


@lru_cache(maxsize=1024)
def name_words(
    titles: tuple[str, ...], brands: tuple[str, ...], catalog: CatalogIndex
) -> tuple[str, ...]:
    """Product-line names and other distinctive title words: MIN_TERM_CHARS["line"]+ Latin
    letters, no generic or category word, common in no share of the catalog's titles (see
    CatalogIndex.is_common), and no brand (brands have their rule)."""
    skip = {_term(brand) for brand in brands} | GENERIC_WORDS
    found: list[str] = []
    for title in titles:
        for word in words(normalize(title)):
            if (
                re.fullmatch(r"[a-z]+", word)
                and len(word) >= MIN_TERM_CHARS["line"]
                and word not in skip
                and word not in found
                and not catalog.is_common(word)
            ):
                found.append(word)
    return tuple(found)


def line_names(titles: tuple[str, ...], brands: tuple[str, ...]) -> tuple[str, ...]:
    """The name words of `titles` that are no ordinary English word (Soundcore)."""
    catalog = _own_catalog(titles, ())
    return tuple(w for w in name_words(titles, brands, catalog) if not is_ordinary_word(w))


@lru_cache(maxsize=4096)
def _title_fragments(title: str, catalog: CatalogIndex) -> tuple[str, ...]:
    """Runs of title words specific enough that copying them copies the instance: words that
    are generic or the catalog's category language are not specific ("hiking boots for women"
    where every title seen sells hiking boots)."""
    tokens = words(normalize(title))
    fragments = []
    latin = [t for t in tokens if not _CJK.search(t)]
    for size, needed in FRAGMENT_RULES:
        for start in range(len(latin) - size + 1):
            window = latin[start : start + size]
            specific = [
                t
                for t in window
                if t not in GENERIC_WORDS
                and len(t) >= SPECIFIC_WORD_CHARS
                and not catalog.is_common(t)
            ]
            if len(specific) >= needed:
                fragments.append(" ".join(window))
    cjk_run = _term(title)
    for start in range(len(cjk_run) - CJK_FRAGMENT_CHARS + 1):
        window = cjk_run[start : start + CJK_FRAGMENT_CHARS]
        if len(_CJK.findall(window)) >= CJK_FRAGMENT_CHARS - 2:
            fragments.append(window)
    return tuple(fragments)


def _brand_hits(views: _Views, brand: str, catalog: CatalogIndex) -> list[str]:
    """The readings under which a brand is in the text ("" for the brand as written)."""
    term = _term(brand)
    if len(_CJK.findall(term)) >= MIN_CJK_BRAND_CHARS:
        if term in views.compact:
            return [""]
        # a Chinese brand in pinyin ("Xiaomi" for 小米)
        spelled = canonical.pinyin_form(term)
        hits = list(_word_hits(views, spelled))
        return [f"{hits[0][1].group(0)} = {spelled} = {brand}"] if hits else []
    if len(_LATIN.findall(term)) < MIN_TERM_CHARS["brand"]:
        return []
    # a brand transcribed is the brand, even one spelled like a word (シャーク is Shark)
    return _name_hits(views, term, catalog) or _transcribed(views.raw, term)


def _name_hits(views: _Views, term: str, catalog: CatalogIndex) -> list[str]:
    """Readings under which a Latin name is in the text: as a word (an ordinary English word
    only where written as a name), or transcribed in kana or Chinese characters."""
    ordinary = is_ordinary_word(term)
    for text, match in _word_hits(views, term):
        if not ordinary or _written_as_name(text, match, catalog):
            # as the text writes it: a leetspeak reading has the cased view's offsets
            written = views.cased[match.start() : match.end()]
            return [f"{written} → {term}" if compact(written.casefold()) != term else ""]
    return [] if ordinary else _transcribed(views.raw, term)


def _transcribed(text: str, term: str) -> list[str]:
    """A Latin name written in another script: the same consonants in order as a whole kana,
    Cyrillic, Greek or Hangul word (canonical.sound_key), or the same sound shape as a run of
    as many Chinese characters as the name has syllables, or one more (canonical.sound_shape:
    Dyson, 戴森);
    a name of one syllable sounds like too many Chinese words (Shark: 萨克斯 sa ke si), so it is
    read in kana only."""
    key = canonical.sound_key(term)
    if len(key) < canonical.MIN_SOUND_KEY:
        return []
    for original, romaji in [*canonical.romaji_words(text), *canonical.other_script_words(text)]:
        if canonical.sound_key(romaji) == key:
            return [f"{original} → {romaji} ≈ {term}"]
    if not canonical.HAN.search(text):
        return []
    shape = canonical.sound_shape(term)
    syllables = canonical.syllable_count(term)
    if syllables < MIN_HAN_NAME_SYLLABLES:
        return []
    for size in range(syllables, min(syllables + 1, canonical.MAX_NAME_SYLLABLES) + 1):
        for original, sound in canonical.han_sound_windows(text, size):
            if sound.heard_as(shape):
                return [f"{original} → {' '.join(canonical.pinyin(original))} ≈ {term}"]
    return []


def _word_hits(views: _Views, term: str) -> Iterator[tuple[str, re.Match[str]]]:
    """A term as a whole word, its letters possibly split by separators ("A n k e r", "An-ker")
    or written with digits for letters ("S0ny", "P1xel"), in the cased view."""
    pattern = _word_pattern(term)
    for text in (views.cased, *views.leet):
        for match in pattern.finditer(text):
            yield text, match


@lru_cache(maxsize=4096)
def _word_pattern(term: str) -> re.Pattern[str]:
    spaced = (_SEPARATOR + "{0,2}").join(re.escape(char) for char in term)
    return re.compile(rf"(?<![0-9a-z]){spaced}(?![0-9a-z])", re.IGNORECASE)


def _written_as_name(text: str, match: re.Match[str], catalog: CatalogIndex) -> bool:
    """See _CHOOSING: capitals, a capital inside a sentence, a word of choosing before it, a
    product noun after it, alone as its sentence, or in a sentence about brands."""
    letters = [char for char in match.group(0) if char.isalpha()]  # 3+: a name's minimum
    if all(char.isupper() for char in letters):
        return True
    if letters[0].isupper() and not _starts_sentence(text, match.start()):
        return True
    before = _PREVIOUS_WORD.search(text[: match.start()])
    previous = before.group(1).casefold() if before else ""
    if previous in _CHOOSING:
        return True
    following = _NEXT_WORD.match(text, match.end())[1].casefold()  # \w* always matches
    if following in _PRODUCT_NOUNS or following in catalog.category_words:
        return True
    if following in ("one", "ones") and previous in _DETERMINERS:
        return True
    sentence = _sentence_around(text, match)
    alone = compact(sentence.casefold()) == compact(match.group(0).casefold())
    return alone or bool(_BRAND_SENTENCE.search(sentence))


def _sentence_around(text: str, match: re.Match[str]) -> str:
    ends_before = list(_SENTENCE_END.finditer(text, 0, match.start()))
    start = ends_before[-1].end() if ends_before else 0
    end_after = _SENTENCE_END.search(text, match.end())
    return text[start : end_after.start() if end_after else len(text)]


def _starts_sentence(text: str, index: int) -> bool:
    before = text[:index].rstrip()
    return not before or before[-1] in ".!?:;•*-–—()\"'"  # a sentence, a clause, a list item


# Words before a short option that choose it, and nouns after it that make it an option.
_OPTION_CONTEXT = _CHOOSING | {"size", "color", "colour", "option"}


def _option_findings(
    views: _Views, options: tuple[str, ...], catalog: CatalogIndex
) -> list[LeakFinding]:
    """Gold options: whole (6+ characters, spacing ignored, in either spelling, with an
    abbreviated word, or as its CSS colour code); else a short one the text chooses ("pick
    king"), or a distinctive word of it written as a name. An option inside a longer one found
    whole is that one ("Blue" in "Midnight Blue")."""
    whole = {_term(option): f for option in options if (f := _whole_option(views, option))}
    findings = list(whole.values())
    for option in options:
        glued = _term(option)
        if any(glued in longer for longer in whole):
            continue
        short = MIN_SHORT_OPTION_CHARS <= len(glued) < MIN_TERM_CHARS["option"]
        if short and (read := _short_option_chosen(views, normalize(option))) is not None:
            findings.append(LeakFinding("gold_option", option, read))
        else:
            findings += _option_word_findings(views, option, catalog)
    return findings


def _option_word_findings(views: _Views, option: str, catalog: CatalogIndex) -> list[LeakFinding]:
    """A distinctive word of an option of several words, written as a name ("Lagoon" of
    "Lagoon Teal"): not generic, not common in the catalog, MIN_TERM_CHARS["line"]+ letters."""
    findings = []
    for word in words(normalize(option)):
        if (
            len(word) >= MIN_TERM_CHARS["line"]
            and word != _term(option)
            and word not in GENERIC_WORDS
            and not catalog.is_common(word)
            and (reads := _name_hits(views, word, catalog))
        ):
            findings.append(LeakFinding("gold_option", word, reads[0] or f"{word} of {option}"))
    return findings


def _whole_option(views: _Views, option: str) -> LeakFinding | None:
    term = normalize(option)
    for form in canonical.spelling_variants(term):
        glued = compact(form)
        if len(glued) >= MIN_TERM_CHARS["option"] and any(
            glued in reading for reading in views.compact_readings
        ):
            return LeakFinding("gold_option", option, "" if form == term else f"{form} = {term}")
        if len(words(form)) > 1 and (match := _abbreviated(form).search(views.norm)):
            return LeakFinding("gold_option", option, f"{match.group(0)} = {term}")
    hex_code = canonical.colour_hex(term)
    if hex_code and hex_code in canonical.hex_codes(views.norm):
        return LeakFinding("gold_option", option, f"#{hex_code} = {term}")
    if len(compact(term)) >= MIN_TERM_CHARS["option"] and (read := _in_chinese(views, term)):
        return LeakFinding("gold_option", option, read)
    return None


def _in_chinese(views: _Views, term: str, *, chosen_only: bool = False) -> str:
    """The reading of a Chinese colour word that names the option (墨绿 -> forest green), as
    the English rules read the name: a long option anywhere, a short one where chosen and
    read first ("选海军蓝", navy for Navy; "dark red" is no choice of Red)."""
    forms = canonical.spelling_variants(term)
    for word in views.colour_words:
        if chosen_only and not word.chosen:
            continue
        for name in word.names:
            if any(_names_option(name, form, whole=not chosen_only) for form in forms):
                return f"{word.written} → {name} = {term}"
    return ""


def _names_option(name: str, form: str, *, whole: bool) -> bool:
    """A long option anywhere in the name (sea green in dark sea green), a short one as the
    name's first words (navy in navy blue)."""
    if whole:
        return compact(form) in compact(name)
    return words(name)[: len(words(form))] == words(form)


@lru_cache(maxsize=4096)
def _abbreviated(form: str) -> re.Pattern[str]:
    """The option's words in order, each whole or without its inner vowels ("frst green")."""
    alternatives = []
    for word in words(form):
        short = word[0] + re.sub(r"[aeiou]", "", word[1:])
        choices = {re.escape(word)} | ({re.escape(short)} if len(short) >= 3 else set())
        alternatives.append(f"(?:{'|'.join(sorted(choices))})")
    body = r"[\s\-_.]*".join(alternatives)
    return re.compile(rf"(?<![0-9a-z]){body}(?![0-9a-z])")


def _short_option_chosen(views: _Views, term: str) -> str | None:
    """A short whole option, in either spelling, as a word the text chooses: after a word of
    choosing, or before an option noun ("pick king", "the King size", "prefer gray" for Grey),
    also in Chinese ("选红色"); the reading that matched ("" as written), None where not chosen."""
    for form in canonical.spelling_variants(term):
        pattern = _word_pattern(form)
        for text in (views.norm, *(reading.casefold() for reading in views.leet)):
            for match in pattern.finditer(text):
                before = _PREVIOUS_WORD.search(text[: match.start()])
                following = _NEXT_WORD.match(text, match.end())[1]
                if (before and before.group(1) in _OPTION_CONTEXT) or following in _PRODUCT_NOUNS:
                    return "" if form == term else f"{form} = {term}"
    return _in_chinese(views, term, chosen_only=True) or None


def _unique(findings: list[LeakFinding]) -> list[LeakFinding]:
    """One finding per rule and matched term, however it was spelled."""
    seen: dict[tuple[str, str], LeakFinding] = {}
    for finding in findings:
        seen.setdefault((finding.rule, _term(finding.text)), finding)
    return list(seen.values())
