"""The errors korely-memory raises.

Every error carries a stable ``code`` that adapters can branch on and a message
that says what to do about it::

    KorelyError                      code
    ├── InvalidRequest (ValueError)  invalid_request   .field names the argument
    ├── NotFound (LookupError)       not_found
    ├── PermissionDenied             forbidden
    ├── NotCurrent                   fact_not_current  .current_fact_id
    ├── AlreadyDecided               already_decided   .fact_id, .decision
    ├── LimitExceeded                limit_exceeded
    ├── NotRefittable                not_refittable    .room, .tokens
    └── SchemaVersionError           schema_version    .found, .head

A database failure is raised as SQLAlchemy raised it, never turned into an
empty answer.
"""

from __future__ import annotations


class KorelyError(Exception):
    """Base of every error the engine raises on purpose."""

    code = "korely_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(KorelyError, ValueError):
    """An argument breaks a rule; nothing was changed."""

    code = "invalid_request"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class NotFound(KorelyError, LookupError):
    """No true fact (or memory) answers the request."""

    code = "not_found"


class PermissionDenied(KorelyError):
    """The identity may not do this, e.g. confirm an account fact without being an administrator."""

    code = "forbidden"


class NotCurrent(KorelyError):
    """The fact named has ended; ``current_fact_id`` is what replaced it, if anything."""

    code = "fact_not_current"

    def __init__(self, message: str, current_fact_id: int | None = None) -> None:
        super().__init__(message)
        self.current_fact_id = current_fact_id


class AlreadyDecided(KorelyError):
    """A proposal was confirmed or rejected already: a review is decided once.

    Attributes:
        fact_id: The fact reviewed.
        decision: ``"confirmed"`` or ``"rejected"``.
    """

    code = "already_decided"

    def __init__(self, message: str, fact_id: int, decision: str) -> None:
        super().__init__(message)
        self.fact_id = fact_id
        self.decision = decision


class LimitExceeded(KorelyError):
    """A ceiling was reached, e.g. ``max_facts`` when recording a new key."""

    code = "limit_exceeded"


class NotRefittable(KorelyError):
    """``ContextBlock.fit`` cannot give a block in ``room``: the block is a conversation's note
    (kept as it was shown), or it was not rendered by the engine as it stands (built by hand,
    its text replaced, or read back from a pickle without its tokenizer).

    Attributes:
        room: The room asked for.
        tokens: The tokens the block takes.
    """

    code = "not_refittable"

    def __init__(self, message: str, *, room: int, tokens: int) -> None:
        super().__init__(message)
        self.room = room
        self.tokens = tokens


class SchemaVersionError(KorelyError):
    """The database's schema is not the one this version of korely-memory works with.

    Attributes:
        found: The revision the database is at, ``"unversioned"``, or ``"empty"``.
        head: The revision this version of korely-memory works with.
    """

    code = "schema_version"

    def __init__(self, message: str, found: str, *, head: str) -> None:
        super().__init__(message)
        self.found = found
        self.head = head
