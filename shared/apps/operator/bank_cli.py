"""`intraskill bank ...`: read, compare, render, promote and roll back skill banks.

A BANK argument is a bank id (`12`) or an alias name (`current`, `production`). Moving an alias
is a compare-and-set: `--expect ETAG` (printed by `show ALIAS`) makes the move fail if anyone
moved the alias since you looked; without it the command reads the ETag itself just before.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from shared.apps.operator.common import (
    JsonOption,
    OperatorError,
    RegistryOption,
    console,
    number,
    print_json,
    registry,
    run_app,
    table,
)
from shared.contracts.registry_api.client import NotFound, RegistryClient, Unavailable
from shared.contracts.registry_api.schemas import AliasPublic, BankPublic, BankStatus, BankSummary

app = typer.Typer(
    help="operator: show, list, diff, history, render, promote and roll back banks",
    no_args_is_help=True,
    add_completion=False,
)

BankArg = Annotated[str, typer.Argument(help="bank id, or an alias name such as current")]
ReasonOption = Annotated[str, typer.Option(help="why; recorded in the alias history")]
ExpectOption = Annotated[
    str | None, typer.Option(help="the alias ETag you decided on (from `bank show ALIAS`)")
]


def resolve(client: RegistryClient, ref: str) -> tuple[int, AliasPublic | None]:
    """A bank id, and the alias when `ref` named one."""
    if ref.isdigit():
        return int(ref), None
    alias = client.get_alias(ref)
    return alias.bank_id, alias


def subject_of(ref: str) -> str:
    return f"bank {ref}" if ref.isdigit() else f"alias {ref}"


@app.command("show")
def show(bank: BankArg, registry_url: RegistryOption = None, as_json: JsonOption = False) -> None:
    """A bank's status, lineage and entries (chunk, version, rho, admitting coefficient)."""
    with registry(registry_url, subject=subject_of(bank)) as client:
        bank_id, alias = resolve(client, bank)
        summary = client.bank_summary(bank_id)
        document = client.get_bank(bank_id)
        aliases = client.list_aliases(bank_id=bank_id)
    if as_json:
        print_json({"alias": alias, "summary": summary, "bank": document, "aliases": aliases})
        return
    out = console()
    if alias is not None:
        out.print(
            f"alias [bold]{alias.name}[/] -> bank {alias.bank_id}, revision {alias.revision}, "
            f"ETag {alias.etag}  (move it with --expect '{alias.etag}')"
        )
    out.print(_headline(summary, aliases))
    out.print(_entries_table(document))


def _headline(summary: BankSummary, aliases: list[AliasPublic]) -> str:
    parts = [
        f"[bold]bank {summary.id}[/]",
        summary.status.value,
        f"round {summary.round}",
        f"q {summary.q:.2f}",
        f"{summary.n_entries} chunks",
        f"parent {summary.parent_bank_id if summary.parent_bank_id is not None else '-'}",
        f"gate decision {summary.gate_decision_id if summary.gate_decision_id else '-'}",
    ]
    if summary.content_hash:
        parts.append(f"hash {summary.content_hash[:12]}")
    if aliases:
        parts.append("aliases " + ", ".join(a.name for a in aliases))
    return "  ".join(parts)


def _entries_table(bank: BankPublic):
    rows = [
        [
            entry.position,
            f"{entry.slug} (#{entry.chunk_id})",
            entry.version,
            number(entry.rho, 2),
            number(entry.coefficient, 4),
            entry.content.title,
        ]
        for entry in bank.entries
    ]
    return table(
        f"bank {bank.id}: chunks in prompt order",
        ["pos", "chunk", "v", "rho", "coef", "title"],
        rows,
    )


