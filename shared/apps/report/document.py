"""One report, two renderings: the same blocks become Markdown and a self-contained HTML page."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Table:
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    caption: str = ""


@dataclass
class Image:
    path: Path
    alt: str


Block = Heading | Paragraph | Table | Image


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block | None) -> None:
        self.blocks.extend(b for b in blocks if b is not None)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def to_markdown(document: Document, base: Path) -> str:
    """Markdown with images linked relative to `base` (the folder report.md is written to)."""
    out = [f"# {document.title}", ""]
    for block in document.blocks:
        if isinstance(block, Heading):
            out += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, Paragraph):
            out += [block.text, ""]
        elif isinstance(block, Table):
            if block.caption:
                out += [f"*{block.caption}*", ""]
            out.append("| " + " | ".join(block.columns) + " |")
            out.append("| " + " | ".join("---" for _ in block.columns) + " |")
            for row in block.rows:
                cells = (_cell(c).replace("|", "\\|") for c in row)
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        elif isinstance(block, Image):
            out += [f"![{block.alt}]({block.path.relative_to(base).as_posix()})", ""]
    return "\n".join(out)


def _html_cell(value: Any) -> str:
    # numbers line up on the right, text reads from the left
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    return f'<td class="{"num" if numeric else "text"}">{html.escape(_cell(value))}</td>'


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC",
       sans-serif; max-width: 1180px; margin: 2em auto; padding: 0 1.2em; color: #1a1a1a;
       line-height: 1.45; }
h1 { border-bottom: 2px solid #1565c0; padding-bottom: .3em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 14px; }
th, td { border: 1px solid #d0d0d0; padding: 4px 10px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f0f4fa; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: .3em; }
img { max-width: 100%; border: 1px solid #e0e0e0; margin: .4em 0 1em; }
p { max-width: 900px; }
"""


def to_html(document: Document) -> str:
    """One HTML file with every image inlined as a data URI: nothing else to ship."""
    body = [f"<h1>{html.escape(document.title)}</h1>"]
    for block in document.blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{html.escape(block.text)}</p>")
        elif isinstance(block, Table):
            caption = f"<caption>{html.escape(block.caption)}</caption>" if block.caption else ""
            head = "".join(f"<th>{html.escape(c)}</th>" for c in block.columns)
            rows = "".join(
                "<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in block.rows
            )
            body.append(
                f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
            )
        elif isinstance(block, Image):
            data = base64.b64encode(block.path.read_bytes()).decode("ascii")
            body.append(f'<img alt="{html.escape(block.alt)}" src="data:image/png;base64,{data}">')
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(document.title)}</title><style>{STYLE}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )
