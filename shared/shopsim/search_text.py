"""Search documents and tokens (`han-bigram-latin-number-v1`, as reference BM25 v3 does it):
NFKC + casefold, basic punctuation to spaces, Han bigrams (a lone Han character alone) and
Latin/number runs, deduplicated in order. Product fields and queries go through the same code."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Generic, TypeVar

from shared.shopsim.product import Product

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
TOKENIZER_VERSION = "han-bigram-latin-number-v1"
MAX_QUERY_TOKENS = 64

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_LATIN_OR_NUMBER = re.compile(r"[a-z0-9]+(?:[._+\-/][a-z0-9]+)*")
# Tokens with at least one letter and one digit: model numbers (hx420, rtx-4090).
_MODEL = re.compile(
    r"(?<![a-z0-9])(?=[a-z0-9._+\-/]*[a-z])(?=[a-z0-9._+\-/]*\d)"
    r"[a-z0-9]+(?:[._+\-/][a-z0-9]+)*(?![a-z0-9])"
)
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


def query_tokens(query: str) -> tuple[str, ...]:
    """A query's search terms: its first `MAX_QUERY_TOKENS` distinct tokens."""
    return search_tokens(query)[:MAX_QUERY_TOKENS]


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
    return {name: search_tokens(text) for name, text in product_fields(product).items()}


class FieldTokenizer(Generic[T]):
    """A product's seven fields (in `FIELDS` order) as search tokens passed through
    `convert`, memoized where products share text.

    Equal, as token sets, to `tokenized_fields`: brands, categories, attribute lists, option
    lists and bullets repeat across products, so each distinct one is tokenized and converted
    once (pieces are split on `;`, which no token spans); only the title (and its model
    tokens) is done per product. Each field's tokens are distinct, so a field's length is
    its number of tokens.
    """

    def __init__(self, convert: Callable[[tuple[str, ...]], T]) -> None:
        self._convert = convert
        self._pieces: dict[str, tuple[str, ...]] = {}
        self._shared: dict[tuple[int, tuple[str, ...]], T] = {}

    def _piece(self, text: str) -> tuple[str, ...]:
        found = self._pieces.get(text)
        if found is None:
            found = self._pieces[text] = search_tokens(text)
        return found

    def _field(self, field: int, pieces: tuple[str, ...]) -> T:
        found = self._shared.get((field, pieces))
        if found is None:
            merged: dict[str, None] = {}
            for piece in pieces:
                for part in piece.split(";"):
                    merged.update(dict.fromkeys(self._piece(part)))
            found = self._shared[field, pieces] = self._convert(tuple(merged))
        return found

    def fields(self, product: Product) -> tuple[T, ...]:
        title = normalize_query(product.title)
        convert, field = self._convert, self._field
        return (
            convert(_normalized_tokens(title)),
            field(1, (product.brand,)),
            field(2, (product.category,)),
            convert(_model_tokens(title)),
            field(4, product.attributes),
            field(5, tuple(option_texts(product))),
            field(6, product.search_bullets),
        )
