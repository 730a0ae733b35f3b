"""The items of LangGraph stores (``korely_items``), inside a transaction the engine opened.

An item is a namespace (a tuple of labels), a key and a JSON object. Its words are a
fact's: the engine records the fact under the item's fact key, and the row here keeps the
value beside it, with the item's times and time to live. The fact is the truth: a new
version recorded elsewhere (corrected, remembered again) writes its words into the value
(``follow``), a fact forgotten takes its item with it (``erase_fact``), and an item whose
fact is no longer true is never read.

A namespace is kept as its labels joined by '.', which no label may hold.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, Row

from .._db._schema import UTCDateTime, facts, items, personal_row, true_personal_row
from .._values import _validation
from .._values._errors import InvalidRequest
from .._values._expiry import due, is_due, live, to_come
from .._values._identity import Scope
from .._values._types import FACT_FIELDS, Fact, StoreItem
from ._versions import from_values

SEPARATOR = "."
_SLUG = re.compile(r"[^a-z0-9._:-]+")


def joined(namespace: Sequence[str]) -> str:
    return SEPARATOR.join(namespace)


def split(text: str) -> tuple[str, ...]:
    return tuple(text.split(SEPARATOR))


def fact_key(place: Sequence[str], key: str) -> str:
    """The key of the fact that holds an item's words.

    ``place`` is what sets the item apart within its identity's memory (the labels past the
    ones that name the identity). The item's key itself when there is no place and it is a
    key as the engine keeps it (``home-city``). A UUID (LangMem names every memory by one) is
    ``memory-`` and 12 hex digits of a digest: a block shows each fact's key, and a UUID would
    cost some twenty tokens a line. Any other key is a readable slug and a digest, so that any
    key has one fact.
    """
    digest = hashlib.sha256(json.dumps([list(place), key]).encode()).hexdigest()
    if _is_uuid(key):
        where = _slug(place)
        return f"{where}.memory-{digest[:12]}" if where else f"memory-{digest[:12]}"
    if not place and _validation.is_key(key):
        return key
    slug = _slug([*place, key])
    return f"{slug}:{digest[:16]}" if slug else f"item:{digest[:16]}"


def _slug(labels: Sequence[str]) -> str:
    parts = (_SLUG.sub("-", label.lower()).strip("-._:") for label in labels)
    return SEPARATOR.join(p for p in parts if p)[:80].strip("-._:")


def _is_uuid(key: str) -> bool:
    try:
        return str(uuid.UUID(key)) == key.lower()
    except ValueError:
        return False


def read(
    conn: Connection,
    account: str,
    agent: str,
    refs: Sequence[tuple[tuple[str, ...], str]],
    now: dt.datetime | None,
    *,
    live: bool,
) -> dict[tuple[tuple[str, ...], str], StoreItem]:
    """The items of ``refs`` whose fact is true at ``now`` (None: the server's clock);
    ``live``: not past their time to live either."""
    found: dict[tuple[tuple[str, ...], str], StoreItem] = {}
    for ns, key in dict.fromkeys(refs):
        if not _storable(ns, key):
            continue  # nothing is kept there

        params = _params(account, agent, now, live) | {"namespace": joined(ns), "key": key}
        for item in _rows(conn.execute(_sql(conn).one, params)):
            found[(ns, key)] = item
    return found


def under(
    conn: Connection,
    account: str,
    agent: str,
    prefix: Sequence[str],
    now: dt.datetime | None,
    *,
    live: bool,
    limit: int | None = None,
    offset: int = 0,
    equal: Mapping[str, str | int | float] | None = None,
) -> list[StoreItem]:
    """The items whose namespace starts with ``prefix``, the last written first; ``equal``:
    whose value's top-level fields hold these strings or numbers (a number equals a number of
    the same value, never a boolean)."""
    if not _storable(prefix):
        return []
    statement = _sql(conn).under
    if equal:
        postgres = conn.dialect.name == "postgresql"
        statement = statement.where(
            *(_holds(field, wanted, n, postgres) for n, (field, wanted) in enumerate(equal.items()))
        )
    text = joined(prefix)
    params = _params(account, agent, now, live) | {
        "prefix": text,
        "head": text + SEPARATOR,
        "head_length": len(text) + 1,
        "limit": _ALL if limit is None else limit,
        "offset": offset,
    }
    for n, (field, wanted) in enumerate((equal or {}).items()):
        exact = isinstance(wanted, str) or conn.dialect.name != "postgresql"
        params[f"equal_{n}"] = wanted if exact else repr(wanted)  # NUMERIC from its digits
        params[f"like_{n}"] = _near(field, wanted)
    return _rows(conn.execute(statement, params))


def namespaces(
    conn: Connection, account: str, agent: str, now: dt.datetime | None, *, live: bool
) -> list[tuple[str, ...]]:
    """Every namespace that holds an item, in order."""
    found = conn.execute(_sql(conn).namespaces, _params(account, agent, now, live)).scalars()
    return sorted(split(text) for text in found)


def row(conn: Connection, account: str, agent: str, ns: Sequence[str], key: str) -> Row[Any] | None:
    """The row of an item, whatever its fact (for a write, under the fact's lock)."""
    return conn.execute(_ROW, _ref(account, agent, ns, key)).first()


def holder(conn: Connection, account: str, agent: str, owner_key: str, key: str) -> Row[Any] | None:
    """The row of the item whose words are the fact under ``key``, if one is."""
    params = {"account": account, "agent": agent, "owner_key": owner_key, "fact_key": key}
    return conn.execute(_HOLDER, params).first()


def unheld(
    conn: Connection,
    account: str,
    agent: str,
    owner_key: str,
    now: dt.datetime,
    *,
    key: str | None = None,
    limit: int | None = None,
) -> list[Fact]:
    """The user facts of ``owner_key`` ('' for the agent's own) live at ``now`` that no item
    holds, the last changed first (``key``: that key's only; ``limit``: this many at most).

    One statement: the true facts newest first by ``ix_korely_facts_true_recent``, each one's
    item looked up by ``uq_korely_items_fact``, until ``limit`` are found. It reads the facts it
    returns and the newer ones items hold, never the facts' words or the items' values.
    """
    params: dict[str, Any] = {
        "account": account,
        "agent": agent,
        "owner_key": owner_key,
        "now": now,
        "limit": _ALL if limit is None else limit,
    }
    statement = _UNHELD
    if key is not None:
        statement = _UNHELD_KEY
        params["key"] = key
    return [from_values(r) for r in conn.execute(statement, params)]


def keep(
    conn: Connection,
    *,
    account: str,
    agent: str,
    ns: Sequence[str],
    key: str,
    owner_key: str,
    fact_key: str,
    fact_id: int,
    value: str,
    text_at: Sequence[str] | None,
    index: str,
    ttl: float | None,
    now: dt.datetime,
    existing: Row[Any] | None,
) -> None:
    """Write an item's row, new or replacing ``existing`` (its creation time stays)."""
    params = _ref(account, agent, ns, key) | {
        "owner_key": owner_key,
        "fact_key": fact_key,
        "fact_id": fact_id,
        "updated_at": now,
        "expires_at": expiry(now, ttl),
        "ttl": ttl,
        "embed": index,
        "text_at": None if text_at is None else json.dumps(list(text_at)),
        "value": value,
    }
    if existing is None:
        conn.execute(_INSERT, params | {"created_at": now})
    else:
        conn.execute(_UPDATE, _where(account, agent, ns, key) | {c: params[c] for c in _WRITTEN})


def follow(conn: Connection, fact: Fact, now: dt.datetime) -> None:
    """``fact`` is a new version of a key an item holds, recorded elsewhere (corrected, or
    remembered again): the item's value says its words, where it said the last ones (a value
    shown as its JSON gains a ``content`` field)."""
    row = holder(conn, fact.account, fact.agent, fact.owner or "", fact.key)
    if row is None or row.fact_id == fact.id:
        return
    path = None if row.text_at is None else json.loads(row.text_at)
    value = _with_words(json.loads(row.value), path or ["content"], fact.content)
    conn.execute(
        _UPDATE,
        _where(row.account, row.agent, split(row.namespace), row.key)
        | {
            "fact_id": fact.id,
            "updated_at": now,
            "text_at": json.dumps(path or ["content"]),
            "value": json.dumps(value, ensure_ascii=False, separators=(",", ":")),
        },
    )


def _with_words(value: dict[str, Any], path: Sequence[str], words: str) -> dict[str, Any]:
    head, *rest = path
    inner = value.get(head)
    if rest and isinstance(inner, dict):
        return {**value, head: _with_words(inner, rest, words)}
    return {**value, head: words}


def still_run_out(conn: Connection, row: Row[Any], now: dt.datetime) -> bool:
    """Whether the item of ``row`` is still there and still past its time to live (read again
    under its fact's lock: a put may have given it time since)."""
    found = conn.execute(_ROW, _ref(row.account, row.agent, split(row.namespace), row.key)).first()
    return found is not None and is_due(found.expires_at, now)


def drop(conn: Connection, account: str, agent: str, ns: Sequence[str], key: str) -> None:
    conn.execute(_DELETE, _ref(account, agent, ns, key))


def refresh(
    conn: Connection,
    account: str,
    agent: str,
    refs: Iterable[tuple[tuple[str, ...], str]],
    now: dt.datetime,
) -> int:
    """Give the items of ``refs`` that have a time to live and have not run out of it their
    whole time again, from ``now``."""
    done = 0
    for ns, key in sorted(set(refs)):
        found = conn.execute(_ROW, _ref(account, agent, ns, key)).first()
        if found is None or found.ttl is None or is_due(found.expires_at, now):
            continue
        change = {"expires_at": expiry(now, found.ttl)}
        done += conn.execute(_UPDATE, _where(account, agent, ns, key) | change).rowcount
    return done


def run_out(conn: Connection, now: dt.datetime, limit: int = 500) -> list[Row[Any]]:
    """Rows of items whose time to live ran out by ``now``, the first to run out first."""
    return list(
        conn.execute(
            sa.select(items)
            .where(due(items.c.expires_at, now))
            .order_by(items.c.expires_at)
            .limit(limit)
        )
    )


def of_person(conn: Connection, account: str, user: str) -> list[StoreItem]:
    """A person's items under every agent definition (an export), by agent, namespace and key."""
    return _rows(conn.execute(_sql(conn).person, {"account": account, "owner_key": user}))


def erase(conn: Connection, account: str, user: str) -> int:
    """Delete a person's items under every agent definition; returns how many."""
    return int(
        conn.execute(
            items.delete().where(items.c.account == account, items.c.owner_key == user)
        ).rowcount
    )


def erase_fact(conn: Connection, fact: Fact) -> int:
    """Delete the item whose words are ``fact``'s: the fact was forgotten, or its words are
    being erased. Returns how many went (0 or 1)."""
    gone = conn.execute(
        items.delete().where(
            items.c.account == fact.account,
            items.c.agent == fact.agent,
            items.c.owner_key == (fact.owner or ""),
            items.c.fact_key == fact.key,
        )
    )
    return int(gone.rowcount)


def expiry(now: dt.datetime, ttl: float | None) -> dt.datetime | None:
    return None if ttl is None else now + dt.timedelta(minutes=ttl)


def _ref(account: str, agent: str, ns: Sequence[str], key: str) -> dict[str, Any]:
    return {"account": account, "agent": agent, "namespace": joined(ns), "key": key}


_THIS = (
    items.c.account == sa.bindparam("account"),
    items.c.agent == sa.bindparam("agent"),
    items.c.namespace == sa.bindparam("namespace"),
    items.c.key == sa.bindparam("key"),
)
_ROW = sa.select(items).where(*_THIS)
_HOLDER = sa.select(items).where(
    items.c.account == sa.bindparam("account"),
    items.c.agent == sa.bindparam("agent"),
    items.c.owner_key == sa.bindparam("owner_key"),
    items.c.fact_key == sa.bindparam("fact_key"),
)
_WRITTEN = (
    "owner_key",
    "fact_key",
    "fact_id",
    "updated_at",
    "expires_at",
    "ttl",
    "embed",
    "text_at",
    "value",
)
_INSERT = items.insert()
# An UPDATE binds its SET values under the columns' names; its WHERE takes the others.
_UPDATE = items.update().where(
    items.c.account == sa.bindparam("where_account"),
    items.c.agent == sa.bindparam("where_agent"),
    items.c.namespace == sa.bindparam("where_namespace"),
    items.c.key == sa.bindparam("where_key"),
)
_DELETE = items.delete().where(*_THIS)


def _where(account: str, agent: str, ns: Sequence[str], key: str) -> dict[str, Any]:
    """An item's reference as ``_UPDATE`` binds it (its SET takes the columns' own names)."""
    return {f"where_{k}": v for k, v in _ref(account, agent, ns, key).items()}


_NOW = sa.func.coalesce(sa.bindparam("now", type_=UTCDateTime()), sa.func.now())
_TRUE_PERSONAL = sa.text(true_personal_row("korely_facts"))
"""As text, as the partial unique index states it: PostgreSQL's generic plan would not use the
index for a bound 'account'."""
_LIVE_PERSONAL = sa.and_(sa.text(personal_row("korely_facts")), live(facts, _NOW))
"""A user's fact (or proposal) live at the read's moment: the index's terms, as ``_TRUE_PERSONAL``
states them, and the version's ``valid_until`` still to come."""
_ALL = 2**62  # a LIMIT both databases take for "no limit"
_HELD_BY_ITEM = (
    sa.select(items.c.fact_key)
    .where(
        items.c.account == facts.c.account,
        items.c.agent == facts.c.agent,
        items.c.owner_key == facts.c.owner_key,
        items.c.fact_key == facts.c.key,
    )
    .exists()
)
_UNHELD = (
    sa.select(*(facts.c[f] for f in FACT_FIELDS))
    .where(
        facts.c.account == sa.bindparam("account"),
        facts.c.agent == sa.bindparam("agent"),
        facts.c.owner_key == sa.bindparam("owner_key"),
        _LIVE_PERSONAL,
        sa.or_(facts.c.scope.is_(None), facts.c.scope == Scope.USER.value),
        ~_HELD_BY_ITEM,
    )
    # By ix_korely_facts_true_recent: a limit reads no more than it returns.
    .order_by(facts.c.modified_at.desc(), facts.c.id.desc())
    .limit(sa.bindparam("limit"))
)
_UNHELD_KEY = _UNHELD.where(facts.c.key == sa.bindparam("key"))


def _params(account: str, agent: str, now: dt.datetime | None, live: bool) -> dict[str, Any]:
    return {"account": account, "agent": agent, "now": now, "any_time": not live}


@dataclass(frozen=True)
class _Reads:
    """The statements that read items, each with the true fact that holds its words."""

    one: sa.Select[Any]
    under: sa.Select[Any]
    namespaces: sa.Select[Any]
    person: sa.Select[Any]


def _reads(postgres: bool) -> _Reads:
    """On PostgreSQL the true fact is looked up item by item (LATERAL), by its unique index:
    joined, a table just filled and not analysed yet can get a plan that reads every fact for
    every item. SQLite's planner uses the index for the join."""

    def with_fact(state: Any) -> tuple[Any, Any]:
        """The items, each joined with its fact in ``state``; and where the fact's id is."""
        same = (
            # The account as bound, as the items': every table of the statement names it.
            facts.c.account == sa.bindparam("account"),
            facts.c.agent == items.c.agent,
            facts.c.owner_key == items.c.owner_key,
            facts.c.key == items.c.fact_key,
            state,
        )
        if not postgres:
            return facts, items.join(facts, sa.and_(*same))
        true = (
            sa.select(facts.c.id)
            .where(*same)
            .limit(1)  # one at most (the index is unique); and kept from being made a join
            .lateral("true_fact")
        )
        return true, items.join(true, sa.true())

    # An item is read while its fact is live; an export lists it while its fact is true.
    true, source = with_fact(_LIVE_PERSONAL)
    held, of_person = with_fact(_TRUE_PERSONAL)
    readable = (
        items.c.account == sa.bindparam("account"),
        items.c.agent == sa.bindparam("agent"),
        sa.or_(sa.bindparam("any_time", type_=sa.Boolean()), to_come(items.c.expires_at, _NOW)),
    )
    read = sa.select(items, true.c.id.label("true_id")).select_from(source).where(*readable)
    # Under a prefix: the namespace is the prefix or starts with its labels, compared as text,
    # exactly (no pattern, whose wildcards and case rules differ by database).
    under = (
        read.where(
            sa.or_(
                sa.bindparam("prefix") == "",
                items.c.namespace == sa.bindparam("prefix"),
                sa.func.substr(items.c.namespace, 1, sa.bindparam("head_length"))
                == sa.bindparam("head"),
            )
        )
        .order_by(items.c.updated_at.desc(), items.c.namespace, items.c.key)
        .limit(sa.bindparam("limit"))
        .offset(sa.bindparam("offset"))
    )
    return _Reads(
        one=read.where(
            items.c.namespace == sa.bindparam("namespace"), items.c.key == sa.bindparam("key")
        ),
        under=under,
        namespaces=sa.select(items.c.namespace).select_from(source).where(*readable).distinct(),
        person=(
            sa.select(items, held.c.id.label("true_id"))
            .select_from(of_person)
            .where(
                items.c.account == sa.bindparam("account"),
                items.c.owner_key == sa.bindparam("owner_key"),
            )
            .order_by(items.c.agent, items.c.namespace, items.c.key)
        ),
    )


_READS = {False: _reads(postgres=False), True: _reads(postgres=True)}


def _sql(conn: Connection) -> _Reads:
    return _READS[conn.dialect.name == "postgresql"]


def _holds(field: str, wanted: str | int | float, n: int, postgres: bool) -> sa.ColumnElement[bool]:
    """SQL: the value's top-level ``field`` holds ``wanted`` (bound as ``equal_<n>``), JSON types
    kept apart (a string never equals a number, a number never a boolean)."""
    _check_equal(field, wanted)
    param: sa.BindParameter[Any] = sa.bindparam(f"equal_{n}")
    # First the kept text itself: most values that do not hold it are left at that, unparsed.
    near = items.c.value.like(sa.bindparam(f"like_{n}"), escape="\\")
    if postgres:
        found = sa.cast(items.c.value, JSONB)[field]
        if isinstance(wanted, str):
            return sa.and_(near, found == sa.func.to_jsonb(sa.cast(param, sa.Text)))
        return sa.and_(
            near,
            sa.func.jsonb_typeof(found) == "number",
            sa.cast(found.astext, sa.Numeric) == sa.cast(param, sa.Numeric),
        )
    path = "$." + json.dumps(field, ensure_ascii=False)
    kind = sa.func.json_type(items.c.value, path)
    same = kind == "text" if isinstance(wanted, str) else kind.in_(("integer", "real"))
    return sa.and_(near, same, sa.func.json_extract(items.c.value, path) == param)


EXACT = 2**53
"""Numbers a filter compares exactly in both databases: past this, a float and an integer that
JSON writes alike need not be equal."""


def _check_equal(field: str, wanted: Any) -> None:
    if not isinstance(field, str) or not field or any(c in field for c in '"\\\x00'):
        raise InvalidRequest(
            "equal", f"field names must be text without '\"' or '\\', got {field!r}"
        )
    if isinstance(wanted, str):
        if "\x00" in wanted or re.search("[\ud800-\udfff]", wanted):
            raise InvalidRequest("equal", "strings must not hold a NUL or a lone surrogate")
        return
    if isinstance(wanted, bool) or not isinstance(wanted, (int, float)):
        raise InvalidRequest("equal", f"values must be strings or numbers, got {wanted!r}")
    if not abs(wanted) < EXACT:  # NaN too
        raise InvalidRequest("equal", f"numbers must be under 2**53 in size, got {wanted!r}")


def _near(field: str, wanted: str | int | float) -> str:
    """A LIKE pattern every kept value whose ``field`` holds ``wanted`` matches (and some others):
    the text ``"field":wanted`` as the value is kept (compact JSON); anything where the text
    may differ (a number that is not whole, zero, which may be kept as ``-0.0``) or the pattern
    would be long."""
    if isinstance(wanted, str):
        if len(wanted) > 1000:
            return "%"
        said = json.dumps(wanted, ensure_ascii=False)
    elif float(wanted).is_integer() and wanted != 0 and abs(wanted) < 1e15:
        said = str(int(wanted))  # also the start of 3.0
    else:
        return "%"
    text = json.dumps(field, ensure_ascii=False) + ":" + said
    return "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"


def _storable(labels: Sequence[str], key: str = "") -> bool:
    """Whether an item could be kept under these labels and key (else a read finds nothing)."""
    return all(
        isinstance(t, str) and "\x00" not in t and not re.search("[\ud800-\udfff]", t)
        for t in (*labels, key)
    ) and not any(SEPARATOR in label for label in labels)


def _rows(found: Iterable[Row[Any]]) -> list[StoreItem]:
    return [
        StoreItem(
            namespace=split(r.namespace),
            key=r.key,
            value=json.loads(r.value),
            created_at=r.created_at,
            updated_at=r.updated_at,
            owner=r.owner_key or None,
            fact_key=r.fact_key,
            fact_id=r.true_id,
            text_at=None if r.text_at is None else tuple(json.loads(r.text_at)),
            expires_at=r.expires_at,
            ttl=r.ttl,
            index=json.loads(r.embed),
        )
        for r in found
    ]
