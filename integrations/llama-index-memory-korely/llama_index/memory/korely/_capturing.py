"""Which stored messages finish a turn, and what the turn said, for capture.

A turn is the user's messages and the assistant's answers after them, in the
order the memory stores them; tool calls and tool results are left out (a
``CodeActAgent``'s code results too, though it stores them as user messages), as
is anything without text. An answer (an assistant message with no tool call)
stored after a user message finishes the turn: its excerpt goes to
``korely_memory``'s capture, inline or in the background, shared with every
adapter. A turn in which the agent erased a fact is finished as erased: it is
not captured. An answer with no words, or a chat engine's ``"Empty Response"``, ends the
turn with the user's messages alone: the empty answer is left out, what the person said is
captured.
"""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage

from ._turns import is_answer, is_person, spoken, text_of

Pairs = tuple[tuple[str, str], ...]

# What LlamaIndex's response synthesizers answer (and chat engines store) when the model said
# nothing or no source was found.
EMPTY_RESPONSE = "Empty Response"


class Said:
    """What the current turn of a conversation said, as its messages are stored."""

    def __init__(self) -> None:
        self.turn = 0
        self._pairs: list[tuple[str, str]] = []
        self._answered = False
        self._erased = False

    def erased(self) -> None:
        """The agent erased a fact in the current turn."""
        self._erased = True

    def stored(self, messages: list[ChatMessage]) -> list[tuple[int, Pairs, bool]]:
        """Note stored messages; returns each turn they finished: its number, its excerpt, and
        whether a fact was erased in it."""
        finished: list[tuple[int, Pairs, bool]] = []
        for message in spoken(messages):
            text = text_of(message).strip()
            if is_person(message):
                if self._answered:
                    self._start()
                if text:
                    self._pairs.append(("user", text))
            elif is_answer(message) and self._pairs and text in ("", EMPTY_RESPONSE):
                # No answer to speak of: the turn is over, and what the person said is kept.
                if not self._answered:
                    self._answered = True
                    finished.append((self.turn, tuple(self._pairs), self._erased))
            elif is_answer(message) and self._pairs:
                if self._answered and self._pairs[-1] == ("assistant", text):
                    continue  # the same answer stored again
                self._pairs.append(("assistant", text))
                self._answered = True
                finished.append((self.turn, tuple(self._pairs), self._erased))
        return finished

    def reset(self) -> None:
        """The history was replaced or cleared: what comes next is a turn of its own."""
        self._start()

    def _start(self) -> None:
        self.turn += 1
        self._pairs, self._answered, self._erased = [], False, False
