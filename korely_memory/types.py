"""The values the engine returns. Plain frozen dataclasses, detached from any session."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from .identity import Scope


@dataclass(frozen=True)
class Fact:
    """One version of a fact. ``invalid_at`` is None while it holds."""

    id: int
    account: str
    owner: str | None
    agent: str
    key: str
    content: str
    scope: Scope | None
    valid_from: dt.datetime
    invalid_at: dt.datetime | None
    recorded_at: dt.datetime
    ended_recorded_at: dt.datetime | None
    end_cause: str | None
    replaced_by_id: int | None
    source_memory_id: int | None
    confirmed_by: str | None
    confirmed_at: dt.datetime | None
    created_at: dt.datetime
    modified_at: dt.datetime

    @property
    def effective_scope(self) -> Scope:
        """The scope every decision uses: rows written before scopes existed read as ``user``."""
        return self.scope if self.scope is not None else Scope.USER

    @property
    def is_current(self) -> bool:
        """True while this version is the one the store holds for its key."""
        return self.ended_recorded_at is None

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> Fact:
        """A Fact from its fields by name, the stored scope text among them (the dict is used up).

        A block reads many rows: this skips the generated ``__init__`` and its per-field work.
        """
        fact = object.__new__(cls)
        scope = fields["scope"]
        fields["scope"] = _SCOPES[scope] if scope in _SCOPES else Scope(scope)
        fact.__dict__.update(fields)
        return fact

    @classmethod
    def from_row(cls, row: Any) -> Fact:
        """A Fact from a database row that holds (at least) every field."""
        m = row._mapping
        return cls.from_fields({name: m[name] for name in FACT_FIELDS})


_SCOPES: dict[str | None, Scope | None] = {None: None, **{s.value: s for s in Scope}}
FACT_FIELDS = tuple(f.name for f in dataclasses.fields(Fact))


@dataclass(frozen=True)
class Memory:
    """Free text kept for recall, scoped like a user fact."""

    id: int
    account: str
    owner: str | None
    agent: str
    content: str
    created_at: dt.datetime

    @classmethod
    def from_row(cls, row: Any) -> Memory:
        m = row._mapping
        return cls(m["id"], m["account"], m["owner"], m["agent"], m["content"], m["created_at"])


@dataclass(frozen=True)
class Change:
    """A fact this reader was handed that has ended since.

    ``now`` is the fact true now at the end of the chain of replacements, or
    None when nothing this identity can see holds now.
    """

    was: Fact
    now: Fact | None
    day: dt.date
    cause: str


@dataclass(frozen=True)
class ContextBlock:
    """What an agent is handed at the start of a conversation.

    ``text == stable + "\\n\\n" + volatile`` when both are present, and
    ``tokens`` is the exact token count of ``text``, never above the budget.
    """

    text: str
    tokens: int
    stable: str
    volatile: str
    facts: tuple[Fact, ...] = ()
    memories: tuple[Memory, ...] = ()
    changed: tuple[Change, ...] = ()
    changed_more: int | None = 0
    omitted: int = 0

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ErasureReport:
    """What ``erase_user`` removed, by kind."""

    pseudonym: str
    facts: int = 0
    memories: int = 0
    marks: int = 0
    admin_grants: int = 0
    account_facts_kept: int = 0


@dataclass(frozen=True)
class TrimReport:
    """What ``trim`` removed."""

    marks_expired: int = 0
    marks_told: int = 0
