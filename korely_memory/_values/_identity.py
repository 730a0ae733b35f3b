"""Who reads and writes memory: the identity triple, the scopes of a fact, why a version ended."""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    """An agent's identity: the tenant, the person it works for, and the agent definition.

    ``user`` is None for an agent that serves no particular person (a team of
    agents sharing one memory). Memory is keyed to this triple, never to an
    agent instance or a conversation.
    """

    account: str
    user: str | None
    agent: str


class Scope(str, enum.Enum):
    """Whom a fact reaches. Stored as its text value."""

    USER = "user"
    """About the person; seen by that (account, user, agent) only."""
    ACCOUNT_PROPOSED = "account_proposed"
    """About the whole account, waiting for an administrator; a user fact of its owner meanwhile."""
    ACCOUNT = "account"
    """Confirmed; seen by every user of the account through the same agent definition."""
    ACCOUNT_REJECTED = "account_rejected"
    """Refused by an administrator; ended, shown to nobody, kept for review."""

    def __str__(self) -> str:
        return self.value


class EndCause(str, enum.Enum):
    """Why a version stopped being the true one. Stored as its text value."""

    STATED = "stated"
    """Something new was recorded under its key."""
    CORRECTED = "corrected"
    """It was corrected."""
    FORGOTTEN = "forgotten"
    """It was forgotten, or the memory it was read from was."""
    READ_FROM_MEMORY = "read_from_memory"
    """What replaced it was read from a memory."""
    REJECTED = "rejected"
    """An administrator refused the proposal."""
    ERASED = "erased"
    """It was forgotten with ``erase=True``: its words are gone."""
    EXPIRED = "expired"
    """Its ``valid_until`` came: it was recorded as true until then."""

    def __str__(self) -> str:
        return self.value

    @property
    def said(self) -> str:
        """How a notice names it: ``read from a memory`` rather than ``read_from_memory``."""
        return "read from a memory" if self is EndCause.READ_FROM_MEMORY else self.value
