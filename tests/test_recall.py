"""Recall: facts and memories found by the words people use, whatever their number."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa

from korely_memory import Identity, InvalidRequest, MemoryEngine, Scope
from korely_memory._db._schema import Base, fact_terms, memory_terms
from korely_memory._read import _candidates
from korely_memory._store import _memories, _versions
from korely_memory._text._bm25 import Indexed, Lexical
from korely_memory._text._words import Words, fact_text
from korely_memory.tools import RECALL

from .helpers import Clock, statements

HOUR = dt.timedelta(hours=1)


def crowd(engine: MemoryEngine, giulia: Identity, n: int = 200) -> None:
    """A person with many facts about other things, then the one that matters.

    The first crowd of its size and person on a backend is written fact by fact; the next test's
    empty database gets a copy of its rows (ids, times, word index, counts), in one transaction:
    the tests that take one only read it, and n + 1 writes each cost more than most of them.
    """
    made = _CROWDS.get((engine.db.dialect.name, giulia, n))
    if made is not None:
        _copy_rows(engine, made)
        return
    for i in range(n):
        engine.remember(giulia, f"pref-{i}", f"Giulia prefers option number {i} for topic {i % 7}")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    with engine.db.connect() as conn:
        _CROWDS[engine.db.dialect.name, giulia, n] = {
            table.name: [dict(row._mapping) for row in conn.execute(table.select())]
            for table in Base.metadata.sorted_tables
        }


_CROWDS: dict[tuple[str, Identity, int], dict[str, list[dict[str, Any]]]] = {}


def _copy_rows(engine: MemoryEngine, made: dict[str, list[dict[str, Any]]]) -> None:
    """Write ``made``'s rows into ``engine``'s database, which holds none but its settings
    (written when the engine opened it, and the same as those of the database they came from);
    PostgreSQL's id sequences go on from the copied ids, as SQLite's do by themselves."""
    with engine.db.begin() as conn:
        for table in Base.metadata.sorted_tables:
            rows = made[table.name]
            held = [dict(row._mapping) for row in conn.execute(table.select())]
            if table.name == "korely_settings":
                assert held == rows, "the copy would come from a memory set up otherwise"
                continue
            assert held == [], f"{table.name} is not empty"
            if not rows:
                continue
            conn.execute(table.insert(), rows)
            ids = [c.name for c in table.primary_key.columns if c.autoincrement is True]
            if conn.dialect.name == "postgresql" and ids:
                conn.execute(
                    sa.text("SELECT setval(pg_get_serial_sequence(:t, :c), :n)"),
                    {"t": table.name, "c": ids[0], "n": max(r[ids[0]] for r in rows)},
                )


def test_other_word_forms_find_the_fact_among_many(engine: MemoryEngine, giulia: Identity) -> None:
    crowd(engine, giulia)
    for query in ("Where do I live?", "living arrangements", "What about my home?"):
        block = engine.get_context(giulia, query, token_budget=800)
        assert "home-city" in {f.key for f in block.facts}, query


def test_a_rare_word_outweighs_a_common_one_held_by_newer_facts(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "daniele-city", "Daniele lives in Turin")
    for i in range(250):  # newer, each holding the common word of the query
        engine.remember(giulia, f"contact-{i}", f"Contact {i} lives in district {i}")
    block = engine.get_context(giulia, "Where does Daniele live?", token_budget=300)
    assert block.omitted > 0  # chosen from the word index, not from every fact
    assert "daniele-city" in {f.key for f in block.facts}


def test_the_block_says_how_many_facts_it_left_out(engine: MemoryEngine, giulia: Identity) -> None:
    crowd(engine, giulia)
    block = engine.get_context(giulia, "Where do I live?", token_budget=800)
    assert block.omitted > 100
    assert f"- {block.omitted} more facts not shown; recall finds them." in block.text
    assert block.tokens <= 800


def test_search_looks_at_every_fact_not_a_page(engine: MemoryEngine, giulia: Identity) -> None:
    crowd(engine, giulia, 400)
    engine.remember(giulia, "pref-3", "Giulia prefers the northern region for deliveries")
    block = engine.get_context(giulia, "option", token_budget=200)
    found = engine.search(giulia, "northern deliveries", limit=3)
    assert found.facts[0].key == "pref-3"
    assert "pref-3" not in {f.key for f in block.facts} or block.omitted == 0
    assert engine.search(giulia, "zebra crossing").facts == ()


def test_search_scores_as_bm25_over_every_fact_the_identity_sees(db_url: str) -> None:
    """The database's BM25 (idf and average length over every fact the identity sees, words
    counted with repeats) gives the scores of BM25 over those facts read whole, whatever is
    around them: account facts, one shadowed by an own fact, a proposal, an own fact that
    expired with no write to end it, an account fact that expired, other people, another agent
    definition, ended and erased versions."""
    clock = Clock(dt.datetime(2026, 3, 10, 12, tzinfo=dt.timezone.utc))
    giulia, anna = Identity("acme", "giulia", "bot"), Identity("acme", "anna", "bot")
    with MemoryEngine(db_url, clock=clock) as engine:
        engine.grant_admin("acme", "anna")
        cities = ["Rome", "Milan", "Turin", "Naples", "Genoa"]
        for i in range(300):
            city = cities[i % 5]
            engine.remember(giulia, f"contact-{i}", f"Contact {i} lives in {city}, {city} city")
            clock.advance(seconds=1)
        engine.remember(giulia, "home-city", "Giulia lives in Rome, the city of cities")
        engine.remember(giulia, "home-city", "Giulia lives in Milan")  # the Rome one ends
        engine.remember(giulia, "old-city", "Giulia once lived in Genoa")
        engine.forget(giulia, "old-city", erase=True)
        engine.remember(giulia, "trip", "A trip to Rome", valid_until=clock.now + HOUR)
        engine.remember(anna, "office", "Acme's office is in Rome city", scope=Scope.ACCOUNT)
        engine.remember(anna, "hq", "Acme's headquarters are in Milan", scope=Scope.ACCOUNT)
        engine.remember(
            anna,
            "fair",
            "Acme is at the Turin fair",
            scope=Scope.ACCOUNT,
            valid_until=clock.now + HOUR,
        )
        for proposal in engine.proposals("acme"):
            engine.confirm(anna, proposal.id)
        engine.remember(giulia, "office", "Giulia's office is in Turin")  # shadows Acme's
        engine.remember(giulia, "branch", "Acme opens a branch in Naples", scope=Scope.ACCOUNT)
        assert engine.proposals("acme")  # Giulia's is a proposal she sees
        engine.remember(anna, "home-city", "Anna lives in Rome, Rome, Rome")
        engine.remember(Identity("acme", "giulia", "other-bot"), "home", "Rome Rome Milan")
        clock.advance(hours=2)  # the trip and the fair have expired; nothing ended them
        words, lexical = Words(), Lexical(Words())
        for query in (
            "Rome",
            "Where does Giulia live? Rome city",
            "Turin office",
            "Naples",
            "cities lived contact 7",
            "trip to Rome",
            "Turin fair",
        ):
            found = engine.search(giulia, query, limit=7).facts
            with engine.db.connect() as conn:
                seen = _versions.visible(conn, giulia, clock.now)
            assert {f.key for f in seen} >= {"office", "branch", "hq"}
            assert not {"trip", "fair", "old-city"} & {f.key for f in seen}
            scores = lexical.scores(query, [fact_text(f) for f in seen])
            by_id = {f.id: round(x, 9) for f, x in zip(seen, scores, strict=True)}
            best = sorted((round(x, 9) for x in scores if x > 0), reverse=True)[:7]
            assert [by_id[f.id] for f in found] == best, query
            with engine.db.connect() as conn:
                scored = _candidates.best_matching(
                    conn, giulia, words.distinct(query), clock.now, 7
                )
            assert [f.id for f, _ in scored.facts] == [f.id for f in found]
            assert [round(x, 9) for _, x in scored.facts] == best, query
            assert scored.has_memories is False


def test_case_and_accents_fold(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia vive a Città di Castello")
    assert engine.search(giulia, "CITTA").facts[0].key == "home-city"
    assert engine.search(giulia, "città").facts[0].key == "home-city"


def test_stop_words_never_reach_the_index(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "plan", "The plan is the one of the team")
    kept = engine.add_memory(giulia, "She said that the invoices were late")
    with engine.db.connect() as conn:
        words = set(conn.execute(sa.select(fact_terms.c.term)).scalars())
        said = set(conn.execute(sa.select(memory_terms.c.term)).scalars())
    assert words == {"plan", "one", "team"}
    day = kept.created_at  # a memory is also found by the day it was kept
    assert said == {"said", "invoic", "late", *Words()(f"{day.day} {day:%B} {day.year}")}


def test_the_database_keeps_its_language(db_url: str, giulia: Identity) -> None:
    with MemoryEngine(db_url, language="italian") as engine:
        engine.remember(giulia, "casa", "Giulia abita a Roma")
        assert engine.search(giulia, "abitare").facts  # abita, abitare: abit
    with MemoryEngine(db_url) as engine:
        assert engine.language == "italian"
    with pytest.raises(InvalidRequest) as refused:
        MemoryEngine(db_url, language="english")
    assert refused.value.field == "language" and "'italian'" in str(refused.value)


def test_no_language_folds_but_does_not_stem(sqlite_url: str, giulia: Identity) -> None:
    with MemoryEngine(sqlite_url, language=None) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        assert engine.search(giulia, "LIVES").facts
        assert not engine.search(giulia, "living").facts


def test_an_unknown_language_is_refused_by_name(sqlite_url: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        MemoryEngine(sqlite_url, language="klingon")
    assert refused.value.field == "language"


def test_memories_are_found_by_their_words_among_many_long_ones(
    engine: MemoryEngine, giulia: Identity
) -> None:
    filler = "The weekly call went over the usual agenda items once more. " * 250
    for i in range(30):
        engine.add_memory(giulia, f"Call {i}. {filler}"[:16_000])
    wanted = engine.add_memory(giulia, "Giulia said her daughter started at Liceo Manzoni")
    block = engine.get_context(giulia, "which school does the daughter attend", token_budget=800)
    assert [m.id for m in block.memories][:1] == [wanted.id]
    assert engine.search(giulia, "daughters", limit=2).memories[0].id == wanted.id
    newest = engine.get_context(giulia, token_budget=300)
    assert newest.memories[0].id == wanted.id and newest.tokens <= 300


def test_a_block_reads_the_text_of_only_the_memories_it_shows(
    engine: MemoryEngine, giulia: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(30):  # each matches the query, each longer than the room
        engine.add_memory(giulia, f"Visit {i} to the Milan office. " + "Giulia took notes. " * 300)
    read: list[int] = []
    whole = _memories.whole

    def recording(conn: Any, account: str, memory_ids: Any) -> Any:
        read.extend(memory_ids)
        return whole(conn, account, memory_ids)

    monkeypatch.setattr(_memories, "whole", recording)
    block = engine.get_context(giulia, "Milan office", token_budget=800)
    assert len(block.memories) == 1
    assert read == [block.memories[0].id]  # sized by their kept length, not by reading them


def test_a_long_memory_is_shown_as_far_as_it_fits_and_kept_whole(
    engine: MemoryEngine, giulia: Identity
) -> None:
    long = engine.add_memory(giulia, "Giulia described the whole migration plan. " * 370)
    block = engine.get_context(giulia, "migration", token_budget=400)
    (shown,) = block.memories
    assert shown.content == long.content  # the block's memory is the whole memory
    line = block.text.split("## Relevant memories\n")[1]
    assert line.startswith("- ") and line.endswith("…") and block.tokens <= 400
    assert engine.count_tokens(block.text) == block.tokens


def test_the_recall_tool_lists_keys_to_correct(engine: MemoryEngine, giulia: Identity) -> None:
    crowd(engine, giulia)
    result = RECALL.run(engine, giulia, {"query": "where does she live"})
    assert result.ok
    assert "- home-city: Giulia lives in Rome (since " in result.text
    assert result.text.startswith("Facts kept (correct or forget one under its key):")
    nothing = RECALL.run(engine, giulia, {"query": "zebra"})
    assert nothing.ok and nothing.text == "Nothing kept is about 'zebra'."


@pytest.mark.parametrize(
    "query",
    ["", "  \n ", "\u200b", " \u200b\u2028 ", "?!"],
    ids=["empty", "spaces", "zero-width", "separators", "punctuation"],
)
def test_the_recall_tool_refuses_an_empty_query(
    engine: MemoryEngine, giulia: Identity, query: str
) -> None:
    crowd(engine, giulia)
    result = RECALL.run(engine, giulia, {"query": query})
    assert not result.ok
    assert result.text == "Not found: query: must say what to look for, in a few words"


class Embeddings:
    """A LangChain-shaped embedder that counts what it is asked to embed."""

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += texts
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self._vector(text)

    @staticmethod
    def _vector(text: str) -> list[float]:
        return [1.0, 0.0] if "Rome" in text or "live" in text else [0.0, 1.0]


def test_vectors_are_kept_for_the_next_process(db_url: str, giulia: Identity) -> None:
    first = Embeddings()
    with MemoryEngine(db_url, embed=first, embed_model="toy-v1") as engine:
        for i in range(30):
            engine.remember(giulia, f"food-{i}", f"Giulia enjoys dish number {i}")
        engine.remember(giulia, "home", "Giulia is based in Rome")
        engine.add_memory(giulia, "She asked about trains")
        block = engine.get_context(giulia, "Where does she live?", token_budget=120)
        assert "home" in {f.key for f in block.facts}
        assert first.queries == ["Where does she live?"] and len(first.documents) >= 31
    again = Embeddings()
    with MemoryEngine(db_url, embed=again, embed_model="toy-v1") as engine:
        engine.get_context(giulia, "Where does she live?", token_budget=120)
    assert again.documents == []  # nothing stored was embedded again
    other_model = Embeddings()
    with MemoryEngine(db_url, embed=other_model, embed_model="toy-v2") as engine:
        engine.get_context(giulia, "Where does she live?", token_budget=120)
    assert len(other_model.documents) >= 31


def test_erasure_takes_the_vectors_of_what_it_erases(db_url: str, giulia: Identity) -> None:
    with MemoryEngine(db_url, embed=Embeddings(), embed_model="toy-v1") as engine:
        engine.remember(giulia, "home", "Giulia is based in Rome")
        engine.add_memory(giulia, "She said she lives near the Colosseum")
        assert engine.search(giulia, "Where does she live?").facts
        assert vector_count(engine) == 2
        engine.erase_user("acme", "giulia")
        assert vector_count(engine) == 0


def test_each_account_keeps_the_vectors_of_its_own_texts(db_url: str) -> None:
    """Two accounts hold the same text: each embeds it once and keeps the vector under its own
    name, though one process serves both (a vector another account computed is not used)."""
    embed = Embeddings()
    acme, globex = Identity("acme", "giulia", "bot"), Identity("globex", "bob", "bot")
    with MemoryEngine(db_url, embed=embed, embed_model="toy-v1") as engine:
        for who in (acme, globex):
            engine.remember(who, "home", "Lives in Rome")
            assert engine.search(who, "Where does she live?").facts
        assert embed.documents.count("home Lives in Rome") == 2
        with engine.db.connect() as conn:
            kept = conn.exec_driver_sql(
                "SELECT account, count(*) FROM korely_vectors GROUP BY account ORDER BY account"
            ).all()
        assert [tuple(r) for r in kept] == [("acme", 1), ("globex", 1)]
        engine.erase_user("acme", "giulia")
        assert vector_count(engine) == 1  # globex's is its own


def vector_count(engine: MemoryEngine) -> Any:
    with engine.db.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM korely_vectors")).scalar_one()


def test_facts_indexed_once_score_every_query_as_scored_together() -> None:
    """A person's facts, their words indexed once for many queries, score each query to the
    last bit as BM25 over the same texts does: repeated words, words no fact has, a query of
    stop words only, texts sharing every word (ties), an empty text."""
    lexical = Lexical(Words())
    cities = ["Rome", "Milan", "Turin", "Genoa", "Naples"]
    docs = [
        f"home city {cities[i % 5]} {'office ' * (i % 3)}Giulia lives in {cities[(i * 7) % 5]}"
        for i in range(60)
    ]
    docs += ["", "the and of", docs[3], docs[3]]
    indexed = Indexed(lexical, docs)
    queries = [
        "Where does Giulia live?",
        "office office Rome",
        "Naples Turin home",
        "the of and",
        "zebra",
        "",
        "lives living lived in Milan's offices",
    ]
    for query in queries:
        assert indexed.scores(query) == lexical.scores(query, docs), query
    assert Indexed(lexical, []).scores("Rome") == []


def test_search_by_words_sends_one_statement_for_a_person_with_no_memory(
    db_url: str, giulia: Identity
) -> None:
    """On the database's own clock too: the statement reads it (PostgreSQL), no round trip of
    its own, and no transaction around it."""
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.remember(
            giulia,
            "trip",
            "Giulia was in Paris",
            valid_from=dt.date(2020, 1, 1),
            valid_until=dt.date(2020, 1, 2),
        )
        engine.search(giulia, "Rome")
        with statements(engine.db) as sent:
            found = engine.search(giulia, "Where does Giulia live? Paris or Rome?")
        assert [f.key for f in found.facts] == ["home-city"]  # the trip expired long ago
        assert len(sent) == 1
