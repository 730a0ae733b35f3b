"""Background capture: the run never waits for it nor fails because of it; it can be waited for.

A slow extraction model is one that waits for the test to let it answer, so
every test here knows, rather than guesses, what has happened when.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from korely_memory import Identity, MemoryEngine, limits
from korely_memory._engine import background as _background
from langchain_korely import CaptureStats, KorelyMiddleware, korely_extractor

from ._agents import ask, operations, scripted

ROME = {"action": "record", "key": "home-city", "content": "Giulia lives in Rome"}
TESTS = Path(__file__).resolve().parent


class Gate:
    """An extraction answer that waits until the test opens the gate."""

    def __init__(self, answer: AIMessage) -> None:
        self.answer = answer
        self.started = threading.Event()
        self.opened = threading.Event()
        self.finished = threading.Event()

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        self.started.set()
        self.opened.wait(30)
        self.finished.set()
        return self.answer


@pytest.fixture
def made(engine: MemoryEngine) -> Iterator[Callable[..., tuple[Any, KorelyMiddleware]]]:
    """Makes agents with a capturing middleware; each is closed before the engine is."""
    middlewares: list[KorelyMiddleware] = []

    def make(*extraction: Any, **options: Any) -> tuple[Any, KorelyMiddleware]:
        middleware = KorelyMiddleware(
            engine, reader="support-bot", capture=korely_extractor(scripted(*extraction)), **options
        )
        middlewares.append(middleware)
        agent = create_agent(scripted(), middleware=[middleware], checkpointer=InMemorySaver())
        return agent, middleware

    yield make
    for middleware in middlewares:
        middleware.close(timeout=30)


def in_thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


@pytest.mark.asyncio
async def test_the_run_does_not_wait_for_a_slow_capture(
    engine: MemoryEngine, giulia: Identity, made: Any, use_async: bool
) -> None:
    gate = Gate(operations(ROME))
    agent, middleware = made(gate, capture_delay=0)

    await ask(agent, "I live in Rome.", giulia, use_async, **in_thread("one"))
    assert gate.started.wait(30)  # the capture is under way...
    assert not gate.finished.is_set()  # ...and the run has returned without it
    assert middleware.capture_stats == CaptureStats(pending=1)
    assert not middleware.flush(timeout=0.1)

    gate.opened.set()
    assert middleware.flush(timeout=30)
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]
    assert middleware.capture_stats == CaptureStats(captured=1)


FAILURES: dict[str, Any] = {
    "the model fails": "unreachable",
    "a malformed answer": AIMessage(content="Keep: Giulia lives in Rome."),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
async def test_a_failed_capture_is_logged_and_counted_never_raised(
    engine: MemoryEngine,
    giulia: Identity,
    made: Any,
    use_async: bool,
    failure: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    unreachable = failure == "unreachable"
    agent, middleware = made(*([] if unreachable else [failure]), operations(ROME))
    extractor = middleware.capture
    extractor.chat_model.failures = int(unreachable)

    with caplog.at_level(logging.WARNING, logger="langchain_korely"):
        result = await ask(agent, "I live in Rome.", giulia, use_async, **in_thread("one"))
        assert middleware.flush(timeout=30)
    assert result["messages"][-1].text == "OK."
    assert middleware.capture_stats == CaptureStats(failed=1)
    assert (extractor.stats.failed, extractor.stats.malformed) == (
        (1, 0) if unreachable else (0, 1)
    )
    (logged,) = [r for r in caplog.records if "could not capture" in r.getMessage()]
    # The model's error with its traceback; a malformed answer with what is wrong with it.
    assert bool(logged.exc_info) == unreachable
    assert unreachable or "operations: must be a list" in logged.getMessage()
    assert engine.get_facts(giulia) == [] and engine.search_memories(giulia, "") == []

    # Nothing was kept of the failed capture: the next run of the excerpt is captured.
    await ask(agent, "I live in Rome.", giulia, use_async, **in_thread("two"))
    assert middleware.flush(timeout=30)
    assert middleware.capture_stats == CaptureStats(captured=1, failed=1)
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]


@pytest.mark.asyncio
async def test_a_database_outage_fails_the_capture_not_the_run(
    outage: Any, giulia: Identity, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    extraction = scripted(operations(ROME))
    with KorelyMiddleware(
        outage.engine, on_error="continue", capture=korely_extractor(extraction)
    ) as middleware:
        agent = create_agent(scripted("Hello."), middleware=[middleware])
        outage.cut()
        with caplog.at_level(logging.WARNING, logger="langchain_korely"):
            result = await ask(agent, "I live in Rome.", giulia, use_async)
            assert middleware.flush(timeout=60)
    assert result["messages"][-1].text == "Hello."
    assert middleware.capture_stats == CaptureStats(failed=1)
    assert extraction.received == []  # the engine could not even look for the excerpt


@pytest.mark.asyncio
async def test_a_later_run_of_the_same_thread_takes_over_the_waiting_capture(
    engine: MemoryEngine, giulia: Identity, made: Any, use_async: bool
) -> None:
    agent, middleware = made(operations(ROME), operations(), capture_delay=60)

    await ask(agent, "Hi.", giulia, use_async, **in_thread("one"))
    await ask(agent, "I live in Rome.", giulia, use_async, **in_thread("one"))
    await ask(agent, "Hello again.", giulia, use_async, **in_thread("two"))
    assert middleware.capture_stats == CaptureStats(superseded=1, pending=2)
    assert engine.get_facts(giulia) == []  # nothing runs before its time...

    assert middleware.flush(timeout=30)  # ...unless asked to
    first, second = (m[0].text for m in middleware.capture.chat_model.received)
    said = first.split("Conversation excerpt:\n", 1)[1].splitlines()
    assert said == ["user: Hi.", "assistant: OK.", "user: I live in Rome.", "assistant: OK."]
    assert second.endswith("user: Hello again.\nassistant: OK.")
    assert middleware.capture_stats == CaptureStats(captured=2, superseded=1)
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]


@pytest.mark.asyncio
async def test_runs_without_a_thread_are_captured_each_on_its_own(
    giulia: Identity, made: Any, use_async: bool
) -> None:
    agent, middleware = made(operations(), operations(), capture_delay=60)
    agent = create_agent(scripted(), middleware=[middleware])  # no checkpointer, no thread
    await ask(agent, "Hi.", giulia, use_async)
    await ask(agent, "Hello.", giulia, use_async)
    assert middleware.capture_stats == CaptureStats(pending=2)
    assert middleware.flush(timeout=30)
    assert middleware.capture_stats == CaptureStats(captured=2)


@pytest.mark.asyncio
async def test_the_waiting_captures_are_bounded(
    giulia: Identity,
    made: Any,
    use_async: bool,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(_background, "MAX_PENDING", 1)
    agent, middleware = made(operations(), capture_delay=60)
    with caplog.at_level(logging.WARNING, logger="langchain_korely"):
        await ask(agent, "Hi.", giulia, use_async, **in_thread("one"))
        result = await ask(agent, "Hello.", giulia, use_async, **in_thread("two"))
    assert result["messages"][-1].text == "OK."
    assert middleware.capture_stats == CaptureStats(dropped=1, pending=1)
    assert any("too many captures wait" in r.getMessage() for r in caplog.records)
    assert middleware.flush(timeout=30)
    assert middleware.capture_stats == CaptureStats(captured=1, dropped=1)


def test_close_finishes_the_waiting_captures_and_stops_capturing(
    engine: MemoryEngine, giulia: Identity
) -> None:
    chat = scripted("Noted.", "You live in Rome.")
    with KorelyMiddleware(
        engine, capture=korely_extractor(scripted(operations(ROME))), capture_delay=60
    ) as middleware:
        agent = create_agent(chat, middleware=[middleware])
        agent.invoke({"messages": [("user", "I live in Rome.")]}, context=giulia)
        assert middleware.capture_stats.pending == 1
    # Leaving the block closed it: the waiting capture ran at once.
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]

    agent.invoke({"messages": [("user", "Where do I live?")]}, context=giulia)
    assert "home-city: Giulia lives in Rome" in chat.prompts[1]  # the block still works
    assert middleware.capture_stats == CaptureStats(captured=1, dropped=1)
    assert middleware.close() and middleware.flush(timeout=0)


def test_close_gives_up_what_its_time_does_not_allow(
    engine: MemoryEngine, giulia: Identity, made: Any
) -> None:
    gate = Gate(operations(ROME))
    agent, middleware = made(gate, capture_delay=0)
    agent.invoke({"messages": [("user", "I live in Rome.")]}, in_thread("one"), context=giulia)
    assert gate.started.wait(30)
    assert not middleware.close(timeout=0.1)
    assert middleware.capture_stats.dropped == 1
    gate.opened.set()  # the capture under way ends on its own
    assert gate.finished.wait(30)


def test_an_idle_worker_ends_and_a_new_one_starts_when_needed(
    giulia: Identity, made: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_background, "IDLE_EXIT", 0.05)
    agent, middleware = made(operations(), operations(), capture_delay=0)

    def workers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "korely-capture"]

    for words in ("Hi.", "Hello."):
        before = workers()
        agent.invoke({"messages": [("user", words)]}, in_thread(words), context=giulia)
        assert middleware.flush(timeout=30)
        for thread in workers():
            if thread not in before:
                thread.join(timeout=30)
                assert not thread.is_alive()
    assert middleware.capture_stats == CaptureStats(captured=2)


@pytest.mark.asyncio
async def test_a_turn_longer_than_a_memory_is_captured_in_parts_never_cut(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    answer = " ".join(f"word{i}" for i in range(3000))  # about 26,000 characters
    extraction = scripted(operations(), operations())
    with KorelyMiddleware(
        engine, capture=korely_extractor(extraction), capture_inline=True, keep_excerpts=True
    ) as middleware:
        agent = create_agent(scripted(answer), middleware=[middleware])
        await ask(agent, "Tell me everything.", giulia, use_async)
    assert middleware.capture_stats == CaptureStats(captured=2)
    kept = sorted(engine.search_memories(giulia, "", limit=10), key=lambda m: m.id)
    assert len(kept) == 2 and all(len(m.content) <= limits.MAX_MEMORY for m in kept)
    words = " ".join(m.content for m in kept).replace("assistant: ", "").split()
    assert words == ["user:", "Tell", "me", "everything.", *answer.split()]


EXITS_WITH_A_CAPTURE_WAITING = """
import sys
sys.path.insert(0, sys.argv[1])
from _agents import operations, scripted
from langchain.agents import create_agent
from korely_memory import Identity, MemoryEngine
from langchain_korely import KorelyMiddleware, korely_extractor

extraction = korely_extractor(scripted(operations(
    {"action": "record", "key": "home-city", "content": "Giulia lives in Rome"})))
middleware = KorelyMiddleware(MemoryEngine(sys.argv[2]), capture=extraction, capture_delay=600)
agent = create_agent(scripted("Noted."), middleware=[middleware])
agent.invoke({"messages": [("user", "I live in Rome.")]},
             context=Identity("acme", "giulia", "support-copilot"))
print(middleware.capture_stats.pending)
"""


def test_interpreter_exit_finishes_the_waiting_captures(tmp_path: Path, giulia: Identity) -> None:
    url = f"sqlite:///{tmp_path / 'exit.db'}"
    done = subprocess.run(
        [sys.executable, "-c", EXITS_WITH_A_CAPTURE_WAITING, str(TESTS), url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1"]  # waiting when the program ended
    assert "Traceback" not in done.stderr
    with MemoryEngine(url) as engine:
        assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]
