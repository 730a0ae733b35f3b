"""What a block finds true facts by, without reading them all: their words, and how many there are.

``korely_fact_terms`` holds the words of every true fact, under the space a
block looks in (the owner's, or ``ACCOUNT_SPACE``), each with how often the
fact says it; ``korely_fact_counts`` holds how many true user facts and
proposals each namespace has, and how many words they have in all (each
version's own count is ``korely_facts.words``): what BM25 needs, so that a
search scores facts in the database. Both are
written in the transaction that makes a version true or ends it, by the
functions here, so they never disagree with ``korely_facts``. An ended version
leaves no word behind: a forgotten memory's or an erased user's words stay
nowhere.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db import _database
from .._db._schema import ACCOUNT_SPACE, fact_counts, fact_terms, memory_terms, settings
from .._text._words import DEFAULT_LANGUAGE, Words, check_language, findable
from .._values._errors import InvalidRequest
from .._values._identity import Scope

_ACCOUNT = Scope.ACCOUNT.value
_INSERT_TERMS = fact_terms.insert()


@dataclass(frozen=True)
class Indexed:
    """A version as the index knows it: where it is found and counted, and its length in words."""

    id: int
    account: str
    agent: str
    owner_key: str
    scope: str | None
    words: int
    expires: bool
    """It has a ``valid_until``."""

    @property
    def space(self) -> str:
        """The space its words are found in."""
        return space_of(self.scope, self.owner_key)


def terms_of(key: str, content: str, words: Words) -> Counter[str]:
    """The words a fact is found by (those of its key and its content), each with how often it
    says it; their sum is the fact's length. Every one is kept: exact BM25 needs them all, and a
    fact is at most 2,000 characters."""
    return Counter(words(findable(key, content)))


class _AsRecorded:
    def __repr__(self) -> str:
        return "the language the database records"


AS_RECORDED = _AsRecorded()
_LANGUAGE = "language"
_UNCOUNTED = "uncounted"  # revision 0007's


def recorded_language(conn: Connection) -> str | None:
    """The language the database records ('' for none), or None when no engine recorded one yet.

    A read: an engine opening a database that records its language takes no write lock.
    """
    return recorded_at_start(conn)[0]


def recorded_at_start(conn: Connection) -> tuple[str | None, bool]:
    """``recorded_language``, and whether facts' words are left to count (``korely db upgrade
    --sql`` printed revision 0007), in one read."""
    found = dict(
        conn.execute(
            sa.select(settings.c.name, settings.c.value).where(
                settings.c.name.in_([_LANGUAGE, _UNCOUNTED])
            )
        ).all()
    )
    return found.get(_LANGUAGE), _UNCOUNTED in found


def agreed_language(conn: Connection, asked: str | _AsRecorded | None) -> str | None:
    """The language the database's word indexes are in: recorded by the first engine to open it
    (``conn`` is a write transaction: it records ``asked`` when nothing is recorded yet).

    Raises:
        InvalidRequest: ``asked`` is not a language the engine knows, or differs
            from the one the database records.
    """
    _check(asked)
    recorded = recorded_language(conn)
    if recorded is None:
        chosen = DEFAULT_LANGUAGE if isinstance(asked, _AsRecorded) else asked
        conn.execute(settings.insert().values(name=_LANGUAGE, value=chosen or ""))
        return chosen
    return agrees(asked, recorded)


def agrees(asked: str | _AsRecorded | None, recorded: str) -> str | None:
    """The recorded language, when ``asked`` agrees with it.

    Raises:
        InvalidRequest: As ``agreed_language``.
    """
    _check(asked)
    language = recorded or None
    if not isinstance(asked, _AsRecorded) and asked != language:
        raise InvalidRequest(
            "language",
            f"this database's word indexes are in {language or 'no language'!r}; open it with "
            f"language={language!r}, or leave language out",
        )
    return language


def _check(asked: str | _AsRecorded | None) -> None:
    if not isinstance(asked, _AsRecorded):
        try:
            check_language(asked)
        except ValueError as error:
            raise InvalidRequest("language", str(error)) from None


def space_of(scope: str | None, owner_key: str) -> str:
    """Where a version's words are found: the account's space, or its owner's."""
    return ACCOUNT_SPACE if scope == _ACCOUNT else owner_key


Namespace = tuple[str, str, str]
"""(account, agent, owner_key); owner_key ``ACCOUNT_SPACE``: the account's facts."""
Counts = tuple[int, int, int]
"""Facts, their words, and those of them that expire."""


def _row_of(version: Indexed) -> Namespace:
    """Where a version is counted: its owner's row, or the account's."""
    return (version.account, version.agent, version.space)


def _counted(version: Indexed, sign: int) -> Counts:
    """What a version adds to its row (``sign`` 1) or takes from it (-1): an account fact counts
    only as expiring."""
    n, length = (0, 0) if version.scope == _ACCOUNT else (1, version.words)
    return (sign * n, sign * length, sign * int(version.expires))


def added(conn: Connection, version: Indexed, counted: Counter[str]) -> None:
    """A version became true: index its words (``terms_of``), and count it in its namespace."""
    rows = [
        {
            "account": version.account,
            "agent": version.agent,
            "space": version.space,
            "term": t,
            "fact_id": version.id,
            "tf": n,
        }
        for t, n in counted.items()
    ]
    if rows:
        conn.execute(_INSERT_TERMS, rows)
    add_counts(conn, {_row_of(version): _counted(version, 1)})


