"""Who reads and writes memory: the identity triple and the scopes of a fact."""

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
    """About the whole account, waiting for an administrator; behaves as a user fact of its owner."""
    ACCOUNT = "account"
    """Confirmed; seen by every user of the account through the same agent definition."""
    ACCOUNT_REJECTED = "account_rejected"
    """Refused by an administrator; ended, shown to nobody, kept for review."""

    def __str__(self) -> str:
        return self.value
