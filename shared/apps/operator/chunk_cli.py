"""`intraskill chunk ...`: one chunk's current text and its version history."""

from __future__ import annotations

from typing import Annotated

import typer

from shared.apps.operator.common import (
    JsonOption,
    OperatorError,
    RegistryOption,
    console,
    print_json,
    registry,
    run_app,
    table,
)
from shared.contracts.chunks import render_chunk
from shared.contracts.registry_api.client import RegistryClient

app = typer.Typer(
    help="operator: a chunk's text and version history", no_args_is_help=True, add_completion=False
)

ChunkArg = Annotated[str, typer.Argument(help="chunk id or slug")]


def resolve(client: RegistryClient, ref: str) -> int:
    """A chunk id from an id or an exact slug."""
    if ref.isdigit():
        return int(ref)
    page = client.list_chunks(slug_prefix=ref, limit=500)
    for chunk in page.items:
        if chunk.slug == ref:
            return chunk.id
    raise OperatorError(f"no chunk with slug {ref!r}; `intraskill bank show current` lists some")


@app.command("show")
def show(
    chunk: ChunkArg,
    version: Annotated[int | None, typer.Option(help="a version number; default latest")] = None,
    registry_url: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """A chunk version's fields, source and provenance (cards, candidate)."""
    with registry(registry_url, subject=f"chunk {chunk}") as client:
        chunk_id = resolve(client, chunk)
        found = (
            client.get_chunk(chunk_id).latest
            if version is None
            else client.get_chunk_version(chunk_id, version)
        )
    if as_json:
        print_json(found)
        return
    out = console()
    provenance = found.provenance
    out.print(
        f"[bold]chunk {found.slug}[/] (#{found.chunk_id}) version {found.version}  "
        f"source {found.source.value}  by {found.author}  "
        f"{found.created_at:%Y-%m-%d %H:%M}  hash {found.content_hash[:12]}"
    )
    if provenance.card_ids or provenance.candidate_id:
        out.print(
            f"from cards {provenance.card_ids or '-'}, candidate {provenance.candidate_id or '-'}"
        )
    out.print(render_chunk(found.content), markup=False, highlight=False)


@app.command("history")
def history(chunk: ChunkArg, registry_url: RegistryOption = None, as_json: JsonOption = False):
    """Every version of a chunk, oldest first."""
    with registry(registry_url, subject=f"chunk {chunk}") as client:
        versions = client.chunk_history(resolve(client, chunk))
    if as_json:
        print_json(versions)
        return
    rows = [
        [
            v.version,
            v.source.value,
            v.author,
            ",".join(map(str, v.provenance.card_ids)) or None,
            v.provenance.candidate_id,
            v.content_hash[:12],
            f"{v.created_at:%Y-%m-%d %H:%M}",
            v.content.title,
        ]
        for v in versions
    ]
    title = f"chunk {versions[0].slug} (#{versions[0].chunk_id}): versions" if versions else ""
    columns = ["v", "source", "author", "cards", "candidate", "hash", "time (UTC)", "title"]
    console().print(table(title, columns, rows))


def main(argv: list[str]) -> int:
    """Entry point for `intraskill chunk`."""
    return run_app(app, argv, "intraskill chunk")
