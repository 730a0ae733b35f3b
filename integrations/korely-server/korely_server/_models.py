"""What the REST API takes and answers, as pydantic models (the OpenAPI schema is drawn from
them), and the engine's values turned into them."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from korely_memory import Change, ContextBlock, ErasureReport, Fact, Memory, SearchResult

if TYPE_CHECKING:
    from korely_memory import PendingFact


class Body(BaseModel):
    """A request body: a field the route does not take is refused, not ignored."""

    model_config = ConfigDict(extra="forbid")


class RememberBody(Body):
    key: str = Field(description="The fact's key, e.g. home-city.")
    content: str = Field(description="What is true, in a sentence.")
    scope: Literal["user", "account"] = Field(
        "user",
        description="account: about the whole account, proposed for an administrator's review.",
    )
    valid_from: dt.datetime | dt.date | None = None
    valid_until: dt.datetime | dt.date | None = Field(
        None, description="When it stops being true; a date means through that day."
    )


class CorrectBody(Body):
    content: str
    valid_from: dt.datetime | dt.date | None = None
    valid_until: dt.datetime | dt.date | None = None


class ForgetBody(Body):
    erase: StrictBool = Field(False, description="Erase its words too, and every version's.")
    at: dt.datetime | dt.date | None = Field(None, description="When it stopped being true.")


class MemoryBody(Body):
    content: str = Field(description="Free text kept for recall, up to 16,000 characters.")


class SearchBody(Body):
    query: str
    limit: int = Field(
        10, ge=1, le=100, description="The most facts, and the most memories, returned."
    )


class FactOut(BaseModel):
    id: int
    key: str
    content: str | None = Field(description="None once erased.")
    scope: str
    user: str | None
    agent: str
    current: bool
    valid_from: dt.datetime
    invalid_at: dt.datetime | None
    valid_until: dt.datetime | None
    recorded_at: dt.datetime
    ended_recorded_at: dt.datetime | None
    end_cause: str | None
    replaced_by_id: int | None
    source_memory_id: int | None
    confirmed_by: str | None
    confirmed_at: dt.datetime | None


class MemoryOut(BaseModel):
    id: int
    content: str
    user: str | None
    agent: str
    created_at: dt.datetime


class ChangeOut(BaseModel):
    was: FactOut
    now: FactOut | None = Field(description="What holds now, or None when nothing does.")
    day: dt.date
    cause: str


class ContextOut(BaseModel):
    text: str
    tokens: int
    stable: str
    volatile: str
    facts: list[FactOut]
    memories: list[MemoryOut]
    changed: list[ChangeOut]
    changed_more: int | None = Field(
        description="Changes not told for want of room, told by a later read; None: uncounted."
    )
    omitted: int = Field(description="True facts left out for want of room.")


class FactPage(BaseModel):
    facts: list[FactOut]
    next_cursor: str | None = Field(description="Pass it as cursor for the next page.")


class FactsOut(BaseModel):
    facts: list[FactOut]


class SearchOut(BaseModel):
    facts: list[FactOut]
    memories: list[MemoryOut]


class MemoriesOut(BaseModel):
    memories: list[MemoryOut]


class ForgetOut(BaseModel):
    fact: FactOut = Field(description="The version that ended.")


class ReadMarksOut(BaseModel):
    read_marks_deleted: int


class ErasureOut(BaseModel):
    pseudonym: str
    facts: int
    memories: int
    marks: int
    admin_grants: int
    account_facts_kept: int
    scrubbed: bool
    notes: int
    items: int


class PendingOut(BaseModel):
    id: int
    operation: str
    key: str
    content: str | None
    user: str | None
    agent: str
    captured_at: dt.datetime
    reader: str | None
    drawn_against: int | None = Field(
        description="The version of the fact it was drawn against (null: the key held none). "
        "Approving it once another version holds, or none does, is refused: 409 "
        "fact_not_current, with the Location of the one that holds."
    )


class PendingListOut(BaseModel):
    pending: list[PendingOut]


class ApprovedOut(BaseModel):
    fact: FactOut | None = Field(description="What the approval wrote (or ended).")


class ErrorDetail(BaseModel):
    code: str
    field: str | None
    message: str


class ErrorOut(BaseModel):
    error: ErrorDetail


def fact(value: Fact) -> FactOut:
    return FactOut(
        id=value.id,
        key=value.key,
        content=value.content or None,
        scope=value.effective_scope.value,
        user=value.owner,
        agent=value.agent,
        current=value.is_current,
        valid_from=value.valid_from,
        invalid_at=value.invalid_at,
        valid_until=value.valid_until,
        recorded_at=value.recorded_at,
        ended_recorded_at=value.ended_recorded_at,
        end_cause=value.end_cause.value if value.end_cause is not None else None,
        replaced_by_id=value.replaced_by_id,
        source_memory_id=value.source_memory_id,
        confirmed_by=value.confirmed_by,
        confirmed_at=value.confirmed_at,
    )


def memory(value: Memory) -> MemoryOut:
    return MemoryOut(
        id=value.id,
        content=value.content,
        user=value.owner,
        agent=value.agent,
        created_at=value.created_at,
    )


def change(value: Change) -> ChangeOut:
    return ChangeOut(
        was=fact(value.was),
        now=fact(value.now) if value.now is not None else None,
        day=value.day,
        cause=value.cause.value,
    )


def context(block: ContextBlock) -> ContextOut:
    return ContextOut(
        text=block.text,
        tokens=block.tokens,
        stable=block.stable,
        volatile=block.volatile,
        facts=[fact(f) for f in block.facts],
        memories=[memory(m) for m in block.memories],
        changed=[change(c) for c in block.changed],
        changed_more=block.changed_more,
        omitted=block.omitted,
    )


def search(result: SearchResult) -> SearchOut:
    return SearchOut(
        facts=[fact(f) for f in result.facts], memories=[memory(m) for m in result.memories]
    )


def erasure(report: ErasureReport) -> ErasureOut:
    return ErasureOut(
        pseudonym=report.pseudonym,
        facts=report.facts,
        memories=report.memories,
        marks=report.marks,
        admin_grants=report.admin_grants,
        account_facts_kept=report.account_facts_kept,
        scrubbed=report.scrubbed,
        notes=report.notes,
        items=report.items,
    )


def pending(value: PendingFact) -> PendingOut:
    return PendingOut(
        id=value.id,
        operation=value.operation,
        key=value.key,
        content=value.content,
        user=value.user,
        agent=value.agent,
        captured_at=value.captured_at,
        reader=value.reader,
        drawn_against=value.drawn_against,
    )


def error(code: str, field: str | None, message: str) -> dict[str, Any]:
    return ErrorOut(error=ErrorDetail(code=code, field=field, message=message)).model_dump()
