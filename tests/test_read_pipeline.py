"""The read is a pipeline of named steps, and a block carries what fitting it takes.

``get_context`` checks the request and hands it to ``BlockCache.serve``, which alone decides
whether a kept block answers it, and what of a block made afresh is kept. ``ContextBlock.fit``
depends on nothing but the block: a pickle, a copy or a ``dataclasses.replace`` fits as the
block does, and a block that cannot be fitted (a conversation's note, one built by hand) says so
by raising ``NotRefittable``, never by coming back over the room.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import datetime as dt
import inspect
import pickle
import textwrap
from collections.abc import Callable, Iterator

import pytest

from korely_memory import ContextBlock, Identity, MemoryEngine, NotRefittable
from korely_memory._engine.context import ContextMethods
from korely_memory._read import _read_path
from korely_memory._text._render import STABLE
from korely_memory._values import _validation

QUERY = "Where does Giulia live?"
BOT = "bot"


def lines_of_code(function: Callable[..., object]) -> int:
    """The lines of ``function`` that hold code: its signature and body, without its docstring,
    comments and blank lines."""
    source = textwrap.dedent(inspect.getsource(function))
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.FunctionDef)
    skipped: set[int] = set()
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        skipped.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = source.splitlines()
    return sum(
        1
        for number, line in enumerate(lines, start=1)
        if number not in skipped and line.strip() and not line.strip().startswith("#")
    )


def test_get_context_stays_a_short_pipeline_of_named_steps() -> None:
    """``get_context`` checks its arguments and hands the request on: the steps have names
    (``serve`` -> ``_made`` -> ``_drafted`` -> ``_marked``; the note in its own method)."""
    assert lines_of_code(ContextMethods.get_context) < 60
    source = inspect.getsource(ContextMethods.get_context)
    assert "self._blocks.serve(" in source and "_conversation_note(" in source
    for step in (ContextMethods._made, ContextMethods._drafted, ContextMethods._marked):
        assert lines_of_code(step) < 60, step.__name__
    # The kept blocks enter the read in one place.
    module = inspect.getsource(inspect.getmodule(ContextMethods))  # type: ignore[arg-type]
    assert module.count("self._blocks.") == 1


# -- BlockCache.serve's contract ------------------------------------------------------------


class Maker:
    """``make`` for ``serve``: the engine's own, counted."""

    def __init__(self, engine: MemoryEngine, request: _read_path.ReadRequest) -> None:
        self.engine, self.request, self.calls = engine, request, 0

    def __call__(self) -> _read_path.Made:
        self.calls += 1
        return self.engine._made(self.request)


def request_of(who: Identity, **arguments: object) -> _read_path.ReadRequest:
    return _read_path.ReadRequest.of(
        who,
        arguments.pop("query", QUERY),
        reader=arguments.pop("reader", None),
        token_budget=arguments.pop("token_budget", 800),
        changes=None,
        as_of=arguments.pop("as_of", None),
        known_as_of=None,
        hold=arguments.pop("hold", None),
        default_hold=_validation.DEFAULT_HOLD,
    )


@pytest.fixture
def served(engine: MemoryEngine, giulia: Identity) -> Iterator[MemoryEngine]:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(giulia, "diet", "Giulia is vegetarian")
    yield engine


def serve(engine: MemoryEngine, request: _read_path.ReadRequest) -> tuple[ContextBlock, int]:
    make = Maker(engine, request)
    return engine._blocks.serve(request, make, engine._reading), make.calls


def test_serve_makes_a_block_once_then_hands_back_the_one_kept_while_nothing_changed(
    served: MemoryEngine, giulia: Identity
) -> None:
    request = request_of(giulia)
    first, made = serve(served, request)
    assert made == 1 and "Rome" in first.text
    again, made = serve(served, request)
    assert made == 0 and again is first
    # Another query on the same facts: made from the facts kept, without calling make.
    other, made = serve(served, request_of(giulia, query="diet"))
    assert made == 0 and other == served.get_context(giulia, "diet")
    served.correct(giulia, "home-city", "Giulia lives in Milan")  # the versions move on
    fresh, made = serve(served, request)
    assert made == 1 and "Milan" in fresh.text and fresh != first


def test_serve_keeps_a_reader_s_block_only_when_it_tells_nothing(
    served: MemoryEngine, giulia: Identity
) -> None:
    request = request_of(giulia, reader=BOT, hold=True)
    first, made = serve(served, request)  # hands the facts over: its marks are written
    assert made == 1 and not first.changed
    steady, made = serve(served, request)
    assert made == 0 and steady is first  # nothing to tell, nothing to write
    served.correct(giulia, "home-city", "Giulia lives in Milan")
    told, made = serve(served, request)
    assert made == 1 and [c.was.content for c in told.changed] == ["Giulia lives in Rome"]
    assert told.receipt is not None
    again, made = serve(served, request)  # a block that tells (and holds) is never kept
    assert made == 1 and again.changed == () and again is not told


