"""User turns: which reads of a memory belong together, and the block each turn was served.

A turn is read from the engine once; its later reads (after a tool round,
after a handoff, after the answer) are served the same block, so the model
sees one memory for the whole turn and no read spends what no model sees.

``KorelyMemory`` sees every message stored and tells turns apart by that;
a ``KorelyMemoryBlock`` in a ``Memory`` of your own sees only the messages it
is given and recognises a turn by them (:func:`locate`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

from korely_memory import ContextBlock, Note

from ._acknowledge import Showing, unwatch


@dataclass(eq=False)
class Turn:
    """One user turn and the block read for it."""

    user: str
    """The text of the turn's user message: the block's query."""
    stored: bool = True
    """The user message was stored before the read (agents, ``SimpleChatEngine``); False when
    the read comes first and the message is stored after the answer (``ContextChatEngine``)."""
    closed: bool = False
    """A read-first turn whose user message has since been stored: the next read is a new turn."""
    block: ContextBlock | None = None
    """The block read for the turn; None when nothing was shown."""
    showings: list[Showing] = field(default_factory=list)
    """Every text the block was served as, each with its receipt."""
    before: str | None = None
    """Only for a block in a ``Memory`` of your own: the message before the user's."""
    answered: bool = False
    """A reply was seen after the user message (a ``KorelyMemory`` notes it when the answer is
    stored): the turn is over."""
    stale: bool = False
    """The agent's own tools wrote during the turn: its next read reads again."""
    crowded: bool = False
    """The turn's read was left out of a prompt for want of room: counted (and logged) once."""
    notes: tuple[Note, ...] = ()
    """With the ``"notes"`` placement: the earlier notes of the conversation still in the
    history when the turn was read, put back at their messages on every read of the turn."""

    @property
    def seen(self) -> bool:
        """True once an answered LLM call carried one of the texts the turn was served as."""
        return any(s.seen for s in self.showings)

    @property
    def holds_changes(self) -> bool:
        """True when the block holds changes that no model has answered with yet."""
        return self.block is not None and self.block.receipt is not None and not self.seen

    def end(self) -> None:
        """The turn is over: its texts are no longer looked for."""
        unwatch(self.showings)


class Conversation:
    """Where a ``KorelyMemory``'s conversation stands: its current turn, and what was stored.

    A turn starts when a user message is stored (agents and ``SimpleChatEngine`` store
    the question, then read), or when a read comes with a question that is not stored
    (``ContextChatEngine`` and ``CondensePlusContextChatEngine`` read first and store the
    question with the answer). Storing the answer, tool calls or tool results does not
    start a turn, so every agent of a workflow, and every tool round, shares the turn.
    """

    def __init__(self) -> None:
        self.turn: Turn | None = None
        self.question_stored = False

    def stored(self, messages: list[ChatMessage]) -> None:
        """Note the messages the memory stores."""
        for message in messages:
            if not is_person(message):
                continue
            turn = self.turn
            read_first = turn is not None and not turn.stored and not turn.closed
            if read_first and turn is not None and text_of(message) == turn.user:
                # A chat engine stores the question it read for, with its answer.
                turn.closed = True
            else:
                self.question_stored = True

    def locate(self, history: list[ChatMessage], question: str | None) -> Turn | None:
        """The turn a read belongs to: the current one, a new one (not started), or None.

        None means nobody waits for an answer: a stored conversation read to be shown.
        """
        turn = self.turn
        index = last_user_index(history)
        stored = text_of(history[index]) if index is not None else None
        if self.question_stored:
            if question is not None and question != stored:
                return Turn(question, stored=False)
            return Turn(stored or question or "", stored=True)
        if turn is None or turn.closed:
            if question is not None:
                return Turn(question, stored=False)
            waiting = index is not None and not any(is_answer(m) for m in history[index + 1 :])
            return Turn(stored, stored=True) if waiting and stored is not None else None
        if not turn.stored and question is not None and question != turn.user:
            return Turn(question, stored=False)
        return turn

    def start(self, new: Turn) -> bool:
        """Make ``new`` the current turn; False when it takes over an unanswered one's block.

        A turn asked again (the same words) while no model answered the last one, as when a
        run failed and is retried, is served that turn's block and the changes it holds.
        """
        old, self.turn, self.question_stored = self.turn, new, False
        if old is not None and old.holds_changes and old.user == new.user:
            new.block, new.showings, new.notes = old.block, old.showings, old.notes
            return False
        if old is not None:
            old.end()
        return True

    def reset(self) -> None:
        """Forget the conversation (its messages were deleted)."""
        if self.turn is not None:
            self.turn.end()
        self.turn, self.question_stored = None, False


