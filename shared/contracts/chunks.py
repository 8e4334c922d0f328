"""Skill chunks: the content contract and the one renderer every prompt and the registry use.

A chunk is the smallest maskable intervention of the scene-level skill: its own trigger
(`applies_when`), ordered `procedure`, `verify` check and `avoid` warning. Rendering is a pure
function of the content, so a prompt, the registry's render endpoint and a gate record always
agree byte for byte.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from shared.contracts.hashing import content_hash

MAX_TITLE_CHARS = 200
MAX_FIELD_CHARS = 2000
MAX_STEPS = 20


def nfc(text: str) -> str:
    """One spelling per text: NFC, so an NFD copy of a chunk is the same content and hash."""
    return unicodedata.normalize("NFC", text)


# Characters that render as nothing (or as blank) outside category Cf: Unicode's
# Default_Ignorable_Code_Point set (DerivedCoreProperties.txt) less its Cf members, which the
# category test catches, plus the blank braille pattern.
_INVISIBLE_OUTSIDE_CF = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u2800\u3164"
    "\ufe00-\ufe0f\uffa0\ufff0-\ufff8\U000e0000-\U000e0fff]"
)
# What may be unprintable yet visible in text: line breaks, tabs and spaces of every width.
_VISIBLE_UNPRINTABLE = frozenset("\n\r\t")


def no_invisible(text: str) -> str:
    """Refuse invisible characters: format characters (category Cf: zero-width spaces and
    joiners, word joiners, BOMs, bidirectional marks and overrides) and the other characters
    that draw nothing (fillers, variation selectors, the grapheme joiner, a blank braille
    cell). They make look-alike text and hide instructions in what a prompt renders; refused
    rather than stripped, so what is stored is exactly what was sent. One rule for every
    text field of every contract."""
    if not text.isprintable():  # the C-speed test passes ordinary text without a loop
        for char in text:
            if (
                not char.isprintable()
                and char not in _VISIBLE_UNPRINTABLE
                and unicodedata.category(char) == "Cf"
            ):
                raise ValueError(f"must not contain invisible characters (U+{ord(char):04X})")
    found = _INVISIBLE_OUTSIDE_CF.search(text)
    if found:
        raise ValueError(f"must not contain invisible characters (U+{ord(found[0]):04X})")
    return text


Title = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TITLE_CHARS),
    AfterValidator(nfc),
    AfterValidator(no_invisible),
]
FieldText = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_FIELD_CHARS),
    AfterValidator(nfc),
    AfterValidator(no_invisible),
]

# The reference's renderer `plain-skill-context-v1`: a header, a caveat line, then one tagged
# element per injected chunk in bank order.
SKILL_BLOCK_HEADER = "[可选策略提示]"
SKILL_BLOCK_CAVEAT = "这些提示只提供通用策略；仍需依据当前任务和页面独立核验。"
RENDERER_VERSION = "plain-skill-context-v1"


class ChunkContent(BaseModel):
    """The four fields of a chunk plus its title; immutable once a version is created."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: Title
    applies_when: FieldText
    procedure: list[FieldText] = Field(min_length=1, max_length=MAX_STEPS)
    verify: FieldText
    avoid: FieldText

    def content_hash(self) -> str:
        """Identity of the text: two versions with equal hashes are the same content."""
        return content_hash(self.model_dump(mode="json"))


class InjectedChunk(BaseModel):
    """A chunk version as it enters a prompt: its logical id, version number and content."""

    model_config = ConfigDict(frozen=True)

    chunk_id: str
    version: int
    content: ChunkContent


def render_chunk(content: ChunkContent) -> str:
    """Markdown body of one chunk: `### title`, then Applies when / Procedure / Verify / Avoid."""
    steps = "\n".join(f"  {number}. {step}" for number, step in enumerate(content.procedure, 1))
    return (
        f"### {content.title}\n"
        f"- Applies when: {content.applies_when}\n"
        f"- Procedure:\n{steps}\n"
        f"- Verify: {content.verify}\n"
        f"- Avoid: {content.avoid}"
    )


def render_skill_block(
    chunks: Sequence[InjectedChunk],
    *,
    header: str = SKILL_BLOCK_HEADER,
    caveat: str = SKILL_BLOCK_CAVEAT,
) -> str:
    """The skill block for the injected chunks, in the given (bank) order; '' when none.

    An empty mask renders nothing at all, so a bare prompt and a skill prompt differ only in
    this block.
    """
    if not chunks:
        return ""
    elements = [
        f'<skill id="{chunk.chunk_id}" version="{chunk.version}">\n'
        f"{render_chunk(chunk.content)}\n</skill>"
        for chunk in chunks
    ]
    return "\n".join([header, caveat, *elements])


def select_injected(
    chunks: Sequence[InjectedChunk], inclusion: Sequence[int | bool]
) -> list[InjectedChunk]:
    """The chunks an inclusion vector switches on, in bank order."""
    if len(inclusion) != len(chunks):
        raise ValueError(f"inclusion vector has {len(inclusion)} entries for {len(chunks)} chunks")
    if any(value not in (0, 1, True, False) for value in inclusion):
        raise ValueError("inclusion vector entries must be 0 or 1")
    return [chunk for chunk, included in zip(chunks, inclusion, strict=True) if included]
