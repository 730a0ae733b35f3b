"""A chatbot that remembers its user across conversations, on a LlamaIndex FunctionAgent.

    python examples/llamaindex_chatbot.py --demo     # a fixed script, offline, nothing kept
    python examples/llamaindex_chatbot.py            # chat; /new: new conversation, /quit: end

Run the chat again and it still knows you. The demo's third conversation is
with a plain ``SimpleChatEngine``, no tools: its facts are captured, a second
model reading each finished turn (``korely_extractor``), and the fourth
conversation, back with the agent, knows them. With ``OPENAI_API_KEY`` set and
``pip install llama-index-llms-openai``, the agent runs on OpenAI. Otherwise (a
key without the package is told in one line), and always with ``--demo``, a
small scripted model stands in, so the demo is the same on every machine and
needs no network. Facts are kept in ``--db`` (a SQLAlchemy URL or a SQLite
file); without it the demo uses an in-memory database, and a chat
``$KORELY_DATABASE_URL``, else ``./korely-memory.db``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import LLM
from llama_index.core.llms.mock import MockFunctionCallingLLM

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemory, korely_extractor, korely_tools

SYSTEM_PROMPT = (
    "You are a friendly assistant. When the user tells you something about themselves that will "
    "still matter in a later conversation, keep it with the remember tool; correct or forget it "
    "when it changes. What you kept earlier is in your memory section."
)
DEMO = [
    ["Hi! I live in Rome."],
    ["Where do I live?"],
]
CAPTURED_DEMO = ["By the way, I moved to Milan last week."]  # a chat engine without tools
LAST_DEMO = ["Where do I live?"]


class OfflineLLM(MockFunctionCallingLLM):
    """A stand-in model: keeps "I live in X" with the remember tool, answers "where do I live?"."""

    def __init__(self) -> None:
        super().__init__()
        self.response_generator = _respond


def _respond(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
    last = messages[-1]
    if last.role == "tool":
        return ChatMessage(role="assistant", content=f"Got it. ({last.content})")
    # The memory comes before the user's words in their message: the words are its last block.
    said = [block.text for block in last.blocks if isinstance(block, TextBlock)]
    text = said[-1] if said else ""
    moved = re.search(r"\bI (?:live in|moved to) ([A-Z][\w' -]*\w)", text, re.IGNORECASE)
    if moved:
        fact = f"The user lives in {moved.group(1)}"
        arguments = {"key": "home-city", "content": fact}
        call = ToolCallBlock(tool_call_id="call-1", tool_name="remember", tool_kwargs=arguments)
        return ChatMessage(role="assistant", blocks=[call])
    if re.search(r"where do I live", text, re.IGNORECASE):
        memory = "\n".join(m.content or "" for m in messages)
        known = re.search(r"^- home-city: (.+?)(?: \(since [^)]*\))?$", memory, re.MULTILINE)
        if known:
            return ChatMessage(
                role="assistant", content=f"From what you told me before: {known.group(1)}."
            )
        return ChatMessage(
            role="assistant",
            content="I don't know yet. Tell me where you live and I will remember.",
        )
    return ChatMessage(
        role="assistant",
        content="(offline model) Tell me where you live, or ask me where you live.",
    )


class OfflineChat(MockFunctionCallingLLM):
    """A stand-in for a chat engine's model: no tools, it answers in words."""

    def __init__(self) -> None:
        super().__init__()
        self.response_generator = _say


