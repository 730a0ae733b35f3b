"""A terminal chatbot that remembers you from one conversation to the next.

    python examples/langchain_chatbot.py               # chat; /new: new conversation, /quit: end
    python examples/langchain_chatbot.py --demo        # a fixed script, offline, nothing kept
    python examples/langchain_chatbot.py --db chat.db  # keep memory in chat.db

With OPENAI_API_KEY set and `pip install langchain-openai`, a real model answers the chat.
Otherwise (a key without the package is told in one line), and always with --demo, a scripted
stand-in does: it understands "I live in <place>" and "Where do I live?", which is enough to see a
fact recorded in one conversation and read back in the next. The demo keeps its memory in an
in-memory database unless --db names one: it reads no environment variable.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from korely_memory import Identity, MemoryEngine
from langchain_korely import KorelyMiddleware

SYSTEM_PROMPT = (
    "You are a friendly assistant. When the user tells you something about themselves that "
    "will matter in later conversations, record it with the remember tool."
)
DEMO = [
    ["Hi! I live in Lisbon.", "Thanks, that's all for today."],
    ["Where do I live?"],
]


class ScriptedModel(BaseChatModel):
    """Stands in for a chat model when there is no API key: a few phrases, no network."""

    user: str = "The user"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content="Noted, I'll remember that.")
        # The memory comes in a <memory> section before the user's own words.
        said = last.text.rpartition("</memory>")[2] if isinstance(last, HumanMessage) else ""
        if moved := re.search(r"\bI live in ([^.!?]+)", said, re.IGNORECASE):
            fact = f"{self.user} lives in {moved.group(1).strip()}"
            call = {"name": "remember", "args": {"key": "home-city", "content": fact}, "id": "c1"}
            return AIMessage(content="", tool_calls=[call])
        if re.search(r"\bwhere do I live\b", said, re.IGNORECASE):
            prompt = "\n".join(m.text for m in messages)
            known = re.search(
                r"^- home-city: .* lives in (.+?)(?: \(since [^)]*\))?$", prompt, re.M
            )
            if known:
                return AIMessage(content=f"You live in {known.group(1)}.")
            return AIMessage(content="I don't know yet. Where do you live?")
        if re.search(r"\bthank", said, re.IGNORECASE):
            return AIMessage(content="You're welcome. Talk soon!")
        return AIMessage(content="I'm a scripted stand-in: tell me where you live, or ask me.")


def chat_model(user: str, demo: bool) -> BaseChatModel:
    # The demo is the same on every machine: never a real model, even with a key set.
    if not demo and os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI
        except ImportError:
            print(
                "OPENAI_API_KEY is set but langchain-openai is not installed "
                "(pip install langchain-openai): the scripted model answers.",
                file=sys.stderr,
            )
        else:
            return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return ScriptedModel(user=user)


def open_engine(db: str | None, demo: bool) -> MemoryEngine:
    if db:
        return MemoryEngine(db if "://" in db else f"sqlite:///{db}")
    if demo:
        return MemoryEngine("sqlite://")  # the demo leaves nothing behind
    return MemoryEngine()


def turn(agent: Any, who: Identity, conversation: str, text: str) -> None:
    """Send one message and print what came back, tool results included."""
    result = agent.invoke(
        {"messages": [("user", text)]},
        config={"configurable": {"thread_id": conversation}},
        context=who,
    )
    for message in _since_last_user_message(result["messages"]):
        if isinstance(message, ToolMessage):
            print(f"  [{message.name}] {message.text}")
        elif isinstance(message, AIMessage) and message.text:
            print(f"bot> {message.text}")


def _since_last_user_message(messages: list[BaseMessage]) -> list[BaseMessage]:
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    return messages[starts[-1] + 1 :] if starts else messages


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--demo", action="store_true", help="run a fixed two-conversation script, offline"
    )
    parser.add_argument(
        "--db",
        help="SQLite file or database URL (default: $KORELY_DATABASE_URL or ./korely-memory.db; "
        "with --demo, an in-memory database)",
    )
    parser.add_argument("--user", default="Alex", help="who is chatting (default: Alex)")
    args = parser.parse_args(argv)

    engine = open_engine(args.db, args.demo)
    who = Identity(account="demo", user=args.user, agent="terminal-chatbot")
    agent = create_agent(
        chat_model(args.user, args.demo),
        system_prompt=SYSTEM_PROMPT,
        middleware=[KorelyMiddleware(engine, reader="terminal-chatbot")],
        checkpointer=InMemorySaver(),
    )

    if args.demo:
        for number, script in enumerate(DEMO, start=1):
            print(f"--- conversation {number} ---")
            conversation = uuid.uuid4().hex
            for text in script:
                print(f"you> {text}")
                turn(agent, who, conversation, text)
        return

    print("Chat with a bot that remembers you. /new starts a new conversation, /quit ends.")
    conversation = uuid.uuid4().hex
    while True:
        try:
            text = input("you> ").strip()
        except EOFError:
            break
        if text == "/quit":
            break
        if text == "/new":
            conversation = uuid.uuid4().hex
            print("--- new conversation ---")
        elif text:
            turn(agent, who, conversation, text)


if __name__ == "__main__":
    main()