def test_serve_always_makes_a_read_of_the_past_and_one_that_owes_marks(
    served: MemoryEngine, giulia: Identity
) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    past = request_of(giulia, as_of=now)
    handed = served.get_context(giulia, as_of=now).facts  # a read of the past: nothing kept
    owing = request_of(giulia, reader=BOT).with_owed(handed)
    for request in (past, owing):
        for _ in range(2):
            assert serve(served, request)[1] == 1
    # Nothing of theirs was kept: the next plain read is made.
    assert serve(served, request_of(giulia))[1] == 1


def test_serve_always_makes_a_read_ranked_by_embeddings(db_url: str, giulia: Identity) -> None:
    def embed(texts: list[str]) -> list[list[float]]:
        return [[1.0, float(len(t))] for t in texts]

    with MemoryEngine(db_url, embed=embed) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        request = request_of(giulia)
        assert [serve(engine, request)[1] for _ in range(2)] == [1, 1]


# -- ContextBlock.fit depends on the block alone --------------------------------------------


@pytest.fixture
def block(engine: MemoryEngine, giulia: Identity) -> ContextBlock:
    for i in range(4):
        engine.remember(giulia, f"k{i}", f"Giulia's arrangement number {i}, kept for the account")
    engine.add_memory(giulia, "Giulia said she is moving to Milan in the spring")
    engine.get_context(giulia, reader=BOT)
    engine.correct(giulia, "k1", "Giulia's arrangement number 1 changed")
    made = engine.get_context(giulia, QUERY, reader=BOT, hold=True)
    assert made.changed and made.memories and made.receipt
    return made


def fits(original: ContextBlock, twin: ContextBlock, room: int) -> None:
    fitted = twin.fit(room)
    assert fitted.tokens <= room and fitted == original.fit(room)
    assert fitted.receipt == original.fit(room).receipt


def test_a_block_read_back_from_a_pickle_fits_in_the_room(block: ContextBlock) -> None:
    back = pickle.loads(pickle.dumps(block))
    for room in (block.tokens - 1, block.tokens - 40):
        fits(block, back, room)
    fits(block, pickle.loads(pickle.dumps(block.fit(block.tokens - 10))), block.tokens - 40)


def test_a_replaced_or_copied_block_fits_in_the_room(block: ContextBlock) -> None:
    room = block.tokens - 40
    for twin in (dataclasses.replace(block), copy.copy(block), copy.deepcopy(block)):
        fits(block, twin, room)
    gave_way = dataclasses.replace(block, gave_way=True).fit(room)
    assert gave_way.tokens <= room and gave_way.gave_way
    # A block whose text is not the one rendered is not rendered anew: it says so.
    changed = dataclasses.replace(block, text=block.text + "\n- one more line")
    with pytest.raises(NotRefittable, match="replaced") as raised:
        changed.fit(room)
    assert (raised.value.room, raised.value.tokens) == (room, changed.tokens)
    assert changed.fit(changed.tokens) is changed  # one that fits is handed back as it is


def test_a_note_is_never_handed_back_over_the_room(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.add_memory(giulia, "Giulia said she is moving to Milan in the spring")
    note = engine.get_context(giulia, QUERY, conversation="t", anchor="1")
    assert note.note is not None
    assert note.fit(note.tokens) is note
    for twin in (note, pickle.loads(pickle.dumps(note)), dataclasses.replace(note)):
        with pytest.raises(NotRefittable, match="note") as raised:
            twin.fit(note.tokens - 1)
        assert raised.value.code == "not_refittable"


def test_a_block_built_by_hand_is_not_refitted_but_says_so() -> None:
    text = f"{STABLE}\n\n## Known facts\n- home-city: Giulia lives in Rome"
    built = ContextBlock(text=text, tokens=60, stable=STABLE, volatile=text[len(STABLE) + 2 :])
    assert built.fit(60) is built
    with pytest.raises(NotRefittable, match="by hand"):
        built.fit(59)


def words(text: str) -> int:
    """A tokenizer of the application's, a module's function: it rides along in a pickle."""
    return len(text.split())


def test_a_tokenizer_of_yours_rides_along_in_a_pickle_when_it_is_a_module_s_function(
    db_url: str, giulia: Identity
) -> None:
    for tokenizer, rides in ((words, True), (lambda text: len(text.split()), False)):
        with MemoryEngine(db_url, tokenizer=tokenizer) as engine:
            for i in range(6):
                engine.remember(giulia, f"k{i}", f"Giulia's arrangement number {i}")
            block = engine.get_context(giulia)
        room = block.tokens - 10
        assert block.fit(room).tokens <= room
        back = pickle.loads(pickle.dumps(block))
        assert back == block
        if rides:
            assert back.fit(room) == block.fit(room)
        else:
            with pytest.raises(NotRefittable, match="pickle"):
                back.fit(room)
