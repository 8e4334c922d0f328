"""Chinese numerals in running text rewritten as Arabic digits, for the gold firewall's price rule.

    一百二十九元 -> 129元      壹佰贰拾玖 -> 129      一二九 -> 129      两千零五 -> 2005
    一千二百九十九点五 -> 1299.5      三百四十八元五角 -> 348.50元      三百四十八块五 -> 348.5块
    百分之一百二十九 -> 129%

A numeral is a run of digits (零〇一二两三四五六七八九幺, the financial 壹贰叁肆伍陆柒捌玖 and the
traditional 貳兩參陸), units (十拾 百佰 千仟 万萬 亿億, 廿 and 卅 for twenty and thirty) and an
optional decimal part (点/點 and digits); single spaces inside it are ignored, since Chinese
writes none there and spacing only hides a number. It starts with a digit or 十 (十二 is 12):
a run that starts with another unit is a word, not a number (千万 "by all means", 万一 "just in
case"), left as written; glued to a numeral (万一一百二十九, "in case 129"), the longest tail
that is a numeral is read. A run mixed with Arabic digits (3万, 1.5万) is left as written.
Digits without units are read one by one (一二九 is 129, as a price is read aloud). A trailing
digit after 百, 千 or 万 counts in the next lower place, as spoken (一百二 is 120, 三万五 is
35000).

Money written with 元/块 and 角/毛 (tenths) and 分 (hundredths) becomes one decimal amount
before its currency word (348元5角 is 348.50元; 两块五 is 2.5块), and a percentage written 百分之N
becomes N%, so the price rule reads each as the amount or the percentage it is.

Written here rather than taken from PyPI: `cn2an`, the maintained converter, needs `proces`,
whose wheel (0.1.7) installs its own build/ tree into site-packages, and cn2an's own wheel adds
top-level `example` and `src` folders.
"""

from __future__ import annotations

import re

DIGITS = {
    **dict.fromkeys("零〇", 0),
    **dict.fromkeys("一壹幺", 1),
    **dict.fromkeys("二贰貳两兩", 2),
    **dict.fromkeys("三叁參叄", 3),
    **dict.fromkeys("四肆", 4),
    **dict.fromkeys("五伍", 5),
    **dict.fromkeys("六陆陸", 6),
    **dict.fromkeys("七柒", 7),
    **dict.fromkeys("八捌", 8),
    **dict.fromkeys("九玖", 9),
}
SMALL_UNITS = {
    **dict.fromkeys("十拾", 10),
    **dict.fromkeys("百佰", 100),
    **dict.fromkeys("千仟", 1000),
}
LARGE_UNITS = {**dict.fromkeys("万萬", 10**4), **dict.fromkeys("亿億", 10**8)}
TENS = {"廿": "二十", "卅": "三十"}  # one character for twenty and thirty (廿九 is 29)

_DIGIT = "".join(DIGITS)
_UNIT = "".join(SMALL_UNITS) + "".join(LARGE_UNITS) + "".join(TENS)
# A run of numeral characters, with Arabic digits so a mix (3十, 1.5万) is seen whole and kept,
# and single spaces between them: Chinese puts none inside a number, so a spaced one is hidden.
_RUN = re.compile(
    rf"(?P<integer>[0-9{_DIGIT}{_UNIT}](?:\s?[0-9{_DIGIT}{_UNIT}])*)"
    rf"(?:\s?[点點]\s?(?P<decimals>[0-9{_DIGIT}](?:\s?[0-9{_DIGIT}])*))?"
)
_MONEY = re.compile(
    r"(?P<yuan>\d+)\s?(?P<currency>[元块圆])(?:"
    r"\s?(?P<jiao>\d)\s?[角毛](?:\s?(?P<fen>\d)(?:\s?分|(?!\w)))?"  # 5角, 5角2分, 9毛9
    r"|\s?(?P<fen_only>\d)\s?分"  # 5分
    r"|(?P<spoken>\d)(?!\w))"  # 两块五: the digit after the currency is its tenths
)
_PERCENT = re.compile(r"百分之\s?(\d+(?:\.\d+)?)")


def numeral_value(numeral: str) -> int | None:
    """The integer a run of Chinese digits and units spells, or None if it is no numeral."""
    for tens, spelled in TENS.items():
        numeral = numeral.replace(tens, spelled)
    if not numeral or any(char not in DIGITS and char not in _UNIT for char in numeral):
        return None
    if all(char in DIGITS for char in numeral):
        return int("".join(str(DIGITS[char]) for char in numeral))
    total = 0  # what the large units (万, 亿) already closed
    section = 0  # below the next large unit
    digit: int | None = None
    below: int | None = None  # the section's last small unit: the next one must be smaller
    spoken: int | None = None  # the place of a trailing digit (一百二: the tens)
    for char in numeral:
        if char in DIGITS:
            if DIGITS[char] == 0:  # a place left empty (一千零五): only ends the spoken form
                if digit is not None:
                    return None
                spoken = None
            elif digit is not None:  # two digits in a row among units (一二百)
                return None
            else:
                digit = DIGITS[char]
        elif char in SMALL_UNITS:
            unit = SMALL_UNITS[char]
            if (below is not None and unit >= below) or (digit is None and unit != 10):
                return None
            section += (1 if digit is None else digit) * unit
            digit, below, spoken = None, unit, unit // 10
        else:
            unit = LARGE_UNITS[char]
            block = section + (digit or 0)
            if unit == 10**4:
                if block == 0:
                    return None
                total += block * unit
            else:
                if total + block == 0:
                    return None
                total = (total + block) * unit
            section, digit, below, spoken = 0, None, None, unit // 10
    if digit is not None and spoken is not None and spoken >= 10:
        return total + section + digit * spoken
    return total + section + (digit or 0)


def _numeral(match: re.Match[str]) -> str:
    whole = match.group(0)
    integer, decimals = (
        re.sub(r"\s", "", part or "") for part in match.group("integer", "decimals")
    )
    if re.search(r"[0-9]", whole):
        return whole  # a mix with Arabic digits is not read
    # The whole run, else (a word glued to the front: 万一一百二十九, "in case 129") its longest
    # tail of two or more characters that is a numeral; a word alone (千万, 万一) has none.
    for start in (0, *range(1, len(integer) - 1)):
        value = numeral_value(integer[start:])
        if value is not None:
            number = f"{value}.{''.join(str(DIGITS[c]) for c in decimals)}" if decimals else value
            return f"{integer[:start]}{number}"
    return whole


def _money(match: re.Match[str]) -> str:
    yuan, currency = match["yuan"], match["currency"]
    if match["spoken"]:
        return f"{yuan}.{match['spoken']}{currency}"
    jiao, fen = match["jiao"] or "0", match["fen"] or match["fen_only"] or "0"
    return f"{yuan}.{jiao}{fen}{currency}"


def arabic_numerals(text: str) -> str:
    """`text` with every Chinese numeral written in Arabic digits (see the module docstring)."""
    text = _RUN.sub(_numeral, text)
    text = _MONEY.sub(_money, text)
    return _PERCENT.sub(r"\1%", text)
