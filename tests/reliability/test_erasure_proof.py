"""Erasure proof: after erase_user, the person's name and words are nowhere, and another's all stay.

Two people write distinctive random words in every way the engine keeps text: a history imported
from another database, facts, corrected and forgotten versions, rejected proposals, memories,
facts read from memories, read marks under readers (one named after the person), the notes of
conversations, the items of a store, the vectors an embedder made of their texts, facts captured
and held for their approval (and another's, captured under a reader named after them); and, on
the way, erase one key (``forget(erase=True)``) and forget one memory, whose words must go at
once. The schema says which columns hold a person's words (``_schema.Holds``): every column
their words reach is one of those, and none holds a word of theirs once they are erased, while
the other's words are still where they were. A vector is read as the text its embedder made it
of. On SQLite, the database file and its write-ahead log are read byte by byte too.
"""

from __future__ import annotations

import array
import hashlib
import random
import string
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine, Operation
from korely_memory._store._erasure import words_columns

from .soak import scale, tally

Place = tuple[str, str, str]  # table, column, word


def word(rng: random.Random) -> str:
    """A word no text holds by chance, which the index keeps as it is (no stemmer takes a 'k')."""
    return "zq" + "".join(rng.choice(string.ascii_lowercase) for _ in range(13)) + "k"


class Embedder:
    """Vectors from a digest of each text, remembering which text each vector was made of."""

    def __init__(self) -> None:
        self.texts: dict[bytes, str] = {}

    def __call__(self, texts: list[str]) -> list[list[float]]:
        made = []
        for text in texts:
            digest = hashlib.sha256(text.encode()).digest()
            vector = [0.01 + b / 255 for b in digest[:8]]
            self.texts[array.array("d", vector).tobytes()] = text
            made.append(vector)
        return made

    def made_of(self, needles: list[str]) -> list[bytes]:
        """The vectors made of a text holding one of ``needles``."""
        return [v for v, text in self.texts.items() if any(n in text for n in needles)]


@dataclass
class Life:
    """What one person wrote: their name, their words, and what must outlive them."""

    name: str
    words: list[str] = field(default_factory=list)
    erased: list[str] = field(
        default_factory=list
    )  # gone at once: a key erased, a memory forgotten
    kept: list[str] = field(default_factory=list)  # the account's facts they stated: they stay


def imported(rng: random.Random, name: str, folder: Path, life: Life) -> dict[str, object]:
    """A history of ``name`` made in another database and exported from it."""
    me = Identity("acme", name, "support")
    w = [word(rng) for _ in range(5)]
    life.words += w
    with MemoryEngine(f"sqlite:///{folder / (name + '.db')}") as elsewhere:
        elsewhere.remember(me, "school", f"Went to {w[0]} school")
        elsewhere.correct(me, "school", f"Went to {w[1]} school")
        memory = elsewhere.add_memory(me, f"Talked of {w[2]} once")
        elsewhere.remember(me, "sport", f"Plays {w[3]}", source_memory_id=memory.id)
        elsewhere.get_context(me, reader="bot")
        elsewhere.capture(
            me,
            [("user", "I moved")],
            extractor=lambda m, f: [Operation("record", "street", f"Lives on {w[4]} street")],
            hold_for_owner=True,
        )
        return elsewhere.export_user("acme", name).to_dict()


