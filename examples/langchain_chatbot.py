"""A terminal chatbot that remembers you from one conversation to the next.

    python examples/langchain_chatbot.py               # chat; /new: new conversation, /quit: end
    python examples/langchain_chatbot.py --demo        # a fixed script, offline, nothing kept
    python examples/langchain_chatbot.py --db chat.db  # keep memory in chat.db

Facts are captured: after each message, a model reads the exchange and says what to keep, which
the memory records, or replaces when it corrects a fact kept before. The capture runs in the
background; the chat never waits for it.

With OPENAI_API_KEY set and `pip install langchain-openai`, a real model answers the chat and
captures. Otherwise (a key without the package is told in one line), and always with --demo, a
scripted stand-in does: it understands "I live in <place>", "I moved to <place>", "Where do I
live?" and, at the travel desk, "Book me a taxi home", which is enough to see a fact captured in
one conversation and read back in the next, and a correction told once to another reader of the
same memory. The demo keeps its memory in an in-memory database unless --db names one: it reads no
environment variable.
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
from langchain_korely import KorelyMiddleware, korely_extractor

SYSTEM_PROMPT = (
    "You are a friendly assistant. What the user tells you about themselves is kept for later "
    "conversations on its own; use the memory tools only when they ask you to change or forget "
    "something."
)
DESK_PROMPT = "You are the travel desk. You book taxis for the people you work for."
DEMO = [
    ("bot", ["Hi! I live in Lisbon."]),
    ("desk", ["Book me a taxi home."]),
    ("bot", ["Where do I live?", "Actually, I moved to Porto last month."]),
    ("desk", ["Book me a taxi home.", "And one for tomorrow morning, please."]),
]
PLACE = r"\bI (?:live in|moved to) ([A-Z][\w-]*(?: [A-Z][\w-]*)*)"


class ScriptedModel(BaseChatModel):
    """Stands in for a chat model when there is no API key: a few phrases, no network.

    Asked for structured output (the capture's operations), it reads the excerpt instead.
    """

    user: str = "The user"
    capturing: bool = False

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        # with_structured_output offers the capture's schema as the one tool to call.
        schemas = [t for t in tools if isinstance(t, dict) and t.get("title") == "MemoryOperations"]
        return self.model_copy(update={"capturing": True}) if schemas else self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        reply = self._capture(messages) if self.capturing else self._reply(messages)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _capture(self, messages: list[BaseMessage]) -> AIMessage:
        kept, _, excerpt = messages[-1].text.rpartition("Conversation excerpt:")
        said = [line for line in excerpt.splitlines() if line.startswith("user: ")]
        operations = []
        for place in (m.group(1) for line in said if (m := re.search(PLACE, line))):
            action = "replace" if "\n- home-city:" in kept else "record"
            fact = f"{self.user} lives in {place}"
            operations.append({"action": action, "key": "home-city", "content": fact})
        call = {"name": "MemoryOperations", "args": {"operations": operations}, "id": "ops"}
        return AIMessage(content="", tool_calls=[call])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content="Done.")
        # The memory comes in a <memory> section before the user's own words.
        said = last.text.rpartition("</memory>")[2] if isinstance(last, HumanMessage) else ""
        prompt = "\n".join(m.text for m in messages)
        home = re.search(r"^- home-city: .* lives in (.+?)(?: \(since [^)]*\))?$", prompt, re.M)
        if place := re.search(PLACE, said):
            if "moved" in place.group(0):
                return AIMessage(content=f"Thanks for telling me: {place.group(1)} it is.")
            return AIMessage(content=f"Nice to meet you! {place.group(1)} is a lovely city.")
        if re.search(r"\bwhere do I live\b", said, re.IGNORECASE):
            if home:
                return AIMessage(content=f"You live in {home.group(1)}.")
            return AIMessage(content="I don't know yet. Where do you live?")
        if re.search(r"\btaxi|\bone for\b", said, re.IGNORECASE):
            if not home:
                return AIMessage(content="Where should the taxi take you?")
            booked = f"A taxi to {home.group(1)} is booked."
            if change := re.search(r"^- was: (.+) -> now: (.+?) \(", prompt, re.M):
                return AIMessage(content=f"I see that {change.group(2)} now. {booked}")
            return AIMessage(content=booked)
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


class Facts:
    """What the memory holds about the user, to print what capture added since the last look."""

    def __init__(self, engine: MemoryEngine, who: Identity) -> None:
        self.engine, self.who = engine, who
        self.seen = self._now()
        self.by_tools: set[str] = set()

    def _now(self) -> dict[str, Any]:
        return {f.key: f for f in self.engine.get_facts(self.who)}

    def print_captured(self) -> None:
        now = self._now()
        for key, fact in now.items():
            was = self.seen.get(key)
            if key in self.by_tools or (was is not None and was.id == fact.id):
                continue  # written by the agent's tools, or not new
            replaces = f" (replaces: {was.content})" if was is not None else ""
            print(f"  [captured] {key}: {fact.content}{replaces}")
        self.seen, self.by_tools = now, set()


def turn(agent: Any, who: Identity, conversation: str, text: str, speaker: str = "bot") -> set[str]:
    """Send one message and print what came back, tool results included; returns the keys the
    agent's tools wrote."""
    result = agent.invoke(
        {"messages": [("user", text)]},
        config={"configurable": {"thread_id": conversation}},
        context=who,
    )
    written = set()
    for message in _since_last_user_message(result["messages"]):
        if isinstance(message, ToolMessage):
            print(f"  [{message.name}] {message.text}")
        elif isinstance(message, AIMessage):
            written |= {str(call["args"].get("key")) for call in message.tool_calls}
            if message.text:
                print(f"{speaker}> {message.text}")
    return written


def _since_last_user_message(messages: list[BaseMessage]) -> list[BaseMessage]:
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    return messages[starts[-1] + 1 :] if starts else messages


def demo(
    engine: MemoryEngine, model: BaseChatModel, memory: KorelyMiddleware, who: Identity
) -> None:
    """Four conversations: two with the chatbot, which captures, two with the travel desk."""
    bot = create_agent(model, system_prompt=SYSTEM_PROMPT, middleware=[memory])
    # The travel desk reads the same memory under a reader name of its own: it is told, once,
    # of a change to a fact it was handed. (It captures nothing itself.)
    desk_memory = KorelyMiddleware(engine, reader="travel-desk", read_only=True)
    desk = create_agent(model, system_prompt=DESK_PROMPT, middleware=[desk_memory])
    facts = Facts(engine, who)
    for number, (speaker, script) in enumerate(DEMO, start=1):
        with_whom = "the chatbot" if speaker == "bot" else "the travel desk"
        print(f"--- conversation {number}, with {with_whom} ---")
        conversation = uuid.uuid4().hex
        for text in script:
            print(f"you> {text}")
            facts.by_tools |= turn(
                bot if speaker == "bot" else desk, who, conversation, text, speaker
            )
            memory.flush()  # only to show what was captured here; a chat does not wait for it
            facts.print_captured()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--demo", action="store_true", help="run a fixed four-conversation script, offline"
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
    model = chat_model(args.user, args.demo)
    # The same model captures: korely_extractor asks it for the capture's structured output.
    with KorelyMiddleware(
        engine, reader="terminal-chatbot", capture=korely_extractor(model)
    ) as memory:
        if args.demo:
            demo(engine, model, memory, who)
        else:
            chat(engine, model, memory, who)


def chat(
    engine: MemoryEngine, model: BaseChatModel, memory: KorelyMiddleware, who: Identity
) -> None:
    agent = create_agent(
        model, system_prompt=SYSTEM_PROMPT, middleware=[memory], checkpointer=InMemorySaver()
    )
    facts = Facts(engine, who)
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
            memory.flush()  # the new conversation starts with everything captured so far
            facts.print_captured()
            conversation = uuid.uuid4().hex
            print("--- new conversation ---")
        elif text:
            facts.by_tools |= turn(agent, who, conversation, text)
            facts.print_captured()  # what was captured so far: the chat never waits for it
    memory.close()  # the captures still to do, before the program ends
    facts.print_captured()


if __name__ == "__main__":
    main()
