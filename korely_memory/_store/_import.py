"""A person's export read back (``MemoryEngine.import_user``): what ``export_user`` wrote, restored.

``parse`` checks a document headed ``korely-user-export/1`` field by field
(``InvalidRequest`` names the first that breaks its rule) and makes it a
``UserExport``; every fact, memory and mark in it must be of its account and
person. ``restore`` writes it in the caller's transaction, for a person the
memory holds nothing about:

- every version of ``facts`` and ``proposals`` and every memory, under new
  ids, their times as they were; each chain of replacements and each fact's
  source memory point at the new ids; true versions are indexed and counted;
- ``account_facts`` are the account's and are never written: given the
  pseudonym the person's erasure reported, a version the database still holds
  (same id, agent, key and recorded time) under that pseudonym names the person
  again; a file alone names nobody, since it cannot prove who was erased;
- a mark is restored when it is about the subject of its version and that
  version is one restored, or one the database holds in the account and the
  mark was read under the person's own name; the others are left out;
- the administrator grant, only when the caller asks for it: a file alone
  grants nothing;
- the changes held for their approval (``pending``, which an export made before
  they existed does not hold), under new ids, captured when they were.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db._schema import admins, erasures, facts, marks, memories, personal_row
from .._text._words import Words
from .._values import _validation
from .._values._errors import InvalidRequest
from .._values._identity import EndCause, Identity, Scope
from .._values._types import FACT_FIELDS, PENDING_OPERATIONS, Fact, Memory, PendingFact
from . import _marks, _memories, _pending, _review, _versions, _word_index
from ._export import FORMAT, MarkRecord, UserExport

T = TypeVar("T")
_PERSONAL = sa.text(personal_row("korely_facts"))
_USER_SCOPES = (None, Scope.USER)
_PROPOSED = (Scope.ACCOUNT_PROPOSED, Scope.ACCOUNT_REJECTED)
_OPTIONAL_TIMES = ("invalid_at", "ended_recorded_at", "confirmed_at", "valid_until")
_MAX_ID = 2**63 - 1  # the largest id either database keeps


# -- reading the document ---------------------------------------------------------------------


def parse(data: Any) -> UserExport:
    """The export ``data`` holds (``UserExport.to_dict()`` as JSON gives it back).

    Raises:
        InvalidRequest: ``format`` is not ``korely-user-export/1``, or a field
            is missing or breaks its rule; ``field`` names it (``facts[2].key``).
    """
    if not isinstance(data, Mapping):
        raise InvalidRequest("export", f"must be a JSON object, not {type(data).__name__}")
    found = data.get("format")
    if found != FORMAT:
        raise InvalidRequest(
            "format", f"is {found!r}; this version of korely-memory reads {FORMAT!r} only"
        )
    account = _name(data, "account", "account")
    user = _name(data, "user", "user")
    exported_at = _time(data, "exported_at", "exported_at")
    administrator = _field(data, "administrator", "administrator")
    if not isinstance(administrator, bool):
        raise InvalidRequest("administrator", "must be true or false")

    def theirs(fact: Fact, where: str) -> Fact:
        if fact.account != account or fact.owner != user:
            raise InvalidRequest(where, f"is not a fact of {user!r} in {account!r}")
        return fact

    own = _items(data, "facts", lambda v, w: theirs(_fact(v, w, _USER_SCOPES), w))
    proposals = _items(data, "proposals", lambda v, w: theirs(_fact(v, w, _PROPOSED), w))
    account_facts = _items(data, "account_facts", lambda v, w: _fact(v, w, (Scope.ACCOUNT,)))
    for fact, where in account_facts:
        if fact.account != account or user not in (fact.owner, fact.confirmed_by):
            raise InvalidRequest(where, f"is not an account fact {user!r} stated or confirmed")
    kept = _items(data, "memories", _memory)
    for memory, where in kept:
        if memory.account != account or memory.owner != user:
            raise InvalidRequest(where, f"is not a memory of {user!r} in {account!r}")
    versions = [*own, *proposals]
    personal_ids = {f.id for f, _ in versions}
    read = _items(data, "marks", _mark)
    for mark, where in read:
        if user not in (mark.reader, mark.subject) and mark.fact_id not in personal_ids:
            raise InvalidRequest(where, f"is not a mark about {user!r} or read under that name")
    held = _items(data, "pending", _held) if "pending" in data else []
    holding = {(f.agent, f.key): f.id for f, _ in versions if f.is_current}
    for at, (change, where) in enumerate(held):
        if change.account != account or change.user != user:
            raise InvalidRequest(where, f"is not held for {user!r} in {account!r}")
        if "drawn_against" not in data["pending"][at]:
            # Exported before held changes named their version: the one its key holds.
            against = holding.get((change.agent, change.key))
            change = dataclasses.replace(
                change, drawn_against=None if change.operation == "remember" else against
            )
            held[at] = (change, where)
        elif change.drawn_against is not None and change.drawn_against not in personal_ids:
            raise InvalidRequest(
                where + ".drawn_against", "is not a version of the person's in the export"
            )
    _unique([p.id for p, _ in held], "pending", "pending id")
    _unique([f.id for f, _ in [*versions, *account_facts]], "facts", "fact id")
    _unique([m.id for m, _ in kept], "memories", "memory id")
    _unique([(m.reader, m.fact_id) for m, _ in read], "marks", "reader and fact id")
    true_keys = [(f.agent, f.key) for f, _ in versions if f.is_current]
    _unique(true_keys, "facts", "true version of an agent's key")
    return UserExport(
        account=account,
        user=user,
        exported_at=exported_at,
        facts=tuple(f for f, _ in own),
        proposals=tuple(f for f, _ in proposals),
        account_facts=tuple(f for f, _ in account_facts),
        memories=tuple(m for m, _ in kept),
        marks=tuple(m for m, _ in read),
        administrator=administrator,
        pending=tuple(p for p, _ in held),
    )


def _field(data: Mapping[str, Any], name: str, where: str) -> Any:
    if name not in data:
        raise InvalidRequest(where, "is missing")
    return data[name]


def _name(data: Mapping[str, Any], name: str, where: str, *, optional: bool = False) -> Any:
    value = _field(data, name, where)
    return _validation.name(where, value, optional=optional)


def _text(data: Mapping[str, Any], name: str, where: str) -> str:
    value = _field(data, name, where)
    if not isinstance(value, str) or "\x00" in value:
        raise InvalidRequest(where, "must be a string without NUL characters")
    return value


def _id(data: Mapping[str, Any], name: str, where: str, *, optional: bool = False) -> Any:
    value = _field(data, name, where)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_ID:
        raise InvalidRequest(where, f"must be a whole number from 1 to {_MAX_ID}, got {value!r}")
    return value


def _time(data: Mapping[str, Any], name: str, where: str, *, optional: bool = False) -> Any:
    value = _field(data, name, where)
    if value is None and optional:
        return None
    try:
        moment = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise InvalidRequest(where, f"must be an ISO 8601 time with its offset, got {value!r}")
    return moment.astimezone(dt.timezone.utc)


def _items(
    data: Mapping[str, Any], name: str, read: Callable[[Any, str], T]
) -> list[tuple[T, str]]:
    values = _field(data, name, name)
    if not isinstance(values, list):
        raise InvalidRequest(name, "must be a list")
    return [(read(v, f"{name}[{i}]"), f"{name}[{i}]") for i, v in enumerate(values)]


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidRequest(where, "must be an object")
    return value


def _fact(value: Any, where: str, scopes: Sequence[Scope | None]) -> Fact:
    v = _object(value, where)
    at = f"{where}."
    scope = _field(v, "scope", at + "scope")
    try:
        chosen = None if scope is None else Scope(scope)
    except ValueError:
        chosen = False  # type: ignore[assignment]
    if chosen not in scopes:
        allowed = ", ".join("null" if s is None else s.value for s in scopes)
        raise InvalidRequest(at + "scope", f"must be {allowed} here, got {scope!r}")
    cause = _field(v, "end_cause", at + "end_cause")
    try:
        end_cause = None if cause is None else EndCause(cause)
    except ValueError:
        raise InvalidRequest(at + "end_cause", f"is no cause an end has: {cause!r}") from None
    key = _text(v, "key", at + "key")
    try:
        normal = _validation.key(key)
    except InvalidRequest as error:
        raise InvalidRequest(at + "key", error.message.removeprefix("key: ")) from None
    if normal != key:
        raise InvalidRequest(at + "key", f"is not a key as the memory writes one: {key!r}")
    if len(_text(v, "content", at + "content")) > _validation.MAX_CONTENT:
        raise InvalidRequest(at + "content", f"is over {_validation.MAX_CONTENT} characters")
    fields: dict[str, Any] = {
        "id": _id(v, "id", at + "id"),
        "account": _name(v, "account", at + "account"),
        "owner": _name(v, "owner", at + "owner", optional=True),
        "agent": _name(v, "agent", at + "agent"),
        "key": key,
        "content": _text(v, "content", at + "content"),
        "scope": chosen,
        "end_cause": end_cause,
        "replaced_by_id": _id(v, "replaced_by_id", at + "replaced_by_id", optional=True),
        "source_memory_id": _id(v, "source_memory_id", at + "source_memory_id", optional=True),
        "confirmed_by": _name(v, "confirmed_by", at + "confirmed_by", optional=True),
    }
    for name in ("valid_from", "recorded_at", "created_at", "modified_at"):
        fields[name] = _time(v, name, at + name)
    for name in _OPTIONAL_TIMES:
        fields[name] = _time(v, name, at + name, optional=True) if name in v else None
    if (fields["ended_recorded_at"] is None) != (end_cause is None):
        raise InvalidRequest(at + "end_cause", "is set exactly when ended_recorded_at is")
    assert set(fields) == set(FACT_FIELDS)
    return Fact(**fields)


def _memory(value: Any, where: str) -> Memory:
    v = _object(value, where)
    at = f"{where}."
    content = _text(v, "content", at + "content")
    if len(content) > _validation.MAX_MEMORY:
        raise InvalidRequest(at + "content", f"is over {_validation.MAX_MEMORY} characters")
    return Memory(
        id=_id(v, "id", at + "id"),
        account=_name(v, "account", at + "account"),
        owner=_name(v, "owner", at + "owner", optional=True),
        agent=_name(v, "agent", at + "agent"),
        content=content,
        created_at=_time(v, "created_at", at + "created_at"),
    )


def _held(value: Any, where: str) -> PendingFact:
    v = _object(value, where)
    at = f"{where}."
    operation = _field(v, "operation", at + "operation")
    if operation not in PENDING_OPERATIONS:
        raise InvalidRequest(
            at + "operation", f"must be one of {', '.join(PENDING_OPERATIONS)}, got {operation!r}"
        )
    key = _text(v, "key", at + "key")
    if not _validation.is_key(key):
        raise InvalidRequest(at + "key", f"is not a key as the memory writes one: {key!r}")
    content = _field(v, "content", at + "content")
    if (content is None) != (operation == "forget"):
        raise InvalidRequest(at + "content", "is null exactly for forget")
    if content is not None:
        content = _text(v, "content", at + "content")
        if not content or len(content) > _validation.MAX_CONTENT:
            raise InvalidRequest(
                at + "content", f"must be 1 to {_validation.MAX_CONTENT} characters"
            )
    return PendingFact(
        id=_id(v, "id", at + "id"),
        account=_name(v, "account", at + "account"),
        user=_name(v, "user", at + "user", optional=True),
        agent=_name(v, "agent", at + "agent"),
        operation=operation,
        key=key,
        content=content,
        captured_at=_time(v, "captured_at", at + "captured_at"),
        reader=_name(v, "reader", at + "reader", optional=True),
        drawn_against=_id(v, "drawn_against", at + "drawn_against", optional=True)
        if "drawn_against" in v
        else None,
    )


def _mark(value: Any, where: str) -> MarkRecord:
    v = _object(value, where)
    at = f"{where}."
    subject = _field(v, "subject", at + "subject")
    if subject != "":
        _validation.name(at + "subject", subject)
    return MarkRecord(
        reader=_name(v, "reader", at + "reader"),
        fact_id=_id(v, "fact_id", at + "fact_id"),
        subject=subject,
        first_read_at=_time(v, "first_read_at", at + "first_read_at"),
        last_read_at=_time(v, "last_read_at", at + "last_read_at"),
        ended_at=_time(v, "ended_at", at + "ended_at", optional=True),
        told_at=_time(v, "told_at", at + "told_at", optional=True),
        held_until=_time(v, "held_until", at + "held_until", optional=True),
    )


def _unique(values: Sequence[object], field: str, what: str) -> None:
    seen: set[object] = set()
    for value in values:
        if value in seen:
            raise InvalidRequest(field, f"holds the same {what} twice: {value!r}")
        seen.add(value)


# -- writing it -------------------------------------------------------------------------------


def holds_anything(conn: Connection, account: str, user: str) -> bool:
    """Whether the memory keeps anything of ``user`` in ``account`` that an import would write:
    a version or proposal, a memory, a mark about them or read under their name, a grant, a
    change held for their approval."""
    probes = [
        sa.select(facts.c.id).where(
            facts.c.account == account, facts.c.owner_key == user, _PERSONAL
        ),
        sa.select(memories.c.id).where(memories.c.account == account, memories.c.owner_key == user),
        sa.select(marks.c.fact_id).where(
            marks.c.account == account, sa.or_(marks.c.subject == user, marks.c.reader == user)
        ),
        sa.select(admins.c.user).where(admins.c.account == account, admins.c.user == user),
    ]
    found = any(conn.execute(p.limit(1)).first() is not None for p in probes)
    return found or _pending.holds_any(conn, account, user)


def restore(
    conn: Connection,
    export: UserExport,
    words: Words,
    *,
    pseudonym: str | None = None,
    administrator: bool = False,
) -> None:
    """Write ``export`` (as ``parse`` made it) in the transaction ``conn`` is in.

    ``pseudonym`` is the one the person's erasure reported: the account facts
    held under it name them again. ``administrator`` restores the export's
    grant.

    Raises:
        InvalidRequest: The memory holds something of the person already
            (``user``), or no erasure in the account gave ``pseudonym``.
    """
    account, user = export.account, export.user
    _versions.lock_person(conn, account, user, erasing=True)  # no write about them meanwhile
    if holds_anything(conn, account, user):
        raise InvalidRequest(
            "user",
            f"the memory already holds data about {user!r} in {account!r}; an import restores "
            "a person it holds nothing about (erase them first, or import elsewhere)",
        )
    if pseudonym is not None and not _erased_as(conn, account, pseudonym):
        raise InvalidRequest(
            "pseudonym", f"no erasure in {account!r} gave {pseudonym!r}: give the one it reported"
        )
    new_memory: dict[int, int] = {}
    for memory in sorted(export.memories, key=lambda m: m.id):
        who = Identity(account, user, memory.agent)
        kept = _memories.add(conn, who, memory.content, memory.created_at, words)
        new_memory[memory.id] = kept.id
    versions = sorted([*export.facts, *export.proposals], key=lambda f: f.id)
    new_fact: dict[int, int] = {}
    restored: dict[int, Fact] = {}
    for f in versions:
        scope = None if f.scope is None else f.scope.value
        values = {name: getattr(f, name) for name in FACT_FIELDS if name != "id"}
        values.update(
            owner_key=user,
            scope=scope,
            end_cause=None if f.end_cause is None else f.end_cause.value,
            replaced_by_id=None,  # set below, once every version of the chain has its id
            source_memory_id=new_memory.get(f.source_memory_id or 0),
        )
        counted = _word_index.terms_of(f.key, f.content, words) if f.content else Counter()
        values["words"] = sum(counted.values())
        new_id = conn.execute(facts.insert().values(values).returning(facts.c.id)).scalar_one()
        new_fact[f.id] = new_id
        restored[new_id] = f
        if f.is_current:
            indexed = _word_index.Indexed(
                new_id, account, f.agent, user, scope, values["words"], f.valid_until is not None
            )
            _word_index.added(conn, indexed, counted)
    in_place = _name_again(conn, export, new_fact, pseudonym)
    _word_index.touch_account(conn, account)
    for f in versions:
        if f.replaced_by_id is None:
            continue
        target = new_fact.get(f.replaced_by_id)
        if target is None and f.replaced_by_id in in_place:
            target = f.replaced_by_id
        if target is not None:
            conn.execute(
                facts.update()
                .where(_versions.the_version(account, new_fact[f.id]))
                .values(replaced_by_id=target)
            )
    _restore_marks(conn, export, new_fact, restored)
    _pending.restore(conn, export.pending, new_fact)
    if export.administrator and administrator:
        _review.grant(conn, account, user)


def _erased_as(conn: Connection, account: str, pseudonym: str) -> bool:
    found = sa.select(erasures.c.pseudonym).where(
        erasures.c.account == account, erasures.c.pseudonym == pseudonym
    )
    return conn.execute(found.limit(1)).first() is not None


def _name_again(
    conn: Connection, export: UserExport, new_fact: Mapping[int, int], pseudonym: str | None
) -> set[int]:
    """Give the person back their name on the account facts their erasure left under
    ``pseudonym``; returns the ids of the exported account-fact versions the database
    still holds. A version is linked to the person's restored one that replaced it only
    when it ended and is theirs."""
    user = export.user
    theirs = {user} if pseudonym is None else {user, pseudonym}
    held: set[int] = set()
    for f in export.account_facts:
        row = _versions.by_id(conn, export.account, f.id)
        same = (row.account, row.agent, row.key, row.recorded_at) if row else None
        if row is None or same != (f.account, f.agent, f.key, f.recorded_at):
            continue
        held.add(f.id)
        values: dict[str, Any] = {}
        if pseudonym is not None and f.owner == user and row.owner == pseudonym:
            values.update(owner=user, owner_key=user)
        if pseudonym is not None and f.confirmed_by == user and row.confirmed_by == pseudonym:
            values["confirmed_by"] = user
        ended_theirs = row.ended_recorded_at is not None and (
            row.owner in theirs or row.confirmed_by in theirs
        )
        if ended_theirs and row.replaced_by_id is None and (f.replaced_by_id or 0) in new_fact:
            values["replaced_by_id"] = new_fact[f.replaced_by_id or 0]
        if values:
            conn.execute(
                facts.update().where(_versions.the_version(export.account, f.id)).values(values)
            )
    return held


def _restore_marks(
    conn: Connection,
    export: UserExport,
    new_fact: Mapping[int, int],
    restored: Mapping[int, Fact],
) -> None:
    rows = []
    for m in export.marks:
        fact_id = new_fact.get(m.fact_id)
        fact = restored.get(fact_id or 0)
        if fact_id is None:  # a version the import did not write: only where the database has
            fact = _versions.by_id(conn, export.account, m.fact_id)  # it, and only a read
            if fact is None:  # under their name
                continue
            if m.reader != export.user:
                continue
            fact_id = fact.id
        assert fact is not None
        if _marks.subject_of(fact) != m.subject:  # a mark is about the subject of its version
            continue
        ended = m.ended_at or fact.ended_recorded_at or fact.valid_until  # as a hand-over marks
        rows.append(
            {
                "account": export.account,
                "reader": m.reader,
                "fact_id": fact_id,
                "subject": m.subject,
                "first_read_at": m.first_read_at,
                "last_read_at": m.last_read_at,
                "ended_at": ended,
                "told_at": m.told_at,
                "held_until": m.held_until,
            }
        )
    if rows:
        conn.execute(marks.insert(), sorted(rows, key=lambda r: (r["reader"], r["fact_id"])))
