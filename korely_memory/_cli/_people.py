"""A person's data: handed to them (``export-user``), erased (``erase-user``) or restored from
an export (``import-user``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from .. import UserExport
from .._values import _validation
from .._values._errors import InvalidRequest, NotFound
from ._app import Settings, cli, common, open_engine
from ._lists import known_users
from ._output import did_you_mean, emit, pairs


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
    # A folder that is not there is not made: a typo in the path would hide the file.
    try:
        # Created unreadable to others before the first byte is written: it is personal data.
        descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if hasattr(os, "fchmod"):  # a file that was there keeps its mode otherwise
            os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(document + "\n")
    except OSError as error:
        raise InvalidRequest("output", f"cannot write {str(output)!r}: {error.strerror}") from None
    counts = _summary(export)
    emit(ctx.obj, {"file": str(output), **counts}, lambda: pairs({"file": output, **counts}))


@cli.command("erase-user")
@click.argument("account")
@click.argument("user")
@click.option("--yes", is_flag=True, help="Do not ask to confirm.")
@click.option(
    "--missing-ok",
    is_flag=True,
    help="Succeed when the memory holds nothing about USER (an erasure run again).",
)
@common
@click.pass_context
def erase_user(ctx: click.Context, account: str, user: str, yes: bool, missing_ok: bool) -> None:
    """Delete everything about USER in ACCOUNT, for every reader, and print what went.

    Confirmed account facts they stated stay, their name replaced by a
    pseudonym. On PostgreSQL, run `korely scrub` afterwards to remove the
    deleted rows from the database's files. Keep the pseudonym it prints:
    `import-user --pseudonym` needs it to name them again. When the memory holds nothing
    about USER (a misspelt name), nothing is erased and the command fails
    (not_found), naming the names it may have meant; --missing-ok makes that
    a success.
    """
    _validation.name("account", account)
    _validation.name("user", user)
    engine = open_engine(ctx)
    if not engine.listings.holds_user(account, user):
        if missing_ok:
            said = {"account": account, "user": user, "erased": False}
            emit(ctx.obj, said, lambda: f"nothing about {user!r} in {account!r} to erase")
            return
        accounts = engine.listings.accounts()
        if account not in accounts:
            hint = did_you_mean(account, accounts)
            raise NotFound(f"nothing erased: the memory holds nothing in account {account!r}{hint}")
        hint = did_you_mean(user, known_users(engine, account))
        raise NotFound(
            f"nothing erased: the memory holds nothing about {user!r} in {account!r}{hint}"
        )
    if not yes:
        click.confirm(
            f"Erase everything about {user!r} in {account!r}? It cannot be undone",
            abort=True,
            err=True,
        )
    report = engine.erase_user(account, user)
    settings: Settings = ctx.obj
    emit(settings, report, lambda: pairs(vars(report)))
    if engine.url.get_backend_name() == "postgresql":
        click.echo(
            "korely: the rows are gone for every reader; their bytes stay in PostgreSQL's files "
            "until `korely scrub` rewrites the tables",
            err=True,
        )


@cli.command("import-user")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--pseudonym",
    metavar="NAME",
    help="The pseudonym `erase-user` reported: the account facts held under it name them again.",
)
@click.option(
    "--administrator",
    is_flag=True,
    help="Restore the administrator grant the file records (a file alone grants nothing).",
)
@common
@click.pass_context
def import_user(ctx: click.Context, file: Path, pseudonym: str | None, administrator: bool) -> None:
    """Restore a person from FILE, written by `korely export-user`, and print what it holds.

    Every version and memory comes back under new ids with its times; their
    confirmed account facts are the account's and are not written (with
    --pseudonym, those the database holds under it name them again). Refused
    when the memory already holds something of the person, or the file is of
    another format than korely-user-export/1; one transaction, so a refusal
    or a failure changes nothing.
    """
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidRequest("file", f"cannot read {str(file)!r}: {error}") from None
    except json.JSONDecodeError as error:
        raise InvalidRequest("file", f"{str(file)!r} is not JSON: {error}") from None
    engine = open_engine(ctx)
    held = engine.import_user(data, pseudonym=pseudonym, administrator=administrator)
    counts = _summary(held)
    said = {"account": held.account, "user": held.user, **counts}
    emit(ctx.obj, said, lambda: pairs(said))
    left = [
        f"{len(data[part]) - counts[part]} of {len(data[part])} {part.replace('_', ' ')}"
        for part in ("account_facts", "marks")
        if isinstance(data.get(part), list) and len(data[part]) > counts[part]
    ]
    if left:
        click.echo(
            f"korely: left out {' and '.join(left)}: this database does not hold the "
            "versions they are of, or they are not the person's to bring",
            err=True,
        )
    if isinstance(data, dict) and data.get("administrator") is True and not administrator:
        click.echo(
            "korely: the file records an administrator grant, not restored: "
            "pass --administrator, or run `korely admins grant`",
            err=True,
        )