def live(engine: MemoryEngine, rng: random.Random, life: Life, folder: Path) -> None:
    """Write as a person would, in every way the engine keeps text."""
    name = life.name
    engine.import_user(imported(rng, name, folder, life))  # before anything else of theirs
    engine.grant_admin("acme", name)
    me = Identity("acme", name, "support")
    other_agent = Identity("acme", name, "sales")
    admin = Identity("acme", "anna", "support")
    theirs = [word(rng) for _ in range(17)]
    life.words += theirs
    gone = [word(rng) for _ in range(5)]
    life.erased += gone
    life.kept.append(word(rng))

    engine.remember(me, "home-city", f"Lives in {theirs[0]}")
    engine.get_context(me, reader="bot")
    engine.get_context(me, reader=name)
    engine.correct(me, "home-city", f"Lives in {theirs[1]}")
    engine.remember(other_agent, "plan", f"Uses the {theirs[2]} plan")
    engine.forget(other_agent, "plan")
    rejected = engine.remember(me, "hours", f"Office opens at {theirs[3]}", scope="account")
    engine.reject(admin, rejected.id)
    memory = engine.add_memory(me, f"Said {theirs[4]} and {theirs[5]} in a call")
    engine.remember(me, "pet", f"Has a cat called {theirs[6]}", source_memory_id=memory.id)
    engine.add_memory(other_agent, f"Mentioned {theirs[7]}")
    engine.remember(me, f"k-{theirs[8]}", f"Keeps {theirs[9]}")
    # Vectors of their facts and memories, kept in the database.
    engine.search(me, f"cat {theirs[6]}")
    engine.get_context(me, f"Where does {theirs[1]} live?", reader="bot")
    # What the account owns stays: a fact they stated and an administrator confirmed.
    shared = engine.remember(
        me, "loyalty", f"The account runs the {life.kept[0]} program", scope="account"
    )
    engine.confirm(admin, shared.id)
    held = [Operation("record", "pet", f"Has a dog called {theirs[10]}")]
    engine.capture(
        me, [("user", f"My dog {theirs[10]}")], extractor=lambda m, f: held, hold_for_owner=True
    )
    # A conversation's notes: what each turn showed.
    engine.get_context(me, f"the {theirs[6]} cat", conversation="call-1", anchor="m-1")
    engine.remember(me, "car", f"Drives a {theirs[12]}")
    engine.get_context(me, f"the {theirs[12]} car", conversation="call-1", anchor="m-2")
    # A store's items: the words of each are a fact; the value holds more.
    engine.items.put(
        me,
        ("memories", name),
        f"trip-{theirs[13]}",
        {"text": f"Goes to {theirs[14]}", "notes": f"with {theirs[15]} and {theirs[11]}"},
        text=f"Goes to {theirs[14]}",
        text_at=["text"],
    )
    engine.items.relevance(f"trip {theirs[14]}", [f"Goes to {theirs[14]}"], account="acme")
    engine.capture(
        me,
        [("user", f"I dream of {theirs[16]}"), ("assistant", "Noted.")],
        extractor=lambda m, f: [Operation("record", "dream", f"Dreams of {theirs[16]}")],
    )
    engine.get_context(me, f"dream {theirs[16]}", conversation="call-2")

    # A key erased: its words leave every version, excerpt, note, item, held change and vector.
    engine.remember(me, "code", f"The code is {gone[0]} {gone[1]}")
    engine.add_memory(me, f"my code is {gone[0]} {gone[1]}")
    engine.get_context(me, f"code {gone[0]}", conversation="call-3")
    engine.capture(
        me,
        [("user", "A new code")],
        extractor=lambda m, f: [Operation("replace", "code", f"The code is {gone[2]}")],
        hold_for_owner=True,
    )
    engine.forget(me, "code", erase=True)
    # A memory forgotten: it goes, and the words of the facts read from it.
    lunch = engine.add_memory(me, f"Had {gone[3]} at lunch")
    engine.remember(me, "lunch", f"Eats {gone[4]}", source_memory_id=lunch.id)
    engine.get_context(me, f"lunch {gone[3]}", conversation="call-4")
    engine.forget_memory(me, lunch.id)

    for _ in range(scale(3, 30)):
        engine.correct(me, "home-city", f"Lives in {theirs[rng.randrange(2)]} {rng.random()}")


def meet(engine: MemoryEngine, life: Life, neighbour: Life) -> None:
    """What one person does in another's data: the marks and held changes under a reader of
    their name, and a proposal of the other's they confirm."""
    me = Identity("acme", life.name, "support")
    them = Identity("acme", neighbour.name, "support")
    region = word(rng=random.Random())
    neighbour.kept.append(region)
    engine.confirm(me, engine.remember(them, "region", f"Region {region}", scope="account").id)
    engine.get_context(them, reader=life.name)
    engine.capture(
        them,
        [("user", "I sit by the window")],
        extractor=lambda m, f: [Operation("record", "desk", "Sits by the window")],
        hold_for_owner=True,
        reader=life.name,
    )


