"""A plain-Python model of docs/concepts.md: facts, memories, marks and the changes told.

It keeps no database and knows nothing of the engine's code. Where the engine
assigns something (a new row's id), the model is handed the engine's answer
and checks that it is new. Logical time stands in for timestamps: the hour the
clock shows (``hour``, moved on by ``time_passes``) and, within it, the order in
which things happened (``tick``). A fact recorded until an hour (``until``) is
true until then; from then on it is ended, as expired, at that hour.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from korely_memory import (
    AlreadyDecided,
    Identity,
    InvalidRequest,
    NotCurrent,
    NotFound,
    PermissionDenied,
)

USER, PROPOSED, ACCOUNT, REJECTED = "user", "account_proposed", "account", "account_rejected"
# Told by default for memory with no end user: changes made on purpose (an end recorded with a
# fact too).
EXPLICIT = frozenset({"corrected", "forgotten", "stated", "erased", "expired"})
ALL_CAUSES = frozenset(
    {"stated", "corrected", "forgotten", "read_from_memory", "rejected", "erased", "expired"}
)
MAX_CHANGES = 3
ERASED = "<erased>"  # stands for the pseudonym an erasure puts in place of the user


@dataclass
class Row:
    """One fact version."""

    id: int
    account: str
    owner: str | None
    agent: str
    key: str
    content: str
    scope: str
    source: int | None
    recorded: Moment
    until: int | None = None  # the hour it stops being true
    ended: Moment | None = None
    cause: str | None = None
    replaced_by: int | None = None

    @property
    def current(self) -> bool:
        """True now: not ended (``time_passes`` ends what expired)."""
        return self.ended is None


@dataclass
class Note:
    """A read mark: one fact handed to one reader."""

    subject: str
    ended: Moment | None = None
    told: bool = False


@dataclass(frozen=True)
class Told:
    """A change a block tells: which version ended, what holds now (None: none), and why."""

    was: int
    now: int | None
    cause: str


@dataclass(frozen=True)
class Block:
    facts: frozenset[int]
    memories: frozenset[int]
    changed: tuple[Told, ...]
    changed_more: int


@dataclass(frozen=True)
class MemoryNote:
    account: str
    owner: str | None
    agent: str
    content: str


Outcome = int | type[Exception]
Moment = tuple[int, int]
"""(the hour, the tick within it): an expiry comes at (its hour, 0), before anything done then."""


def subject_of(row: Row) -> str:
    """The user a fact is about; '' for account facts and agent-team memory."""
    return "" if row.scope == ACCOUNT else (row.owner or "")


@dataclass
class Model:
    rows: dict[int, Row] = field(default_factory=dict)
    memories: dict[int, MemoryNote] = field(default_factory=dict)
    marks: dict[tuple[str, str, int], Note] = field(default_factory=dict)
    admins: set[tuple[str, str]] = field(default_factory=set)
    hour: int = 0
    clock: int = 0

    def tick(self) -> Moment:
        self.clock += 1
        return (self.hour, self.clock)

    def time_passes(self, hours: int) -> int:
        """The clock moves on: every fact true until an hour that came is ended then, as
        expired, and so is every mark of it (the engine's reads see them so). Returns how many
        expired."""
        self.hour += hours
        expired = 0
        for r in self.rows.values():
            if r.current and r.until is not None and r.until <= self.hour:
                r.ended, r.cause = (r.until, 0), "expired"
                expired += 1
                for (_, _, fact_id), note in self.marks.items():
                    if fact_id == r.id and note.ended is None:
                        note.ended = r.ended
        return expired

    # -- who sees what (scopes) -------------------------------------------------------

    def own_current(self, who: Identity, key: str) -> Row | None:
        for r in self.rows.values():
            if (
                r.current
                and r.scope in (USER, PROPOSED)
                and (r.account, r.agent, r.owner, r.key) == (who.account, who.agent, who.user, key)
            ):
                return r
        return None

    def account_current(self, account: str, agent: str, key: str) -> Row | None:
        for r in self.rows.values():
            if (
                r.current
                and r.scope == ACCOUNT
                and (r.account, r.agent, r.key) == (account, agent, key)
            ):
                return r
        return None

    def reaches(self, r: Row, who: Identity) -> bool:
        """Whether ``who`` may see ``r`` at all.

        Its own namespace, or a confirmed fact of its account and agent.
        """
        if (r.account, r.agent) != (who.account, who.agent):
            return False
        return r.scope == ACCOUNT or (r.scope in (USER, PROPOSED) and r.owner == who.user)

    def visible(self, who: Identity) -> dict[str, Row]:
        """The true facts ``who`` is shown, one per key: its own wins over the account's."""
        out: dict[str, Row] = {}
        for r in self.rows.values():
            if r.current and self.reaches(r, who):
                held = out.get(r.key)
                if held is None or (held.scope == ACCOUNT and r.scope != ACCOUNT):
                    out[r.key] = r
        return out

    def every_version(self, who: Identity, key: str | None = None) -> list[Row]:
        """History: every version of its own namespace and every confirmed fact (erased ones with no
        words)."""
        found = [
            r
            for r in self.rows.values()
            if (r.account, r.agent) == (who.account, who.agent)
            and (key is None or r.key == key)
            and (r.owner == who.user or r.scope == ACCOUNT)
        ]
        return sorted(found, key=lambda r: (r.recorded, r.id))

    def memories_of(self, who: Identity) -> set[int]:
        return {
            i
            for i, m in self.memories.items()
            if (m.account, m.agent, m.owner) == (who.account, who.agent, who.user)
        }

    def is_admin(self, account: str, user: str | None) -> bool:
        return user is not None and (account, user) in self.admins

    # -- writes (versions, review, memories, erasure) ----------------------------------

    def _end(self, r: Row, cause: str, replaced_by: int | None = None) -> None:
        r.ended, r.cause, r.replaced_by = self.tick(), cause, replaced_by
        for (_, _, fact_id), note in self.marks.items():
            if fact_id == r.id and note.ended is None:
                note.ended = r.ended

    def _new(self, new_id: int | None, **values: object) -> int:
        assert new_id is not None and new_id not in self.rows, (
            f"engine returned {new_id}, expected a new row"
        )
        self.rows[new_id] = Row(id=new_id, recorded=self.tick(), **values)  # type: ignore[arg-type]
        return new_id

    def remember(
        self,
        who: Identity,
        key: str,
        content: str,
        scope: str,
        source: int | None,
        new_id: int | None,
        until: int | None = None,
    ) -> Outcome:
        if source is not None and source not in self.memories_of(who):
            return NotFound
        stored = PROPOSED if scope == ACCOUNT else USER
        old = self.own_current(who, key)
        if old is None:
            shared = self.account_current(who.account, who.agent, key)
            if shared is not None and (shared.content, shared.until, until) == (
                content,
                None,
                None,
            ):
                return shared.id
        elif (old.content, old.scope, old.until) == (content, stored, until):
            return old.id
        made = self._new(
            new_id,
            account=who.account,
            owner=who.user,
            agent=who.agent,
            key=key,
            content=content,
            scope=stored,
            source=source,
            until=until,
        )
        if old is not None:
            self._end(old, "read_from_memory" if source is not None else "stated", made)
        return made

    def _target(self, who: Identity, key: str) -> Row | type[Exception]:
        own = self.own_current(who, key)
        if own is not None:
            return own
        shared = self.account_current(who.account, who.agent, key)
        if shared is None:
            return NotFound
        if not self.is_admin(who.account, who.user):
            return PermissionDenied
        return shared

    def correct(
        self, who: Identity, key: str, content: str, new_id: int | None, until: int | None = None
    ) -> Outcome:
        old = self._target(who, key)
        if not isinstance(old, Row):
            return old
        if (old.content, old.until) == (content, until):
            return old.id
        made = self._new(
            new_id,
            account=old.account,
            owner=who.user if old.scope == ACCOUNT else old.owner,
            agent=old.agent,
            key=key,
            content=content,
            scope=old.scope,
            source=None,
            until=until,
        )
        self._end(old, "corrected", made)
        return made

    def forget(self, who: Identity, key: str) -> Outcome:
        old = self._target(who, key)
        if not isinstance(old, Row):
            return old
        self._end(old, "forgotten")
        return old.id

    def review(self, admin: Identity, fact_id: int, confirm: bool) -> Outcome:
        if not self.is_admin(admin.account, admin.user):
            return PermissionDenied
        r = self.rows.get(fact_id)
        if r is None or r.account != admin.account:
            return NotFound
        if (r.scope == ACCOUNT and r.current) or r.scope == REJECTED:
            return AlreadyDecided  # a review is decided once
        if not r.current:
            return NotCurrent
        if r.scope != PROPOSED:
            return InvalidRequest
        if confirm:
            replaced = self.account_current(r.account, r.agent, r.key)
            if replaced is not None:
                self._end(replaced, "read_from_memory" if r.source is not None else "stated", r.id)
            r.scope = ACCOUNT
        else:
            self._end(r, "rejected")
            r.scope = REJECTED
        return r.id

    def add_memory(self, who: Identity, content: str, new_id: int) -> int:
        assert new_id not in self.memories
        self.memories[new_id] = MemoryNote(who.account, who.user, who.agent, content)
        return new_id

    def forget_memory(self, who: Identity, memory_id: int) -> Outcome:
        if memory_id not in self.memories_of(who):
            return NotFound
        for r in self.rows.values():
            if r.source == memory_id:
                if r.scope != ACCOUNT:  # a confirmed account fact is the account's: it stays
                    if r.current:
                        self._end(r, "forgotten")
                    r.content = ""
                r.source = None
        del self.memories[memory_id]
        return memory_id

    def erase_user(self, account: str, user: str) -> tuple[int, int, int, int]:
        """What goes, as the engine's report counts it.

        Facts, memories, marks, and account facts kept.
        """
        personal = {
            r.id
            for r in self.rows.values()
            if r.account == account and r.owner == user and r.scope != ACCOUNT
        }
        theirs = {i for i, m in self.memories.items() if m.account == account and m.owner == user}
        marks_gone = 0
        for k, note in list(self.marks.items()):
            acc, reader, fact_id = k
            if acc == account and (note.subject == user or reader == user or fact_id in personal):
                del self.marks[k]
                marks_gone += 1
        kept = 0
        for i in personal:
            del self.rows[i]
        for i in theirs:
            del self.memories[i]
        for r in self.rows.values():
            if r.replaced_by in personal:
                r.replaced_by = None
            if r.source in theirs:
                r.source = None
            if r.account == account and r.owner == user:
                r.owner = ERASED
                kept += 1
        self.admins.discard((account, user))
        return len(personal), len(theirs), marks_gone, kept

    def trim(self) -> int:
        told = [k for k, note in self.marks.items() if note.told]
        for k in told:
            del self.marks[k]
        return len(told)

    def delete_reader(self, account: str, reader: str) -> int:
        gone = [k for k in self.marks if k[:2] == (account, reader)]
        for k in gone:
            del self.marks[k]
        return len(gone)

    # -- reads and notices (the block, marks) ---------------------------------------

    def _mark(self, who: Identity, reader: str, shown: list[Row]) -> None:
        for r in shown:
            self.marks.setdefault((who.account, reader, r.id), Note(subject=subject_of(r)))

    def get_facts(self, who: Identity, reader: str | None) -> set[int]:
        shown = list(self.visible(who).values())
        if reader is not None:
            self._mark(who, reader, shown)
        return {r.id for r in shown}

    def get_context(self, who: Identity, reader: str | None, kinds: frozenset[str] | None) -> Block:
        shown = list(self.visible(who).values())
        memories = frozenset(self.memories_of(who))
        if reader is None:
            return Block(frozenset(r.id for r in shown), memories, (), 0)
        tellable, claims, silent = self._owed(who, reader, kinds)
        told = tellable[:MAX_CHANGES]
        for change in told:
            for fact_id in claims[change.was]:
                self.marks[(who.account, reader, fact_id)].told = True
        for fact_id in silent:
            self.marks[(who.account, reader, fact_id)].told = True
        self._mark(who, reader, shown)
        return Block(
            frozenset(r.id for r in shown), memories, tuple(told), len(tellable) - len(told)
        )

    def _pending(self, who: Identity, reader: str) -> list[Row]:
        subjects = {who.user or "", ""}
        found = [
            (note.ended, fact_id)
            for (acc, rdr, fact_id), note in self.marks.items()
            if acc == who.account
            and rdr == reader
            and note.subject in subjects
            and note.ended is not None
            and not note.told
        ]
        return [self.rows[fact_id] for _, fact_id in sorted(found, reverse=True)]

    def _chain(self, was: Row) -> tuple[Row, Row]:
        """(the last ended version, the end of the chain) following ``replaced_by``."""
        link = end = was
        while end.replaced_by is not None and end.replaced_by in self.rows:
            end = self.rows[end.replaced_by]
            if end.current:
                break
            link = end
        return link, end

    def _true_again(self, was: Row, now: Row | None) -> bool:
        """A fact true again with the same words.

        In the row that replaced it, or in another of its namespace.
        """
        if not was.content:
            return False
        if now is not None and now.content == was.content:
            return True
        for r in self.rows.values():
            same_space = (r.scope == ACCOUNT) == (was.scope == ACCOUNT) and (
                r.scope == ACCOUNT or r.owner == was.owner
            )
            if (
                r.current
                and same_space
                and (r.account, r.agent, r.key) == (was.account, was.agent, was.key)
            ):
                return r.content == was.content
        return False

    def may_be_told_now(self, end: Row, who: Identity) -> bool:
        """'was -> now' names a replacement this identity may see; else it is 'no longer true'."""
        return self.reaches(end, who)

    def _owed(
        self, who: Identity, reader: str, kinds: frozenset[str] | None
    ) -> tuple[list[Told], dict[int, list[int]], list[int]]:
        tellable: list[tuple[int, int, Told]] = []
        claims: dict[int, list[int]] = {}
        silent: list[int] = []
        by_now: dict[int, int] = {}
        for was in self._pending(who, reader):
            link, end = self._chain(was)
            now = end if end.current and self.may_be_told_now(end, who) else None
            if self._true_again(was, now):
                silent.append(was.id)
                continue
            cause = link.cause or "stated"
            if not (
                cause in kinds if kinds is not None else subject_of(was) != "" or cause in EXPLICIT
            ):
                continue
            if now is not None and now.id in by_now:
                claims[by_now[now.id]].append(was.id)
                continue
            if now is not None:
                by_now[now.id] = was.id
            assert link.ended is not None
            tellable.append((link.ended, was.id, Told(was.id, now.id if now else None, cause)))
            claims[was.id] = [was.id]
        tellable.sort(key=lambda t: (t[0], t[1]), reverse=True)
        return [t for _, _, t in tellable], claims, silent
