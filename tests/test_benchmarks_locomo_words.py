"""The LoCoMo benchmark's LangGraph baseline ranks: its store has an index of word counts.

A LangGraph store without an index returns items in the order kept, whatever the query, which
says nothing of ranking; with `WordCounts` (no model), LangGraph's own cosine ranks the turns by
the words they share with the question. Small conversations made here, no data set needed.
"""

from __future__ import annotations

import datetime as dt

from benchmarks import locomo

AT = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone.utc)
SAID = [
    "I adopted a puppy called Biscuit last week",
    "My sister is moving to Lisbon in June",
    "We went hiking near the lake on Sunday",
    "The bakery on our street closed down",
    "I started painting watercolours at night",
]


def conversation() -> locomo.Conversation:
    turns = tuple(
        locomo.Turn(f"D1:{n}", 1, AT + dt.timedelta(seconds=n), "Caroline", text, None)
        for n, text in enumerate(SAID, start=1)
    )
    questions = (  # each about the last turns, which a store without an index lists last
        locomo.Question("When is Caroline's sister moving to Lisbon?", "June", 2,
                        frozenset({"D1:2"})),
        locomo.Question("What does Caroline paint at night?", "watercolours", 4,
                        frozenset({"D1:5"})),
        locomo.Question("Which bakery closed?", "the one on her street", 4,
                        frozenset({"D1:4"})),
    )  # fmt: skip
    return locomo.Conversation("conv-test", turns, questions, 0)


def test_the_store_s_index_of_word_counts_ranks_the_turn_that_answers_first() -> None:
    run = locomo.Run()
    locomo.store_search(run, [conversation()], None)
    scores = run.of(locomo.WORDS_INDEX)
    assert scores.share("turn hit@1", locomo.SCORED) == 1.0
    assert list(run.scores) == [locomo.WORDS_INDEX]  # no row of a store that ranks nothing
    table = locomo.markdown(run, [conversation()])
    assert "| LangGraph InMemoryStore, index of word counts: turn hit@1 | – | 1.000 |" in table
    assert "no index" not in table


def test_word_counts_are_the_same_in_every_process_and_count_the_engine_s_words() -> None:
    vectors = locomo.WordCounts(dims=64)
    again = locomo.WordCounts(dims=64)
    said = "Caroline's puppies: a puppy, and PUPPIES again"
    assert vectors([said]) == again([said]) == [vectors.embed_query(said)]
    assert sum(vectors.embed_query(said)) == len(locomo.Words()(said))
    assert max(vectors.embed_query("puppy puppies Puppy")) == 3.0  # one stem, counted thrice
    assert sum(vectors.embed_query("the and of")) == 0.0  # stop words count for nothing
