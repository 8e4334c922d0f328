"""The goal budget `price_upper` (spec 8): precedence, the offline annotation path and the
runtime regex parser for Chinese instruction text (`instruction-budget-v1`).

The parser is an ordered list of rules; each is a leftmost search and the first rule that
returns wins. A rule returns a number (the ceiling), `STOP` (the parser gives no budget), or
`None` (go on to the next rule).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

BUDGET_PARSER_VERSION = "instruction-budget-v1"

_DIGITS = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3,
    "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_SMALL_UNITS = {"十": 10, "百": 100, "千": 1000}
_LARGE_UNITS = {"万": 10000, "亿": 100000000}
_CN = "零〇一二两三四五六七八九十百千万亿"
_CN_DIGIT_CLASS = "".join(_DIGITS)

NUM = rf"(?:\d+(?:\.\d+)?|[{_CN}]+)"
SCALE = r"(?:万|千|[kK])?"
CUR = r"(?:元|块钱|块)"
PW = r"(?:预算|价格|价钱|价位|售价|单价|花费|费用|总价|预期价格)"
RANGE_SEPARATOR = r"(?:-|~|～|—|至|到|和)"
APPROXIMATE = frozenset({"左右", "上下", "大约", "上下浮动", "出头"})
CEILING_WORDS = (
    "不得超过|不能超过|不要超过|不能高于|不要高于|不超过|不高于|不高过|别超过|别超|不超|"
    "低于|小于|不到|最高(?:为|是)?|上限(?:为|是)?|只能给到"
)
STANDALONE_SUFFIXES = (
    "以内|以下|之内|左右|上下|大约|上下浮动|内|出头|都不到|拿下|能拿下|帮我搞定|能搞定|搞定|"
    "能买|来买|应该够|基本能买到|这个价|的价格|的价位|价位|的预算|预算"
)

STOP = object()  # a rule's verdict that there is no budget at all


def chinese_numeral_value(text: str) -> float:
    """Digits only: concatenated. Digits + one of 十百千万 + one digit: colloquial shorthand
    (一千八 = 1800). Otherwise positional (十/百/千 multiply, 万/亿 close a section)."""
    if all(char in _DIGITS for char in text):
        return float("".join(str(_DIGITS[char]) for char in text))
    shorthand = re.fullmatch(rf"([{_CN_DIGIT_CLASS}]+)([十百千万])([{_CN_DIGIT_CLASS}])", text)
    if shorthand:
        unit = {**_SMALL_UNITS, **_LARGE_UNITS}[shorthand.group(2)]
        head = chinese_numeral_value(shorthand.group(1))
        tail = chinese_numeral_value(shorthand.group(3))
        return head * unit + tail * unit / 10
    total = section = digit = 0
    for char in text:
        if char in _DIGITS:
            digit = _DIGITS[char]
        elif char in _SMALL_UNITS:
            section += (digit or 1) * _SMALL_UNITS[char]
            digit = 0
        elif char in _LARGE_UNITS:
            total = (total + section + digit) * _LARGE_UNITS[char]
            section = digit = 0
    return float(total + section + digit)


def amount(number: str, scale: str | None = None) -> float:
    """An Arabic or Chinese number times its optional scale (万, 千 or k)."""
    value = (
        float(number) if re.fullmatch(r"\d+(?:\.\d+)?", number) else chinese_numeral_value(number)
    )
    unit = (scale or "").casefold()
    if unit == "万":
        value *= 10000
    elif unit in {"千", "k"}:
        value *= 1000
    return value


def _tolerant(value: float, qualifier: str | None) -> float:
    # Plain double arithmetic, not rounded: 100 * 1.1 == 110.00000000000001.
    return value * 1.1 if qualifier in APPROXIMATE else value


Rule = Callable[[str], object]


def _search(pattern: str) -> Callable[[str], re.Match[str] | None]:
    compiled = re.compile(pattern)
    return compiled.search


_WAN_SHORTHAND = _search(
    rf"{PW}(?:金额)?(?:控制)?(?:在|为|是)?\s*(\d+)\s*万\s*(\d+)\s*(?:千)?\s*"
    rf"(以内|以下|之内|左右|上下)?"
)
_PREFIXED_RANGE = _search(
    rf"{PW}(?:金额)?(?:控制)?(?:在|为|是|要在|大概|约|差不多)?\s*"
    rf"({NUM})\s*({SCALE})\s*(?:{CUR})?\s*{RANGE_SEPARATOR}\s*"
    rf"({NUM})\s*({SCALE})\s*(?:{CUR})?\s*(?:之间|以内|以下|之内)"
)
_CURRENCY_RANGE = _search(
    rf"(?:{PW})?(?:金额)?(?:控制)?(?:在|为|是|要在|大概|约|差不多)?\s*"
    rf"({NUM})\s*({SCALE})\s*(?:{CUR})?\s*{RANGE_SEPARATOR}\s*"
    rf"({NUM})\s*({SCALE})\s*(?:{CUR})\s*(?:之间|以内|以下|之内|左右|上下)?"
)
_CEILING = _search(
    rf"(?:{PW})?(?:金额)?[^，。；;]{{0,8}}?(?:{CEILING_WORDS})\s*({NUM})\s*({SCALE})\s*(?:{CUR})"
)
_LOWER_BOUND = _search(
    rf"{PW}[^，。；;]{{0,8}}?(?:不低于|至少|(?<!不要)(?<!不能)(?<!不)(?<!别)(?:超过|高于))"
    rf"\s*{NUM}\s*{SCALE}\s*(?:{CUR})?"
)
_PLUS_LOWER_BOUND = _search(rf"{PW}[^，。；;]{{0,8}}?{NUM}\s*{SCALE}\s*\+")
_PREFIXED = _search(
    rf"{PW}(?:金额)?[^\d{_CN}，。；;]{{0,12}}?({NUM})\s*({SCALE})\s*(来|多)?\s*(?:{CUR})?\s*"
    rf"(以内|以下|之内|左右|上下|大约|上下浮动|内)?"
)
_APPROX_BEFORE = _search(rf"(?:差不多|大约|大概|约)\s*({NUM})\s*({SCALE})\s*(?:{CUR})")
_APPROX_MIDDLE = _search(rf"({NUM})\s*({SCALE})\s*(?:左右|上下|大约)\s*(?:{CUR})")
_APPROX_OVER = _search(rf"({NUM})\s*({SCALE})\s*多\s*(?:{CUR})")
_LARGE_APPROX = _search(rf"({NUM})\s*(左右|上下)\s*(?:的)?\s*(?:预算|价位|价格)")
_IMPLICIT_LARGE_APPROX = _search(rf"([{_CN}]*[千万][{_CN}]*)\s*(左右|上下)")
_AFFORDABLE = _search(rf"({NUM})\s*(?:以内|以下|内)\s*(?:能)?(?:拿下|搞定)")
_APPROX_AFFORDABLE = _search(rf"({NUM})\s*(?:左右|上下)\s*(?:能)?(?:拿下|搞定)")
_PREPARED = _search(rf"(?:准备(?:了)?|给到)\s*({NUM})\s*({SCALE})\s*(?:{CUR})")
_STANDALONE = _search(rf"({NUM})\s*({SCALE})\s*(?:{CUR})\s*({STANDALONE_SUFFIXES})")
_VAGUE_TEENS = _search(r"([二三四五六七八九]?十)几\s*(?:元|块钱|块)")


def _rule_wan_shorthand(text: str) -> object:
    match = _WAN_SHORTHAND(text)
    if not match:
        return None
    value = float(match.group(1)) * 10000 + float(match.group(2)) * 1000
    return _tolerant(value, match.group(3))


def _range_rule(search: Callable[[str], re.Match[str] | None]) -> Rule:
    def rule(text: str) -> object:
        match = search(text)
        if not match:
            return None
        low, high = amount(match.group(1), match.group(2)), amount(match.group(3), match.group(4))
        # The high end, with no tolerance even after 左右; a bad range defers to later rules.
        return high if low > 0 and high >= low else None

    return rule


def _rule_ceiling(text: str) -> object:
    match = _CEILING(text)
    if not match:
        return None
    value = amount(match.group(1), match.group(2))
    return value if value > 0 else STOP


def _rule_lower_bound(text: str) -> object:
    return STOP if _LOWER_BOUND(text) or _PLUS_LOWER_BOUND(text) else None


def _rule_prefixed(text: str) -> object:
    match = _PREFIXED(text)
    if not match:
        return None
    value = amount(match.group(1), match.group(2))
    qualifier = match.group(4) or ("左右" if match.group(3) else None)
    return _tolerant(value, qualifier) if value > 0 else None


def _approximate_rule(search: Callable[[str], re.Match[str] | None]) -> Rule:
    def rule(text: str) -> object:
        match = search(text)
        if not match:
            return None
        value = amount(match.group(1), match.group(2))
        return value * 1.1 if value > 0 else STOP

    return rule


def _rule_large_approx(text: str) -> object:
    match = _LARGE_APPROX(text)
    if not match:
        return None
    value = amount(match.group(1))  # the scale is ignored here
    return value * 1.1 if value >= 100 else None


def _rule_implicit_large_approx(text: str) -> object:
    match = _IMPLICIT_LARGE_APPROX(text)
    if not match:
        return None
    value = amount(match.group(1))
    return value * 1.1 if value >= 1000 else None


def _rule_affordable(text: str) -> object:
    match = _AFFORDABLE(text)
    if not match:
        return None
    value = amount(match.group(1))
    return value if value > 0 else None


def _rule_approx_affordable(text: str) -> object:
    match = _APPROX_AFFORDABLE(text)
    if not match:
        return None
    value = amount(match.group(1))
    return value * 1.1 if value > 0 else None


def _rule_prepared(text: str) -> object:
    match = _PREPARED(text)
    if not match:
        return None
    value = amount(match.group(1), match.group(2))
    return value if value > 0 else None


def _rule_standalone(text: str) -> object:
    match = _STANDALONE(text)
    if not match:
        return None
    value = amount(match.group(1), match.group(2))
    return _tolerant(value, match.group(3)) if value > 0 else STOP


def _rule_vague_teens(text: str) -> object:
    match = _VAGUE_TEENS(text)
    return chinese_numeral_value(match.group(1)) + 9 if match else None


def _rule_single_digit_price(text: str) -> object:
    return 9.0 if "个位数价格" in text else None


RULES: tuple[Rule, ...] = (
    _rule_wan_shorthand,  # 1
    _range_rule(_PREFIXED_RANGE),  # 2
    _range_rule(_CURRENCY_RANGE),  # 3
    _rule_ceiling,  # 4
    _rule_lower_bound,  # 5
    _rule_prefixed,  # 6
    _approximate_rule(_APPROX_BEFORE),  # 7
    _approximate_rule(_APPROX_MIDDLE),  # 8
    _approximate_rule(_APPROX_OVER),  # 9
    _rule_large_approx,  # 10
    _rule_implicit_large_approx,  # 11
    _rule_affordable,  # 12
    _rule_approx_affordable,  # 13
    _rule_prepared,  # 14
    _rule_standalone,  # 15
    _rule_vague_teens,  # 16
    _rule_single_digit_price,  # 17
)


def explicit_budget_from_instruction(instruction: object) -> float | None:
    """The user-stated price ceiling in the text, or None. Never uses the gold price."""
    text = re.sub(r"[,，]", "", "" if instruction is None else str(instruction))
    for rule in RULES:
        verdict = rule(text)
        if verdict is STOP:
            return None
        if verdict is not None:
            return float(verdict)  # type: ignore[arg-type]
    return None


class BudgetError(ValueError):
    """A stored price_upper that is not a finite, non-negative number."""


def goal_price_upper(
    instruction: object, instruction_simple: object = None, price_upper: object = None
) -> float | None:
    """Spec 8.1: a stored ceiling wins; else parse the simple text (the complete one when the
    simple is missing or empty); else the complete text if it differs; else None."""
    if price_upper is not None and price_upper != "":
        try:
            value = float(price_upper)  # type: ignore[arg-type]
        except (TypeError, ValueError) as error:
            raise BudgetError(f"price_upper {price_upper!r} is not a number") from error
        if not math.isfinite(value) or value < 0:
            raise BudgetError(f"price_upper {price_upper!r} must be finite and >= 0")
        return value
    complete = "" if instruction is None else str(instruction)
    simple = str(instruction_simple) if instruction_simple else complete
    found = explicit_budget_from_instruction(simple)
    if found is None and simple != complete:
        found = explicit_budget_from_instruction(complete)
    return found


def annotation_price_upper(kind: str, amount_value: object) -> float | None:
    """Spec 8.2: hard_upper -> amount; approximate_upper -> round(amount * 1.10, 8); else None."""
    if amount_value is None:
        return None
    value = float(amount_value)  # type: ignore[arg-type]
    if kind == "hard_upper":
        return value
    if kind == "approximate_upper":
        return round(value * 1.10, 8)
    return None


def resolve_annotations(annotations: Mapping[str, Mapping[str, object]]) -> float | None:
    """The simple instruction's annotation first; the complete one only if that gave none."""
    for key in ("instruction_simple", "instruction"):
        note = annotations.get(key) or {}
        ceiling = annotation_price_upper(str(note.get("kind", "")), note.get("amount"))
        if ceiling is not None:
            return ceiling
    return None
