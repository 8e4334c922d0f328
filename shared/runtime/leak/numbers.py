"""Amounts a reader takes from text, for the gold firewall's price rule.

Every way of writing a number is read to its value first: Chinese numerals
(`shared/runtime/leak/chinese_numerals.py`), number words (`text2num`), a price spoken in pairs
("one-twenty-nine" is 129, or 1.29: both readings), thousands separated by a space, a thin
space or an apostrophe as some locales write them ("1 099,50 €"), and simple arithmetic a
reader does without thinking: "five under 100" (95), "20 more than 40" (60), "100 minus 1",
"一百减一" (99), "just under 60" and "不到60" (59.99).

`price_matches` compares an amount with the gold price within a stated tolerance: an amount
with cents must equal the price to the cent; a whole amount matches the price rounded to the
unit either way ("about 60 bucks", "59 dollars" for 59.99), except a bound ("under $60",
"less than 60"), which is the request's ceiling and matches only the exact price.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from text_to_num import alpha2digit

from shared.runtime.leak.chinese_numerals import arabic_numerals

# A price written without a currency sign or cents leaks from this many digits (348 does; 45
# alone is any number, "$45" is a price).
MIN_BARE_PRICE_DIGITS = 3
CENT = 0.01

# A price written as a price: a currency before or after the number, or cents.
_AMOUNT = re.compile(
    r"(?P<bound>(?:under|below|less than|lower than|cheaper than|at most|up to|no more than|"
    r"max(?:imum)?|budget(?: of)?|within)\s+(?:a\s+)?)?"
    r"(?P<before>(?:us\$|\$|usd|eur|€|£|¥|rmb|cny)\s?)?"
    r"(?<![\d.,])(?P<number>\d{1,3}(?:[,.]\d{3})+|\d+)(?:[.,](?P<cents>\d{1,2}))?(?![\d])"
    r"(?![.,]\d)"
    r"(?P<after>\s?(?:dollars?|bucks|usd|euros?|eur|€|£|元|圆|块)"
    r"(?:\s(?:and\s)?(?P<word_cents>\d{1,2})\s?cents?)?)?"
    r"(?P<percent>\s?(?:%|percent))?"
)
# Thousands written with a space, a no-break or thin space, or an apostrophe (1 099,50).
_SPACED_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:[ \u00a0\u202f\u2009'’]\d{3})+(?![\d])")
_NUMBER = r"\d+(?:\.\d{1,2})?"
_CURRENCY = r"(?:\s?(?:dollars?|bucks|元|块))?"
_ARITHMETIC = (
    # "5 under 100", "5 dollars less than 100", "5 below a 100": the second minus the first
    (re.compile(rf"(?P<a>{_NUMBER}){_CURRENCY}\s+(?:under|less than|below|short of|off)\s+"
                rf"(?:a\s+)?\$?\s?(?P<b>{_NUMBER})"), -1),
    (re.compile(rf"(?P<a>{_NUMBER}){_CURRENCY}\s+(?:over|more than|above)\s+(?:a\s+)?\$?\s?"
                rf"(?P<b>{_NUMBER})"), 1),
    # "100 minus 1", "一百减一" (100减1), "一百块减去一块": the first minus the second
    (re.compile(rf"(?P<b>{_NUMBER}){_CURRENCY}\s?(?:minus|减去|减掉|减|少)\s?\$?(?P<a>{_NUMBER})"),
     -1),
    (re.compile(rf"(?P<b>{_NUMBER}){_CURRENCY}\s?(?:plus|加上|加)\s?\$?(?P<a>{_NUMBER})"), 1),
)  # fmt: skip
# "just under 60", "a cent below $60", "不到60", "差一分60": a cent less than the number
_JUST_UNDER = re.compile(
    rf"(?:(?:just|a (?:cent|penny|hair|tad|bit)|slightly|right|barely)\s+(?:under|below|less than|"
    rf"shy of)\s+\$?\s?|不到|差一分)(?P<b>{_NUMBER})"
)
# A price spoken in pairs: "one twenty-nine", "three-forty-eight", "nine ninety-nine".
_UNITS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = [
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SMALL = {word: value for value, word in enumerate(_UNITS, 1)}
_SMALL |= {word: value for value, word in enumerate(_TEENS, 10)}
_SMALL |= {word: 10 * tens for tens, word in enumerate(_TENS, 2)}
_TENS_GROUP = rf"(?:{'|'.join(_TENS)})(?:[\s-](?:{'|'.join(_UNITS)}))?|{'|'.join(_TEENS)}"
_SPOKEN_PAIR = re.compile(
    rf"(?<![a-z-])(?P<high>{_TENS_GROUP}|{'|'.join(_UNITS)})[\s-]+(?P<low>{_TENS_GROUP})(?![a-z-])"
)


@dataclass(frozen=True)
class Amount:
    value: float
    shown: str  # as the text wrote it, for the finding
    written_as_price: bool  # a currency, cents, or a computed amount: a price at any size
    whole: bool  # no cents: matches the price rounded to the unit either way
    bound: bool = False  # "under $60": the request's ceiling, matched only exactly


def _small_value(words: str) -> int:
    return sum(_SMALL[word] for word in re.split(r"[\s-]+", words))


def amounts(normalized: str) -> list[Amount]:
    """Every amount in a normalized text, by every reading (see the module docstring)."""
    found = _spoken_pairs(normalized)
    digits = alpha2digit(arabic_numerals(normalized), "en")
    digits = _SPACED_THOUSANDS.sub(lambda m: re.sub(r"[^\d]", "", m.group(0)), digits)
    found += _computed(digits)
    for match in _AMOUNT.finditer(digits):
        if match["percent"]:
            continue
        number = re.sub(r"[,.]", "", match["number"])
        cents = match["cents"] or match["word_cents"] or ""
        value = int(number) + (int(cents) / 10 ** len(cents) if cents else 0)
        as_price = bool(match["before"] or match["after"] or cents)
        if as_price or len(number.lstrip("0")) >= MIN_BARE_PRICE_DIGITS:
            shown = match.group(0)[len(match["bound"] or "") :].strip()
            found.append(Amount(value, shown, as_price, not cents, bool(match["bound"])))
    return found


def _spoken_pairs(normalized: str) -> list[Amount]:
    found = []
    for match in _SPOKEN_PAIR.finditer(normalized):
        high, low = _small_value(match["high"]), _small_value(match["low"])
        found.append(Amount(high * 100 + low, match.group(0), True, True))
        found.append(Amount(high + low / 100, match.group(0), True, False))
    return found


def _computed(digits: str) -> list[Amount]:
    found = []
    for pattern, sign in _ARITHMETIC:
        for match in pattern.finditer(digits):
            value = float(match["b"]) + sign * float(match["a"])
            found.append(Amount(value, match.group(0), True, value == int(value)))
    for match in _JUST_UNDER.finditer(digits):
        found.append(Amount(float(match["b"]) - CENT, match.group(0), True, False))
    return found


def price_matches(amount: Amount, price: float) -> bool:
    """Equal to the cent, or for a whole amount (not a bound) to the unit either way."""
    if abs(amount.value - price) < CENT / 2:
        return True
    if amount.bound or not amount.whole:
        return False
    return math.floor(price) <= amount.value <= math.ceil(price)
