"""The gold firewall's canonical readings: what a reader makes of a word written in another
script, in leetspeak, in the other English spelling, or as a colour code.

Each function returns readings *beside* the original, never instead of it: a digit that may
stand for a letter is read both ways (1 as i and as l), and a rule matches a gold fact when any
reading does. Libraries made for each job do the reading:

- `pypinyin`: Chinese characters to pinyin (小米 -> xiaomi; 索尼 -> suo ni);
- `pykakasi`: kana and kanji to Hepburn romaji (ソニー -> sonii);
- `unidecode`: other alphabets read aloud in Latin letters (Шарк -> Shark, 소니 -> soni);
- `breame`: the US/UK spelling pairs of English (aluminum/aluminium, gray/grey);
- `webcolors`: the CSS colour names and their hex values (forest green = #228b22).

A Latin name written in katakana or Chinese characters is compared by its sound. A kana word
is compared whole by its consonants (`sound_key`), since Japanese keeps them in order and adds
vowels between them (Shark -> シャーク shaaku: "sk"). Chinese characters are read in runs of the
name's syllables, so they must match closer: consonants and vowel groups in the same places,
and most vowels alike (`sound_shape`: Sony -> 索尼 suo ni, "sVn"; 不超 bu chao is not Beats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Digits and signs that stand for letters, one table per reading of 1 (as i, and as l).
LEET_READINGS = (
    str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a",
                   "$": "s", "!": "i", "|": "l"}),
    str.maketrans({"0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a",
                   "$": "s", "!": "i", "|": "l"}),
)  # fmt: skip
# Digits a reader spells out inside an id ("B zero C 7 ..."): the words read back as digits.
_DIGIT_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9",
}  # fmt: skip
_DIGIT_WORD = re.compile(rf"\b(?:{'|'.join(_DIGIT_WORDS)})\b")
KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# A word with a letter of another alphabet: Cyrillic, Greek, Hangul, Arabic, Hebrew, Thai...
_OTHER_SCRIPT_WORD = re.compile(
    r"\b\w*[\u0370-\u03ff\u0400-\u04ff\u0590-\u06ff\u0e00-\u0e7f\uac00-\ud7af]\w*\b"
)
_HAN_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_HEX = re.compile(r"#([0-9a-f]{3})\b|(?<![0-9a-z])#?([0-9a-f]{6})(?![0-9a-z])")
# A transcribed name is at most this many syllables long (Sennheiser: 森海塞尔, four).
MAX_NAME_SYLLABLES = 4
MIN_SOUND_KEY = 2  # consonants: "sn" (Sony) is the shortest key that names anything


def leet_readings(text: str) -> tuple[str, ...]:
    """`text` with every digit or sign that stands for a letter read as that letter, once per
    reading of 1 (i, l); texts without such characters have no extra reading."""
    return tuple(dict.fromkeys(r for t in LEET_READINGS if (r := text.translate(t)) != text))


def spelled_digits(normalized: str) -> str:
    """Digit words read back as digits ("b zero c7" -> "b 0 c7"), for ids spelled aloud."""
    return _DIGIT_WORD.sub(lambda match: _DIGIT_WORDS[match.group(0)], normalized)


@lru_cache(maxsize=1)
def _kakasi():  # type: ignore[no-untyped-def]
    import pykakasi  # imported on first kana: its dictionaries take 0.5 s to load

    return pykakasi.kakasi()


def romaji_words(text: str) -> list[tuple[str, str]]:
    """(original, Hepburn romaji) of each kana word of `text`."""
    if not KANA.search(text):
        return []
    return [
        (item["orig"], item["hepburn"])
        for item in _kakasi().convert(text)
        if KANA.search(item["orig"]) and item["hepburn"]
    ]


@lru_cache(maxsize=4096)
def pinyin(text: str) -> tuple[str, ...]:
    """The pinyin syllable of each Chinese character of `text`, other text dropped."""
    from pypinyin import lazy_pinyin  # imported on first Chinese text (0.3 s)

    return tuple(syllable for char in HAN.findall(text) for syllable in lazy_pinyin(char))


@lru_cache(maxsize=4096)
def other_script_words(text: str) -> tuple[tuple[str, str], ...]:
    """(original, `unidecode` transliteration) of each word in a script other than Latin,
    Chinese or kana (Cyrillic Шарк, Hangul 소니, Greek): read aloud in Latin letters."""
    found = _OTHER_SCRIPT_WORD.findall(text)
    if not found:
        return ()
    from unidecode import unidecode

    return tuple((word, unidecode(word).casefold()) for word in found)


@lru_cache(maxsize=4096)
def pinyin_form(term: str) -> str:
    """A term with its Chinese characters written in pinyin, glued ("小米" -> "xiaomi")."""
    if not HAN.search(term):
        return term
    return _HAN_RUN.sub(lambda match: "".join(pinyin(match.group(0))), term)


@lru_cache(maxsize=1024)  # one text is read for every brand of the gold
def han_sound_windows(text: str, syllables: int) -> list[tuple[str, SoundShape]]:
    """(characters, sound shape) of every run of `syllables` Chinese characters in `text`."""
    found = []
    for run in _HAN_RUN.findall(text):
        sounds = pinyin(run)
        for start in range(len(run) - syllables + 1):
            window = run[start : start + syllables]
            found.append((window, sound_shape(" ".join(sounds[start : start + syllables]))))
    return found


# Spellings that a transcription merges: voiced and voiceless pairs, l and r, the sibilants.
_SOUND_SPELLINGS = (
    ("ph", "f"), ("ck", "k"), ("qu", "kw"), ("x", "ks"), ("th", "t"), ("gh", ""), ("wh", "w"),
    ("sch", "s"), ("tsu", "s"), ("ts", "s"), ("sh", "s"), ("ch", "s"), ("zh", "s"), ("j", "s"),
    ("z", "s"), ("c", "k"), ("q", "k"), ("g", "k"), ("d", "t"), ("b", "p"), ("v", "p"),
    ("l", "r"),
)  # fmt: skip
# Chinese transcription keeps a Latin stop's voicing as pinyin's aspiration (b d g -> b d g,
# p t k -> p t k: 戴森 dai sen is Dyson, 特斯拉 te si la is Tesla), so Chinese characters are
# heard with those three pairs apart: 推荐 (tui jian, "recommend") is not Dyson.
_VOICED_PAIRS = (("d", "t"), ("b", "p"), ("g", "k"))
_HAN_SOUND_SPELLINGS = tuple(pair for pair in _SOUND_SPELLINGS if pair not in _VOICED_PAIRS)
_VOWELS = "aeiouy"


def _merged(word: str, spellings: tuple[tuple[str, str], ...] = _SOUND_SPELLINGS) -> str:
    """Letters as a transcription hears them: doubled letters once, an r after a vowel and
    before a consonant or the end dropped (Shark -> シャーク), the spellings above merged; a y
    before a vowel at a word's start is a consonant (Yamaha), elsewhere a vowel (Sony)."""
    merged = []
    for part in re.findall(r"[a-z]+", word.casefold()):
        letters = re.sub(r"(.)\1+", r"\1", part)
        letters = re.sub(r"(?<=[aeiouy])r(?![aeiouy])", "", letters)
        letters = re.sub(r"ng(?![aeiou])", "n", letters)
        letters = re.sub(r"^y(?=[aeiou])", "Y", letters)
        for spelling, sound in spellings:
            letters = letters.replace(spelling, sound)
        merged.append(letters)
    return "".join(merged)


