"""Search documents and tokens (`han-bigram-latin-number-v1`, as reference BM25 v3 does it):
NFKC + casefold, basic punctuation to spaces, Han bigrams (a lone Han character alone) and
Latin/number runs, deduplicated in order. Product fields and queries go through the same code."""

from __future__ import annotations

import re
import unicodedata

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
TOKENIZER_VERSION = "han-bigram-latin-number-v1"

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
    text = normalize_query(value)
    tokens: list[str] = []
    for run in _HAN_RUN.findall(text):
        if len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[index : index + 2] for index in range(len(run) - 1))
    tokens.extend(_LATIN_OR_NUMBER.findall(text))
    return tuple(dict.fromkeys(tokens))


def model_text(title: str) -> str:
    return " ".join(dict.fromkeys(_MODEL.findall(normalize_query(title))))


def product_fields(product: Product) -> dict[str, str]:
    """The seven search fields of a product: only what a shopper can see on its pages."""
    options: list[str] = []
    for axis, entries in sorted(product.options, key=lambda item: str(item[0])):
        options.append(axis)
        options.extend(value for value, _ in entries if value)
    return {
        "title": product.title,
        "brand": product.brand,
        "category": product.category,
        "model": model_text(product.title),
        "attributes": " ".join(product.attributes),
        "options": " ".join(options),
        "bullets": " ".join(product.bullets),
    }


def tokenized_fields(product: Product) -> dict[str, tuple[str, ...]]:
    return {name: search_tokens(text) for name, text in product_fields(product).items()}
