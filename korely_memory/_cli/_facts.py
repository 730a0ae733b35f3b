"""Commands that read facts, review proposals and name administrators."""

from __future__ import annotations

import datetime as dt

import click

from .._values import _validation
from .._values._errors import NotFound
from .._values._identity import Identity, Scope
from ._app import ListByDefault, Settings, cli, common, moment_option, open_engine, user_or_none
from ._lists import known_users
from ._output import did_you_mean, emit, facts_table, table


@cli.command()
@click.argument("account")
@click.argument("user")
@click.argument("agent", required=False)
@click.option("--history", is_flag=True, help="Every version, ended ones too.")
@moment_option("--as-of", "What was true in the world then.")
@moment_option("--known-as-of", "As the memory knew it then.")
@common
@click.pass_context
def facts(
    ctx: click.Context,
    account: str,
    user: str,
    agent: str | None,
    history: bool,
    as_of: dt.date | None,
    known_as_of: dt.date | None,
) -> None:
    """The facts ACCOUNT USER AGENT sees, newest first.

    Without AGENT, USER's own facts and proposals under every agent definition of
    ACCOUNT, agent by agent (the account's facts, which every agent shows, are
    listed with an AGENT). USER may be '' for the memory of an agent that serves
    no particular person.
    """
    if history and (as_of or known_as_of):
        raise click.UsageError("--history lists every version; leave out --as-of/--known-as-of")
    _validation.name("account", account)
    owner = user_or_none(user)
    if owner is not None:
        _validation.name("user", owner)
    if agent is not None:
        _validation.name("agent", agent)
    engine = open_engine(ctx)
    known = [row["agent"] for row in engine.listings.agents(account)]
    found = []
    for each in [agent] if agent is not None else known:
        seen = engine.get_facts(
            Identity(account, owner, each),
            as_of=as_of,
            known_as_of=known_as_of,
            include_invalidated=history,
        )
        if agent is None:  # the account's facts are the agent's, not this person's
            seen = [f for f in seen if f.owner == owner and f.effective_scope != Scope.ACCOUNT]
        found += seen
    emit(ctx.obj, found, lambda: facts_table(found, versions=history))
    if found:
        return
    if agent is None:
        if owner is not None:
            people = known_users(engine, account)
            if owner not in people:
                click.echo(
                    f"korely: the memory holds nothing of {owner!r} in {account!r}"
                    f"{did_you_mean(owner, people)} (korely people {account} lists them)",
                    err=True,
                )
    elif agent not in known:
        click.echo(
            f"korely: no agent {agent!r} holds anything in {account!r}"
            f"{did_you_mean(agent, known)} (korely agents {account} lists them)",
            err=True,
        )


@cli.command()
@click.argument("account")
@click.argument("user")
@click.argument("agent")
@click.argument("key")
@common
@click.pass_context
def history(ctx: click.Context, account: str, user: str, agent: str, key: str) -> None:
    """Every version of KEY that ACCOUNT USER AGENT may see, oldest first.

    USER may be '' for the memory of an agent that serves no particular person.
    """
    engine = open_engine(ctx)
    found = engine.history(Identity(account, user_or_none(user), agent), key)
    emit(ctx.obj, found, lambda: facts_table(found, versions=True, empty="no versions"))


@cli.command()
@click.argument("account")
@click.argument("user")
@click.argument("agent")
@click.argument("key")
@click.option(
    "--erase",
    is_flag=True,
    help="Remove the words of every version too, and the conversation excerpts that hold them.",
)
@click.option("--yes", is_flag=True, help="Do not ask to confirm an erasure.")
@common
@click.pass_context
def forget(
    ctx: click.Context, account: str, user: str, agent: str, key: str, erase: bool, yes: bool
) -> None:
    """End the fact ACCOUNT USER AGENT keeps under KEY (an account fact too: as an operator).

    With --erase, the words of every version under KEY are removed, and so are the
    memories the fact was read from or that hold its words, as the memory tools do
    when a person asks that something not be kept.
    """
    engine = open_engine(ctx)
    who = Identity(account, user_or_none(user), agent)
    if erase and not yes:
        click.confirm(
            f"Erase every version of {key!r} and the excerpts that hold it? It cannot be undone",
            abort=True,
            err=True,
        )
    ended = engine.forget(who, key, erase=erase)
    emit(ctx.obj, ended, lambda: facts_table([ended], versions=True))