@lru_cache(maxsize=8192)
def sound_key(word: str) -> str:
    """The consonants of a word in order, as a transcription keeps them (see _merged): "shark"
    and "shaaku" are "sk". Kana words are compared by it, whole."""
    return "".join(char for char in _merged(word) if char not in _VOWELS)


@dataclass(frozen=True)
class SoundShape:
    """Consonants with V for each vowel group, a last vowel dropped (Chinese adds one: 鲨客),
    and the vowel groups: "sony" and "suo ni" are both sVn, with vowels o/uo and y/i."""

    shape: str
    vowels: tuple[str, ...]

    def heard_as(self, other: SoundShape) -> bool:
        """The same shape, and at least half of the vowel groups in order sharing a letter
        (y counts as i): 索尼 is Sony, 不超 (bu chao) is not Beats."""
        if self.shape != other.shape:
            return False
        pairs = list(zip(self.vowels, other.vowels, strict=False))
        agree = sum(bool(set(a.replace("y", "i")) & set(b.replace("y", "i"))) for a, b in pairs)
        return 2 * agree >= len(pairs)


@lru_cache(maxsize=8192)
def sound_shape(word: str) -> SoundShape:
    """The shape a Latin name and a run of pinyin are compared by (voicing kept: see
    _HAN_SOUND_SPELLINGS)."""
    merged = _merged(word, _HAN_SOUND_SPELLINGS)
    vowels = tuple(re.findall(r"[aeiouy]+", merged))
    shape = re.sub(r"[aeiouy]+", "V", merged).removesuffix("V")
    return SoundShape(shape, vowels)


def syllable_count(word: str) -> int:
    """Vowel groups of a Latin word: the characters a Chinese transcription takes."""
    return max(1, len(re.findall(r"[aeiouy]+", word.casefold())))


@lru_cache(maxsize=4096)
def spelling_variants(term: str) -> tuple[str, ...]:
    """`term` (normalized) with each word in its US and UK spellings (breame's word lists)."""
    from breame.spelling import get_american_spelling, get_british_spelling

    forms = [term]
    for word in set(re.findall(r"[a-z]+", term)):
        for other in (get_british_spelling(word), get_american_spelling(word)):
            if other != word:
                forms += [re.sub(rf"\b{word}\b", other, form) for form in forms]
    return tuple(dict.fromkeys(forms))


@lru_cache(maxsize=4096)
def colour_hex(term: str) -> str | None:
    """The CSS hex value of a colour named by `term` ("Forest Green" -> "228b22"), if any."""
    import webcolors

    name = re.sub(r"[^a-z]", "", term.casefold())
    try:
        return webcolors.name_to_hex(name).lstrip("#").casefold()
    except ValueError:
        return None


def hex_codes(normalized: str) -> set[str]:
    """The six-digit colour codes written in a text (#228B22, 228b22; #abc is #aabbcc)."""
    codes = set()
    for short, code in _HEX.findall(normalized):
        code = code or short
        codes.add(code if len(code) == 6 else "".join(char * 2 for char in code))
    return codes
