"""A person's data: handed to them (``export-user``) or erased (``erase-user``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from .. import _validation
from .._database import dialect_name
from .._export import UserExport
from ._app import Settings, cli, common, open_engine
from ._output import emit, pairs


def _summary(export: UserExport) -> dict[str, int | bool]:
    return {
        "facts": len(export.facts),
        "proposals": len(export.proposals),
        "account_facts": len(export.account_facts),
        "memories": len(export.memories),
        "marks": len(export.marks),
        "administrator": export.administrator,
    }


@cli.command("export-user")
@click.argument("account")
@click.argument("user")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the JSON to this file (readable by its owner only) instead of printing it.",
)
@common
@click.pass_context
def export_user(ctx: click.Context, account: str, user: str, output: Path | None) -> None:
    """Everything the memory holds about USER in ACCOUNT, as JSON (a person's right of access).

    Every version of every fact in their own namespaces, their proposals, the
    account facts they stated or confirmed, their memories and the read marks
    about them.
    """
    export = open_engine(ctx).export_user(account, user)
    document = json.dumps(export.to_dict(), indent=2, ensure_ascii=False)
    if output is None:
        click.echo(document)
        return
    # Created unreadable to others before the first byte is written: it is personal data.
    descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if hasattr(os, "fchmod"):  # a file that was there keeps its mode otherwise
        os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(document + "\n")
    counts = _summary(export)
    emit(ctx.obj, {"file": str(output), **counts}, lambda: pairs({"file": output, **counts}))


@cli.command("erase-user")
@click.argument("account")
@click.argument("user")
@click.option("--yes", is_flag=True, help="Do not ask to confirm.")
@common
@click.pass_context
def erase_user(ctx: click.Context, account: str, user: str, yes: bool) -> None:
    """Delete everything about USER in ACCOUNT, for every reader, and print what went.

    Confirmed account facts they stated stay, their name replaced by a
    pseudonym. On PostgreSQL, run `korely scrub` afterwards to remove the
    deleted rows from the database's files.
    """
    _validation.name("account", account)
    _validation.name("user", user)
    engine = open_engine(ctx)
    if not yes:
        click.confirm(
            f"Erase everything about {user!r} in {account!r}? It cannot be undone",
            abort=True,
            err=True,
        )
    report = engine.erase_user(account, user)
    settings: Settings = ctx.obj
    emit(settings, report, lambda: pairs(vars(report)))
    if dialect_name(engine.db) == "postgresql":
        click.echo(
            "korely: the rows are gone for every reader; their bytes stay in PostgreSQL's files "
            "until `korely scrub` rewrites the tables",
            err=True,
        )