def _say(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    answer = _respond(messages, **kwargs)
    return answer if answer.content else ChatMessage(role="assistant", content="Noted.")


class OfflineExtractor(MockFunctionCallingLLM):
    """A stand-in for the capture's model: reads "I live in X" / "I moved to X" in the excerpt."""

    def __init__(self) -> None:
        super().__init__()
        self.response_generator = _extract


def _extract(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
    excerpt = (messages[-1].content or "").split("Conversation excerpt:\n", 1)[-1]
    moved = re.search(
        r"^user: .*\bI (?:live in|moved to) ([A-Z][\w'-]*)", excerpt, re.IGNORECASE | re.MULTILINE
    )
    operations = []
    if moved:  # "record" on a key kept already replaces its fact
        content = f"The user lives in {moved.group(1)}"
        operations.append({"action": "record", "key": "home-city", "content": content})
    # The answer structured_predict asks a function-calling model for: a call of the schema.
    call = ToolCallBlock(
        tool_call_id="call-capture",
        tool_name="MemoryOperations",
        tool_kwargs={"operations": operations},
    )
    return ChatMessage(role="assistant", blocks=[call])


def make_llm(demo: bool) -> LLM:
    """The offline stand-in for the demo or without ``OPENAI_API_KEY``; OpenAI otherwise."""
    # The demo is the same on every machine: never a real model, even with a key set.
    if not demo and os.environ.get("OPENAI_API_KEY"):
        try:
            from llama_index.llms.openai import OpenAI
        except ImportError:
            print(
                "OPENAI_API_KEY is set but llama-index-llms-openai is not installed "
                "(pip install llama-index-llms-openai): the scripted model answers.",
                file=sys.stderr,
            )
        else:
            return OpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return OfflineLLM()


def conversation(engine: MemoryEngine, who: Identity, **capture: Any) -> KorelyMemory:
    """A fresh short-term memory; the facts kept from earlier conversations come with it.

    The memory goes to every ``agent.run``: an agent keeps none of its own between runs.
    With ``capture=``, each finished turn is captured in the background.
    """
    return KorelyMemory.from_defaults(engine, who, reader="chatbot", **capture)


def print_captured(engine: MemoryEngine, who: Identity, before: set[int]) -> None:
    """The facts written since ``before`` (the ids of the facts true then): by capture, in a
    conversation without the tools."""
    for fact in engine.get_facts(who):
        if fact.id not in before:
            print(f"  [captured] {fact.key}: {fact.content}")


async def turn(agent: FunctionAgent, memory: KorelyMemory, text: str) -> None:
    """Send one message and print what came back, tool calls included."""
    handler = agent.run(user_msg=text, memory=memory)
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            print(f"  [{event.tool_name}({event.tool_kwargs}) -> {event.tool_output.content}]")
    output = await handler
    print(f"bot: {output.response.content}")


async def chat(engine: MemoryEngine, who: Identity, agent: FunctionAgent) -> None:
    """Read the terminal until /quit or the end of input; /new starts a new conversation."""
    print("Chat with a bot that remembers you. /new starts a new conversation, /quit ends.")
    memory = conversation(engine, who)
    while True:
        try:
            text = input("you: ").strip()
        except EOFError:
            return
        if text == "/quit":
            return
        if text == "/new":
            memory = conversation(engine, who)
            print("--- new conversation ---")
        elif text:
            await turn(agent, memory, text)


def open_engine(db: str | None, demo: bool) -> MemoryEngine:
    """``--db`` when given; else an in-memory database for the demo, the default one for a chat."""
    if db is not None:
        return MemoryEngine(db if "://" in db else f"sqlite:///{db}")
    if demo:
        return MemoryEngine("sqlite://")  # the demo leaves nothing behind
    return MemoryEngine()


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--demo", action="store_true", help="run a fixed script of four conversations, offline"
    )
    parser.add_argument(
        "--db",
        help="SQLAlchemy URL or SQLite file for the facts (default: $KORELY_DATABASE_URL, "
        "else ./korely-memory.db; with --demo, an in-memory database)",
    )
    parser.add_argument("--account", default="acme")
    parser.add_argument("--user", default="giulia")
    args = parser.parse_args(argv)

    who = Identity(account=args.account, user=args.user, agent="chatbot")
    with open_engine(args.db, args.demo) as engine:
        # The tools write for the person of each run's memory: one agent can serve everyone.
        agent = FunctionAgent(
            llm=make_llm(args.demo), tools=korely_tools(engine), system_prompt=SYSTEM_PROMPT
        )
        if not args.demo:
            await chat(engine, who, agent)
            return
        for number, script in enumerate(DEMO, start=1):
            print(f"--- conversation {number}")
            memory = conversation(engine, who)
            for text in script:
                print(f"you: {text}")
                await turn(agent, memory, text)

        print("--- conversation 3 (a chat engine without tools; its turns are captured)")
        extractor = korely_extractor(OfflineExtractor())
        before = {fact.id for fact in engine.get_facts(who)}
        with conversation(engine, who, capture=extractor) as memory:
            chat_engine = SimpleChatEngine.from_defaults(llm=OfflineChat(), memory=memory)
            for text in CAPTURED_DEMO:
                print(f"you: {text}")
                print(f"bot: {await chat_engine.achat(text)}")
            await asyncio.to_thread(memory.flush)  # only to show it: a chat does not wait
        print_captured(engine, who, before)

        print("--- conversation 4")
        memory = conversation(engine, who)
        for text in LAST_DEMO:
            print(f"you: {text}")
            await turn(agent, memory, text)


if __name__ == "__main__":
    asyncio.run(main())