# -- review ------------------------------------------------------------------------------


@cli.group(cls=ListByDefault)
def review() -> None:
    """Proposed account facts: `review ACCOUNT` lists them; confirm or reject one by id."""


@review.command("list")
@click.argument("account")
@click.option("--agent", help="Only the proposals made through this agent definition.")
@common
@click.pass_context
def review_list(ctx: click.Context, account: str, agent: str | None) -> None:
    """The proposals of ACCOUNT waiting for an administrator, oldest first."""
    found = open_engine(ctx).proposals(account, agent)
    emit(ctx.obj, found, lambda: facts_table(found, empty="no proposals"))


def _decide(ctx: click.Context, fact_id: int, admin: str, *, confirm: bool) -> None:
    engine = open_engine(ctx)
    proposal = engine.listings.find_fact(fact_id)
    if proposal is None:
        raise NotFound(f"no fact {fact_id}")
    reviewer = Identity(proposal.account, admin, proposal.agent)
    decided = engine.confirm(reviewer, fact_id) if confirm else engine.reject(reviewer, fact_id)
    emit(ctx.obj, decided, lambda: facts_table([decided], versions=not confirm))


_ID = click.argument("fact_id", metavar="ID", type=click.IntRange(min=1))
_AS = click.option(
    "--as", "admin", required=True, help="The administrator of the fact's account deciding."
)


@review.command()
@_ID
@_AS
@common
@click.pass_context
def confirm(ctx: click.Context, fact_id: int, admin: str) -> None:
    """Confirm proposal ID: every user of its account sees it."""
    _decide(ctx, fact_id, admin, confirm=True)


@review.command()
@_ID
@_AS
@common
@click.pass_context
def reject(ctx: click.Context, fact_id: int, admin: str) -> None:
    """Reject proposal ID: it ends, is shown to nobody, and is kept for review."""
    _decide(ctx, fact_id, admin, confirm=False)


# -- administrators ----------------------------------------------------------------------


@cli.group("admins", cls=ListByDefault)
def admins_group() -> None:
    """Administrators: `admins ACCOUNT` lists them; grant or revoke one."""


@admins_group.command("list")
@click.argument("account")
@common
@click.pass_context
def admins_list(ctx: click.Context, account: str) -> None:
    """The administrators of ACCOUNT on the memory's own list (not an application's is_admin)."""
    _validation.name("account", account)
    names = open_engine(ctx).listings.admins(account)
    emit(ctx.obj, names, lambda: table(["administrator"], [[n] for n in names], empty="none"))


def _set_admin(ctx: click.Context, account: str, user: str, *, grant: bool) -> None:
    engine = open_engine(ctx)
    if not grant:
        _validation.name("account", account)
        _validation.name("user", user)
        listed = engine.listings.admins(account)
        if user not in listed:
            hint = did_you_mean(user, listed)
            raise NotFound(
                f"nothing revoked: {user!r} is not on the administrators' list of {account!r}{hint}"
            )
    (engine.grant_admin if grant else engine.revoke_admin)(account, user)
    settings: Settings = ctx.obj
    verb = "administers" if grant else "no longer administers"
    emit(
        settings,
        {"account": account, "user": user, "administrator": grant},
        lambda: f"{user} {verb} {account}",
    )


@admins_group.command()
@click.argument("account")
@click.argument("user")
@common
@click.pass_context
def grant(ctx: click.Context, account: str, user: str) -> None:
    """Make USER an administrator of ACCOUNT."""
    _set_admin(ctx, account, user, grant=True)


@admins_group.command()
@click.argument("account")
@click.argument("user")
@common
@click.pass_context
def revoke(ctx: click.Context, account: str, user: str) -> None:
    """Take administration of ACCOUNT away from USER.

    Fails (not_found), naming the administrators it may have meant, when USER
    is not on the memory's list.
    """
    _set_admin(ctx, account, user, grant=False)
