"""Search documents and tokens, as the reference's BM25 v3 engine makes them.

Two stages, as there:

1. Pre-tokens (`han-bigram-latin-number-v1`): NFKC + casefold, basic punctuation to spaces,
   Han bigrams (a lone Han character alone), then Latin/number runs that may keep `._+-/`
   inside (`usb-c`, `5.3`), deduplicated in order. Product fields and queries alike.
2. FTS5's `unicode61 remove_diacritics 2` tokenizer over the space-joined pre-tokens: it splits
   each pre-token again at `._+-/` (`usb-c` -> `usb`, `c`), and keeps repeats. A query's
   pre-token is one quoted FTS5 phrase (`"usb-c"` matches `usb` followed by `c` in one field).

Only Han characters, ASCII letters and digits and `._+-/` survive stage 1, and unicode61 treats
exactly the first three as token characters (checked against SQLite in tests), so stage 2 is a
split at `._+-/`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Generic, TypeVar

from shared.runtime.shopsim.product import Product

FIELD_WEIGHTS: dict[str, float] = {
    "title": 3.0,
    "brand": 2.0,
    "category": 2.0,
    "model": 2.5,
    "attributes": 1.5,
    "options": 1.2,
    "bullets": 0.8,
}
FIELDS = tuple(FIELD_WEIGHTS)
T = TypeVar("T")
TOKENIZER_VERSION = "han-bigram-latin-number-v1+unicode61-remove-diacritics-2"
# A guard against abusive queries only: the reference has no cap, and real queries (a title
# plus a few attributes: 10-40 pre-tokens) stay far below it.
MAX_QUERY_TOKENS = 1024

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_LATIN_OR_NUMBER = re.compile(r"[a-z0-9]+(?:[._+\-/][a-z0-9]+)*")
# Tokens with at least one letter and one digit: model numbers (hx420, rtx-4090).
_MODEL = re.compile(
    r"(?<![a-z0-9])(?=[a-z0-9._+\-/]*[a-z])(?=[a-z0-9._+\-/]*\d)"
    r"[a-z0-9]+(?:[._+\-/][a-z0-9]+)*(?![a-z0-9])"
)
_SEPARATOR = re.compile(r"[._+\-/]")  # what unicode61 splits a pre-token at
_PUNCTUATION = re.compile(r"[，,。；;：:！!？?、|]+")
_CURRENCY_WORD = re.compile(r"(?<=\d)\s*(?:rmb|cny|yuan)\b")


def normalize_query(value: object) -> str:
    """The small, replayable normaliser queries and documents share."""
    text = unicodedata.normalize("NFKC", "" if value is None else str(value)).casefold()
    text = text.replace("人民币", "元").replace("块钱", "元")
    text = _CURRENCY_WORD.sub("元", text)
    return " ".join(_PUNCTUATION.sub(" ", text).split())


def search_tokens(value: object) -> tuple[str, ...]:
    """Han bigrams then Latin/number runs, deduplicated, in order of appearance."""
    return _normalized_tokens(normalize_query(value))


def _normalized_tokens(text: str) -> tuple[str, ...]:
    tokens: list[str] = []
    for run in _HAN_RUN.findall(text):
        if len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[index : index + 2] for index in range(len(run) - 1))
    tokens.extend(_LATIN_OR_NUMBER.findall(text))
    return tuple(dict.fromkeys(tokens))


def split_tokens(pre_tokens: tuple[str, ...]) -> tuple[str, ...]:
    """FTS5 unicode61's tokens of space-joined pre-tokens: each split at `._+-/`, in order,
    repeats kept."""
    # One substitution over the joined text: pre-tokens hold no whitespace, so splitting on
    # it afterwards gives each pre-token's parts, in order.
    return tuple(_SEPARATOR.sub(" ", " ".join(pre_tokens)).split())


def query_phrases(query: str) -> tuple[tuple[str, ...], ...]:
    """A query's FTS5 phrases, one per pre-token (its first `MAX_QUERY_TOKENS`), in order."""
    return tuple(split_tokens((token,)) for token in search_tokens(query)[:MAX_QUERY_TOKENS])


def model_text(title: str) -> str:
    return " ".join(_model_tokens(normalize_query(title)))


def _model_tokens(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_MODEL.findall(text)))


def option_texts(product: Product) -> list[str]:
    """The options field: each axis name (in name order) followed by its values."""
    texts: list[str] = []
    for axis, entries in sorted(product.options, key=lambda item: str(item[0])):
        texts.append(axis)
        texts.extend(value for value, _ in entries if value)
    return texts


def product_fields(product: Product) -> dict[str, str]:
    """The seven search fields of a product: only what a shopper can see on its pages."""
    return {
        "title": product.title,
        "brand": product.brand,
        "category": product.category,
        "model": model_text(product.title),
        "attributes": " ".join(product.attributes),
        "options": " ".join(option_texts(product)),
        "bullets": " ".join(product.search_bullets),
    }


def tokenized_fields(product: Product) -> dict[str, tuple[str, ...]]:
    """Each field's FTS5 tokens, in order, repeats kept."""
    return {
        name: split_tokens(search_tokens(text)) for name, text in product_fields(product).items()
    }


class FieldTokenizer(Generic[T]):
    """A product's seven fields (in `FIELDS` order) as FTS5 tokens passed through `convert`,
    memoized where products share a field's text.

    Equal to `tokenized_fields`: brands, categories, option lists and bullets repeat across
    products, so each distinct field text is tokenized and converted once; the title (and its
    model tokens) and the attribute list are done per product.
    """

    def __init__(self, convert: Callable[[tuple[str, ...]], T]) -> None:
        self._convert = convert
        self._shared: dict[tuple[int, str], T] = {}
        # Every multi-token phrase the documents' own pre-tokens make (`usb-c` -> usb, c):
        # the phrases queries mostly ask for, which an index may prepare at build time.
        self.phrases: set[tuple[str, ...]] = set()

    def _split(self, pre_tokens: tuple[str, ...]) -> tuple[str, ...]:
        tokens = split_tokens(pre_tokens)
        if len(tokens) != len(pre_tokens):
            self.phrases.update(
                parts
                for parts in map(split_tokens, map(lambda t: (t,), pre_tokens))
                if len(parts) > 1
            )
        return tokens

    def _field(self, field: int, text: str) -> T:
        found = self._shared.get((field, text))
        if found is None:
            found = self._shared[field, text] = self._convert(self._split(search_tokens(text)))
        return found

    def fields(self, product: Product) -> tuple[T, ...]:
        title = normalize_query(product.title)
        convert, field, split = self._convert, self._field, self._split
        model = " ".join(_model_tokens(title))
        return (
            convert(split(_normalized_tokens(title))),
            field(1, product.brand),
            field(2, product.category),
            convert(split(search_tokens(model))),  # re-normalized, as the reference
            convert(split(search_tokens(" ".join(product.attributes)))),
            field(5, " ".join(option_texts(product))),
            field(6, " ".join(product.search_bullets)),
        )