def places(engine: MemoryEngine, embedder: Embedder, needles: list[str]) -> set[Place]:
    """Every (table, column, needle) where some row's column holds a needle, in every column of
    every table (a partitioned table's partitions too); a vector holds the text it was made of."""
    found: set[Place] = set()
    meta = sa.MetaData()
    meta.reflect(engine.db)
    with engine.db.connect() as conn:
        for table in meta.tables.values():  # in no order: partitions' keys make cycles
            for row in conn.execute(sa.select(table)):
                for column, value in row._mapping.items():
                    if isinstance(value, (bytes, memoryview)):
                        text = embedder.texts.get(bytes(value), "")
                    else:
                        text = str(value)
                    found |= {(table.name, column, n) for n in needles if n in text}
    return found


def declared() -> set[tuple[str, str]]:
    """The columns the schema says hold a person's words."""
    return {(table, column) for table, columns in words_columns().items() for column in columns}


def two_lives(engine: MemoryEngine, embedder: Embedder, folder: Path) -> tuple[Life, Life]:
    rng = random.Random()
    person, neighbour = Life(f"user-{word(rng)}"), Life(f"user-{word(rng)}")
    engine.grant_admin("acme", "anna")
    for life in (person, neighbour):
        live(engine, rng, life, folder)
    meet(engine, person, neighbour)
    return person, neighbour


def test_nothing_of_an_erased_user_remains_in_any_table(db_url: str, tmp_path: Path) -> None:
    embedder = Embedder()
    with MemoryEngine(db_url, embed=embedder, embed_model="proof") as engine:
        for _ in range(scale(1, 10)):
            person, neighbour = two_lives(engine, embedder, tmp_path)
            words = [*person.words, *neighbour.words]
            written = places(engine, embedder, words)
            # Every word each wrote is kept somewhere, and only where the schema says words are.
            assert {n for _, _, n in written} == set(words)
            assert {(t, c) for t, c, _ in written} <= declared()
            # Their vectors too: of their facts, memories and items.
            assert {t for t, _, _ in written} >= {"korely_vectors", "korely_notes", "korely_items"}
            # A key erased and a memory forgotten left nothing of their words.
            assert places(engine, embedder, [*person.erased, *neighbour.erased]) == set()
            assert embedder.made_of(person.erased)  # though vectors of them were made

            report = engine.erase_user("acme", person.name)
            tally("users erased")
            assert report.facts > 0 and report.memories == 4 and report.account_facts_kept == 1
            assert report.pending == 2 and report.notes > 0 and report.items == 1
            assert places(engine, embedder, [person.name, *person.words]) == set()
            # The other's words are all where they were; the account's facts stay.
            assert places(engine, embedder, neighbour.words) == {
                p for p in written if p[2] in neighbour.words
            }
            kept = places(engine, embedder, [*person.kept, *neighbour.kept])
            assert {n for _, _, n in kept} == {*person.kept, *neighbour.kept}


def test_nothing_of_an_erased_user_remains_in_the_sqlite_file(
    sqlite_url: str, tmp_path: Path
) -> None:
    path = Path(sa.make_url(sqlite_url).database or "")
    embedder = Embedder()
    with MemoryEngine(sqlite_url, embed=embedder, embed_model="proof") as engine:
        for _ in range(scale(1, 10)):
            person, neighbour = two_lives(engine, embedder, tmp_path)
            engine.erase_user("acme", person.name)
            tally("users erased")
            files = [p for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
            assert files
            data = b"".join(file.read_bytes() for file in files)
            left = [w for w in [person.name, *person.words] if w.encode("utf-8") in data]
            assert left == [], f"the file still holds {left}"
            vectors = embedder.made_of([person.name, *person.words, *person.erased])
            assert vectors
            left = [embedder.texts[v] for v in vectors if v in data]
            assert left == [], f"the file still holds the vectors of {left}"
            assert [w for w in neighbour.words if w.encode("utf-8") not in data] == []