def ended(conn: Connection, versions: Sequence[Indexed]) -> None:
    """Versions stopped being true: forget their words, and count them out."""
    if not versions:
        return
    for account in sorted({v.account for v in versions}):  # one for a person: trim's may be more
        gone = sorted({v.id for v in versions if v.account == account})
        conn.execute(
            fact_terms.delete().where(
                fact_terms.c.account == account, fact_terms.c.fact_id.in_(gone)
            )
        )
    counts: dict[Namespace, Counts] = {}
    for v in versions:
        n, length, expiring = counts.get(_row_of(v), (0, 0, 0))
        dn, dlength, dexpiring = _counted(v, -1)
        counts[_row_of(v)] = (n + dn, length + dlength, expiring + dexpiring)
    add_counts(conn, counts)


def confirmed(conn: Connection, version: Indexed) -> None:
    """A proposal became an account fact: found in the account's space, counted no more as its
    owner's."""
    conn.execute(
        fact_terms.update()
        .where(fact_terms.c.account == version.account, fact_terms.c.fact_id == version.id)
        .values(space=ACCOUNT_SPACE)
    )
    account_fact = dataclasses.replace(version, scope=_ACCOUNT)
    add_counts(
        conn,
        {_row_of(version): _counted(version, -1), _row_of(account_fact): _counted(account_fact, 1)},
    )


def erased(conn: Connection, account: str, user: str) -> None:
    """Before a user's versions and memories are deleted: every word and count kept under their
    name goes (the account's facts they proposed change hands: their blocks are made again)."""
    conn.execute(
        fact_terms.delete().where(fact_terms.c.account == account, fact_terms.c.space == user)
    )
    conn.execute(
        memory_terms.delete().where(memory_terms.c.account == account, memory_terms.c.space == user)
    )
    conn.execute(
        fact_counts.delete().where(
            fact_counts.c.account == account, fact_counts.c.owner_key == user
        )
    )
    touch_account(conn, account)


def add_counts(conn: Connection, deltas: dict[Namespace, Counts]) -> None:
    """Add (facts, words, expiring) to each namespace's counts, and draw its version anew."""
    if not deltas:
        return
    upsert = _database.upsert_adding(
        conn,
        fact_counts,
        ["account", "agent", "owner_key"],
        adding=["n", "words", "expiring"],
        replacing=["version"],
    )
    for (account, agent, owner_key), (n, length, expiring) in sorted(deltas.items()):
        conn.execute(
            upsert,
            {
                "account": account,
                "agent": agent,
                "owner_key": owner_key,
                "n": n,
                "words": length,
                "expiring": expiring,
                "version": new_version(),
            },
        )


def touch(conn: Connection, namespaces: Iterable[Namespace]) -> None:
    """What these namespaces' blocks show changed (their memories): draw their versions anew."""
    add_counts(conn, dict.fromkeys(namespaces, (0, 0, 0)))


def touch_account(conn: Connection, account: str) -> None:
    """What the account's facts show changed (who owns them): draw every version of the
    account's facts anew."""
    conn.execute(
        fact_counts.update()
        .where(fact_counts.c.account == account, fact_counts.c.owner_key == ACCOUNT_SPACE)
        .values(version=new_version())
    )


def new_version() -> int:
    """A version no earlier one of a row equals (a row that goes and comes back included)."""
    return secrets.randbits(62) + 1


Versions = tuple[int | None, int | None]


def versions(conn: Connection, account: str, agent: str, owner_key: str) -> Versions | None:
    """The versions of an identity's blocks (its namespace's and its account's), or None when
    a block of it could change with the clock alone (a true fact that expires)."""
    row = conn.execute(_VERSIONS, version_params(account, agent, owner_key)).one()
    return versions_of_columns(tuple(row))


def version_params(account: str, agent: str, owner_key: str) -> dict[str, str]:
    """What ``versions``' statement, and ``version_columns``, bind."""
    return {"account": account, "agent": agent, "owner": owner_key, "shared": ACCOUNT_SPACE}


def version_columns() -> list[sa.ScalarSelect[int]]:
    """``versions`` as four columns of another statement (bound as ``versions`` binds): the
    namespace's version and count of expiring facts, then the account's."""

    def of(owner: str, column: sa.Column[int]) -> sa.ScalarSelect[int]:
        return (
            sa.select(column)
            .where(
                fact_counts.c.account == sa.bindparam("account"),
                fact_counts.c.agent == sa.bindparam("agent"),
                fact_counts.c.owner_key == sa.bindparam(owner),
            )
            .scalar_subquery()
        )

    return [
        of(owner, column)
        for owner in ("owner", "shared")
        for column in (fact_counts.c.version, fact_counts.c.expiring)
    ]


_VERSIONS = sa.select(*version_columns())


def versions_of_columns(values: Sequence[int | None]) -> Versions | None:
    """``versions`` from the four values of ``version_columns``."""
    own, own_expiring, shared, shared_expiring = values
    if own_expiring or shared_expiring:
        return None
    return (own, shared)


def versions_from(rows: dict[str, tuple[int, int]], owner_key: str) -> Versions | None:
    """``versions`` from the rows read, by owner key: (version, expiring)."""
    if any(expiring for _, expiring in rows.values()):
        return None
    own, shared = rows.get(owner_key), rows.get(ACCOUNT_SPACE)
    return (own and own[0], shared and shared[0])