@app.command("list")
def list_banks(
    status: Annotated[BankStatus | None, typer.Option(help="draft, frozen or retired")] = None,
    round: Annotated[int | None, typer.Option(help="only this round")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    registry_url: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Banks, newest first would hide lineage: oldest first, as the registry pages them."""
    with registry(registry_url, subject="the bank list") as client:
        page = client.list_banks(status=status, round=round, limit=limit)
        aliases = client.list_aliases()
    if as_json:
        print_json({"items": page.items, "total": page.total, "aliases": aliases})
        return
    pointed: dict[int, list[str]] = {}
    for alias in aliases:
        pointed.setdefault(alias.bank_id, []).append(alias.name)
    rows = [
        [
            s.id,
            s.status.value,
            s.round,
            s.n_entries,
            s.parent_bank_id,
            s.gate_decision_id,
            ", ".join(pointed.get(s.id, [])) or None,
            (s.content_hash or "")[:12] or None,
        ]
        for s in page.items
    ]
    columns = ["id", "status", "round", "chunks", "parent", "decision", "aliases", "hash"]
    console().print(table(f"banks ({len(page.items)} of {page.total})", columns, rows))


@app.command("diff")
def diff(
    bank: BankArg,
    against: Annotated[
        str | None, typer.Option(help="the older bank (id or alias); default: its parent")
    ] = None,
    registry_url: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """What changed from an older bank: added, retired, rewritten chunks and rho changes."""
    with registry(registry_url, subject=subject_of(bank)) as client:
        bank_id, _ = resolve(client, bank)
        if against is None:
            parent = client.bank_summary(bank_id).parent_bank_id
            if parent is None:
                raise OperatorError(f"bank {bank_id} has no parent: pass --against BANK")
            old_id = parent
        else:
            old_id, _ = resolve(client, against)
        change = client.diff_banks(bank_id, old_id)
    if as_json:
        print_json(change)
        return
    rows: list[list[object]] = []
    rows += [["added", f"{c.slug} (#{c.chunk_id})", f"v{c.version}"] for c in change.added]
    rows += [["retired", f"{c.slug} (#{c.chunk_id})", f"v{c.version}"] for c in change.retired]
    rows += [
        ["rewritten", f"{c.slug} (#{c.chunk_id})", f"v{c.from_version} -> v{c.to_version}"]
        for c in change.rewritten
    ]
    rows += [
        ["rho", f"{c.slug} (#{c.chunk_id})", f"{c.from_rho:.2f} -> {c.to_rho:.2f}"]
        for c in change.rho_changes
    ]
    if change.order_changed:
        rows.append(["order", "-", "chunk order changed"])
    title = f"bank {change.from_bank_id} -> bank {change.to_bank_id}"
    if not rows:
        console().print(f"{title}: no changes")
        return
    console().print(table(title, ["change", "chunk", "detail"], rows))


@app.command("history")
def history(
    alias: Annotated[str, typer.Argument(help="alias name")] = "current",
    registry_url: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every move of an alias, oldest first: who, when, why, on which gate decision."""
    with registry(registry_url, subject=f"alias {alias}") as client:
        events = client.alias_history(alias)
    if as_json:
        print_json(events)
        return
    rows = [
        [
            e.revision,
            e.action.value,
            f"{e.from_bank_id if e.from_bank_id is not None else '-'} -> {e.to_bank_id}",
            f"{e.actor} ({e.role.value})",
            e.gate_decision_id,
            e.reason,
            e.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        ]
        for e in events
    ]
    columns = ["rev", "action", "bank", "actor", "decision", "reason", "time (UTC)"]
    console().print(table(f"alias {alias}: history", columns, rows))


@app.command("render")
def render(
    bank: BankArg,
    inclusion: Annotated[
        str | None, typer.Option(help="comma-separated 0/1 per chunk in bank order; default all")
    ] = None,
    registry_url: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """The exact skill block the policy sees for an inclusion vector."""
    vector = None if inclusion is None else _inclusion(inclusion)
    with registry(registry_url, subject=subject_of(bank)) as client:
        bank_id, _ = resolve(client, bank)
        rendered = client.render_bank(bank_id, vector)
    if as_json:
        print_json(rendered)
        return
    print(rendered.text)  # plain print: the text exactly as injected, no markup


def _inclusion(text: str) -> list[int]:
    values = [part.strip() for part in text.split(",")]
    if not values or any(v not in {"0", "1"} for v in values):
        raise OperatorError(f"--inclusion must be 0s and 1s separated by commas, got {text!r}")
    return [int(v) for v in values]


@app.command("promote")
def promote(
    bank: BankArg,
    reason: ReasonOption,
    alias: Annotated[str, typer.Option(help="the alias to point at the bank")] = "production",
    expect: ExpectOption = None,
    freeze: Annotated[bool, typer.Option(help="freeze the bank first if it is a draft")] = False,
    gate_decision: Annotated[
        int | None, typer.Option(help="the gate decision that justifies the move")
    ] = None,
    registry_url: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Point an alias (default production) at a frozen bank; creates the alias if absent."""
    with registry(registry_url, subject=f"alias {alias}") as client:
        bank_id, _ = resolve(client, bank)
        _frozen_or_freeze(client, bank_id, freeze=freeze)
        try:
            before = client.get_alias(alias)
        except NotFound:
            after = client.create_alias(
                alias, bank_id, reason=reason, gate_decision_id=gate_decision
            )
            _report_move(alias, None, after, as_json)
            return
        if before.bank_id == bank_id and expect is None:
            _report_move(alias, before, before, as_json)
            return
        after = client.move_alias(
            alias,
            bank_id,
            reason=reason,
            if_match=expect or before.etag,
            gate_decision_id=gate_decision,
        )
    _report_move(alias, before, after, as_json)


def _frozen_or_freeze(client: RegistryClient, bank_id: int, *, freeze: bool) -> None:
    status = client.bank_summary(bank_id).status
    if status is BankStatus.draft:
        if not freeze:
            raise OperatorError(
                f"bank {bank_id} is a draft: aliases point at frozen banks only; "
                "re-run with --freeze to freeze it first"
            )
        client.freeze_bank(bank_id)
    elif status is BankStatus.retired:
        raise OperatorError(
            f"bank {bank_id} is retired; rebuild it as a new draft (POST /v1/banks "
            "from_bank_id) and promote that"
        )


@app.command("rollback")
def rollback(
    alias: Annotated[str, typer.Argument(help="alias name")],
    reason: ReasonOption,
    to: Annotated[
        int | None, typer.Option(help="an earlier bank id; default: the previous one")
    ] = None,
    expect: ExpectOption = None,
    registry_url: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Point an alias back at its previous bank (or an earlier one with --to); operator only."""
    with registry(registry_url, subject=f"alias {alias}") as client:
        before = client.get_alias(alias)
        after = client.rollback_alias(alias, reason=reason, bank_id=to, if_match=expect)
    _report_move(alias, before, after, as_json)


def _report_move(alias: str, before: AliasPublic | None, after: AliasPublic, as_json: bool) -> None:
    if as_json:
        print_json({"before": before, "after": after})
        return
    if before is None:
        message = f"{alias}: created -> bank {after.bank_id}"
    elif before.revision == after.revision:
        message = f"{alias} already points at bank {after.bank_id}; nothing to do"
    else:
        message = f"{alias}: bank {before.bank_id} -> bank {after.bank_id}"
    console().print(f"{message} (revision {after.revision}, ETag {after.etag})")


@app.command("s0")
def s0(
    stand_in: Annotated[
        bool,
        typer.Option(
            "--stand-in",
            help="seed the STAND-IN S_0 (a TEST DOUBLE of the cold start: four stand-in chunks)",
        ),
    ],
    trainer_config: Annotated[
        Path, typer.Option(help="the trainer's TOML config: S_0 takes its q and rho bounds")
    ],
    alias: Annotated[str, typer.Option(help="the alias S_0 goes behind")] = "current",
    wait: Annotated[
        float, typer.Option(min=0, help="seconds to wait for the registry to answer")
    ] = 600.0,
    registry_url: RegistryOption = None,
) -> None:
    """S_0 behind ALIAS, once (the deployment's bank-s0 Job): nothing if the alias exists."""
    import tomllib

    from shared.runtime.standin_s0 import seed_standin_s0

    if not stand_in:
        raise OperatorError("only --stand-in is implemented; run the cold start for a real S_0")
    config = tomllib.loads(trainer_config.read_text())
    bounds = {name: config[name] for name in ("q", "rho_min", "rho_max") if name in config}
    with registry(registry_url, subject=f"alias {alias}") as client:
        existing = _alias_once_reachable(client, alias, wait)
        if existing is not None:
            console().print(f"S_0 exists: {alias} -> bank {existing.bank_id}; nothing to do")
            return
        bank_id = seed_standin_s0(
            client, alias=alias, key=f"bank-s0:{alias}", seeded_by="the bank-s0 Job", **bounds
        )
    console().print(f"S_0: {alias} -> bank {bank_id} (STAND-IN chunks, no cold start ran)")


def _alias_once_reachable(client: RegistryClient, alias: str, wait: float) -> AliasPublic | None:
    """The alias, or None if the registry has none, asking until the registry answers (it may
    start after this Job does); Unavailable once `wait` seconds have passed."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return client.get_alias(alias)
        except NotFound:
            return None
        except Unavailable:
            if time.monotonic() >= deadline:
                raise
            print("waiting for the registry to answer ...", file=sys.stderr, flush=True)
            time.sleep(5)


def main(argv: list[str]) -> int:
    """Entry point for `intraskill bank`."""
    return run_app(app, argv, "intraskill bank")