CODE_RESULT = "Result of executing the code given:"
"""How LlamaIndex's ``CodeActAgent`` starts the message it keeps its code's output in: a user
message, which the person did not write."""


def is_person(message: ChatMessage) -> bool:
    """A message the person wrote: a user message, not a ``CodeActAgent``'s code result.

    Only the person's messages start a turn, are a block's query, carry a note, or are
    captured as what the person said.
    """
    return message.role == MessageRole.USER and not text_of(message).startswith(CODE_RESULT)


def spoken(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` without a ``CodeActAgent``'s code steps: each code result, and the assistant
    message just before it, which wrote the code (a tool call, in effect, not an answer)."""
    steps: set[int] = set()
    for index, message in enumerate(messages):
        if message.role == MessageRole.USER and not is_person(message):
            steps.add(index)
            if index and messages[index - 1].role == MessageRole.ASSISTANT:
                steps.add(index - 1)
    return [m for i, m in enumerate(messages) if i not in steps]


def text_of(message: ChatMessage | str | None) -> str:
    """The text of a message (its text blocks), or the string itself."""
    if message is None:
        return ""
    if isinstance(message, str):
        return message
    return message.content or ""


def is_answer(message: ChatMessage) -> bool:
    """An assistant message that ends a turn: no tool call in it."""
    return (
        message.role == MessageRole.ASSISTANT
        and not any(isinstance(block, ToolCallBlock) for block in message.blocks)
        and not message.additional_kwargs.get("tool_calls")
    )


def anchors(messages: list[ChatMessage], before: Sequence[ChatMessage] = ()) -> dict[int, str]:
    """What each user message's note is attached to, by its index: a digest of its text and
    how many user messages before it said the same, in ``before`` (the messages ``Memory``
    flushed out of the history, which the chat store keeps, archived) too: a chat store keeps
    no message ids, and counting from the conversation's start keeps each message's anchor
    when older ones are flushed."""
    said: dict[str, int] = {}
    for message in before:
        if is_person(message):
            digest = _digest(message)
            said[digest] = said.get(digest, 0) + 1
    found: dict[int, str] = {}
    for index, message in enumerate(messages):
        if not is_person(message):
            continue
        digest = _digest(message)
        said[digest] = said.get(digest, 0) + 1
        found[index] = f"{digest}:{said[digest]}"
    return found


def label(value: str) -> str:
    """``value`` (a session id) as an id the engine takes: as it is, or, when it is empty,
    longer than 255 characters or holds a control character, a digest of it."""
    if 0 < len(value) <= 255 and value.isprintable():
        return value
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()


def _digest(message: ChatMessage) -> str:
    return hashlib.sha256(text_of(message).encode("utf-8", "replace")).hexdigest()[:32]


def last_user_index(messages: list[ChatMessage]) -> int | None:
    """The index of the person's last message, None when there is none."""
    for index in range(len(messages) - 1, -1, -1):
        if is_person(messages[index]):
            return index
    return None


# -- a block in a Memory of your own: turns recognised from the messages ----------------


@dataclass(frozen=True)
class Seen:
    """Where a read of a block in a plain ``Memory`` stands in the conversation."""

    user: str
    before: str | None
    answered: bool

    def continues(self, turn: Turn) -> bool:
        """True when this read belongs to ``turn``, not to a new one."""
        if self.user != turn.user:
            return False
        # Memory flushes its oldest messages, so what came before may vanish within a turn.
        if self.before is not None and self.before != turn.before:
            return False
        # An answered turn whose user message comes back unanswered is the user saying it again.
        return not (turn.answered and not self.answered)


def without_repeated_input(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The chat history Memory holds, without the ``input`` it may append to it for its blocks."""
    msgs = list(messages)
    if (
        len(msgs) >= 2
        and msgs[-1].role == MessageRole.USER
        and msgs[-2].role == MessageRole.USER
        and text_of(msgs[-1]) == text_of(msgs[-2])
    ):
        # After a tool round an agent passes the turn's user text as ``input``,
        # which Memory appends after the stored user message: the same message twice.
        msgs.pop()
    return msgs


def locate(msgs: list[ChatMessage]) -> Seen | None:
    """Find the user turn a read belongs to, or None when no user message is in sight."""
    index = last_user_index(msgs)
    if index is None:
        return None
    before = msgs[index - 1] if index else None
    return Seen(
        user=text_of(msgs[index]),
        before=f"{before.role.value}\x00{text_of(before)}" if before is not None else None,
        answered=any(is_answer(m) for m in msgs[index + 1 :]),
    )
