"""LoCoMo: does a read find the turns that hold a question's answer?

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM
Agents", ACL 2024) is ten conversations between two people, each of 19 to 32
sessions (about 600 turns), with about 200 questions each. Every question names
the turns (``dia_id``) that hold its evidence, so retrieval is scored without a
model. The data is CC BY-NC 4.0 and is not shipped here: the command takes the
path of ``locomo10.json`` (from snap-research/LoCoMo, ``data/locomo10.json``).

Each conversation is one person's memory (account ``locomo``, user its
``sample_id``). Each turn is kept with ``add_memory`` as ``Speaker: text``
(a shared photo adds ``[shares a photo: caption]``), at its session's date and
time (the engine's ``clock``), one second apart. Then every question is asked:

- ``search`` (the ranking the ``recall`` tool shows): top 1, 5 and 10 memories;
  a turn hit when one of them is an evidence turn, evidence recall the share
  of the evidence turns among them, a session hit when one is from a session
  that holds evidence;
- ``get_context`` at 400, 800 and 2,000 tokens: the share of questions with an
  evidence turn in ``block.memories``, and the block's tokens;
- the same top k from ``rank_bm25``'s ``BM25Okapi`` over the engine's words (the
  same folding, stop words and stemmer), and from LangGraph's ``InMemoryStore``
  with an index, which ranks by the cosine of the query's vector and each
  turn's: vectors of those words' counts, hashed into ``WORD_DIMS`` dimensions
  (``WordCounts``, no model), and, with ``--embed``, the embedding's too.

Categories 1-4 (multi-hop, temporal, open-domain, single-hop) are scored
together, as LoCoMo's papers do; 5 (adversarial: the answer is not in the
conversation) is reported apart. A question whose evidence names no turn of
its conversation is left out, and counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from korely_memory import Identity, MemoryEngine
from korely_memory._text._words import Words

from . import workloads as w
from .base import Databases, Sizes, Table

K = (1, 5, 10)
BUDGETS = (400, 800, 2_000)
ANSWER_BUDGET = 2_000  # --answer: the block the model answers from
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED = (1, 2, 3, 4)
ACCOUNT = "locomo"
AGENT = "locomo-bench"
_WHEN = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
_DIA = re.compile(r"D:?(\d+):(\d+)")  # "D8:6"; the data also says "D30:05" and "D:11:26"
_LABEL = re.compile(r"\W*(?:label\W*)?(CORRECT|WRONG)\W*", re.IGNORECASE)  # the judge's last line


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    at: dt.datetime
    speaker: str
    text: str
    caption: str | None

    @property
    def memory(self) -> str:
        """The turn as it is kept: who said it, what they said, and the photo they shared."""
        photo = f" [shares a photo: {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{photo}"


@dataclass(frozen=True)
class Question:
    text: str
    answer: str
    category: int
    evidence: frozenset[str]

    @property
    def sessions(self) -> frozenset[str]:
        return frozenset(session_of(e) for e in self.evidence)


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    left_out: int  # questions whose evidence names no turn of the conversation


def session_of(dia_id: str) -> str:
    return dia_id.split(":", 1)[0]


def read(
    path: str, limit: int | None = None, questions: int | None = None, turns: int | None = None
) -> list[Conversation]:
    """The conversations of ``locomo10.json``, the first ``limit`` of them, each with the first
    ``questions`` questions of each category (None: all) and its first ``turns`` turns (None:
    all; a question whose evidence is in none of them is left out)."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    return [_first_questions(_conversation(c, turns), questions) for c in raw[:limit]]


def _first_questions(conv: Conversation, per_category: int | None) -> Conversation:
    if per_category is None:
        return conv
    asked: Counter[int] = Counter()
    kept = []
    for q in conv.questions:
        asked[q.category] += 1
        if asked[q.category] <= per_category:
            kept.append(q)
    return dataclasses.replace(conv, questions=tuple(kept))


def _conversation(raw: dict[str, Any], first: int | None = None) -> Conversation:
    talk = raw["conversation"]
    turns: list[Turn] = []
    n = 1
    while f"session_{n}" in talk:
        start = dt.datetime.strptime(talk[f"session_{n}_date_time"], _WHEN)
        start = start.replace(tzinfo=dt.timezone.utc)
        for i, t in enumerate(talk[f"session_{n}"]):
            at = start + dt.timedelta(seconds=i)
            turns.append(Turn(t["dia_id"], n, at, t["speaker"], t["text"], t.get("blip_caption")))
        n += 1
    if first is not None:
        del turns[first:]
    known = {t.dia_id for t in turns}
    questions = []
    left_out = 0
    for q in raw["qa"]:
        # A few entries hold two ids in one string ("D8:6; D9:17"); a few name no turn at all.
        named = (f"D{int(s)}:{int(t)}" for entry in q["evidence"] for s, t in _DIA.findall(entry))
        evidence = frozenset(named) & known
        if not evidence:
            left_out += 1
            continue
        answer = q.get("answer", q.get("adversarial_answer", ""))
        questions.append(Question(q["question"], str(answer), int(q["category"]), evidence))
    return Conversation(raw["sample_id"], tuple(turns), tuple(questions), left_out)


@dataclass
class Scores:
    """What one contender found, question by question, by category."""

    hits: dict[tuple[str, int], list[float]] = field(default_factory=dict)

    def add(self, measure: str, category: int, value: float) -> None:
        self.hits.setdefault((measure, category), []).append(value)

    def ranked(self, q: Question, found: Sequence[str]) -> None:
        """Score ``found``, turn ids best first, for ``q``."""
        for k in K:
            top = set(found[:k])
            self.add(f"turn hit@{k}", q.category, float(bool(top & q.evidence)))
            self.add(f"evidence recall@{k}", q.category, len(top & q.evidence) / len(q.evidence))
            sessions = {session_of(t) for t in top}
            self.add(f"session hit@{k}", q.category, float(bool(sessions & q.sessions)))

    def share(self, measure: str, categories: Sequence[int]) -> float | None:
        values = [v for c in categories for v in self.hits.get((measure, c), [])]
        return sum(values) / len(values) if values else None

    def count(self, categories: Sequence[int]) -> int:
        return sum(len(self.hits.get(("turn hit@1", c), [])) for c in categories)


@dataclass
class Timings:
    samples: dict[str, list[float]] = field(default_factory=dict)

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.samples.setdefault(name, []).append((time.perf_counter() - t) * 1000)

    def p50_p95(self, name: str) -> str:
        found = self.samples.get(name, [])
        return f"{statistics.median(found):.2f} / {w.p95(found):.2f}" if found else "–"


@dataclass
class Run:
    """Everything one backend's run measured."""

    scores: dict[str, Scores] = field(default_factory=dict)
    timings: Timings = field(default_factory=Timings)
    load_s: float = 0.0
    turns: int = 0
    left_out: int = 0
    block_tokens: dict[int, list[int]] = field(default_factory=dict)

    def of(self, contender: str) -> Scores:
        return self.scores.setdefault(contender, Scores())


TITLE = "LoCoMo,"
ENGINE = "korely search"
BM25 = "rank_bm25 BM25Okapi"


def locomo(
    table: Table,
    dbs: Databases,
    backend: str,
    sizes: Sizes,
    *,
    data: str | None = None,
    embed: str | None = None,
    answer: str | None = None,
) -> None:
    """The LoCoMo workload: scores into a table of their own, times into the main one."""
    if data is None:
        print("locomo skipped: no --data PATH/locomo10.json", file=sys.stderr)
        return
    conversations = read(
        data, sizes.locomo_conversations, sizes.locomo_questions, sizes.locomo_turns
    )
    run = Run()
    first = not any(s.startswith(TITLE) for s in table.sections)
    judge = Judged(chat_model(answer)) if answer is not None and first else None
    with dbs.fresh(backend) as url:
        measure_engine(run, url, conversations, ENGINE, judged=judge)
    if embed is not None:
        with dbs.fresh(backend) as url:
            measure_engine(run, url, conversations, f"korely search, embed={embed}", embed)
    if first:  # the peers and the scores once, on the first backend measured
        measure_peers(run, conversations, embed)
        table.sections.append(markdown(run, conversations))
    put_times(table, backend, run)


def measure_engine(
    run: Run,
    url: str,
    conversations: Sequence[Conversation],
    contender: str,
    embed: str | None = None,
    judged: Judged | None = None,
) -> None:
    clock = _Clock()
    embedder = embeddings(embed) if embed else None
    scores = run.of(contender)
    label = "" if embed is None else ", embed"
    with MemoryEngine(url, clock=clock, embed=embedder) as engine:
        turn_of: dict[int, str] = {}
        t = time.perf_counter()
        for conv in conversations:
            who = Identity(ACCOUNT, conv.sample_id, AGENT)
            for turn in conv.turns:
                clock.now = turn.at
                turn_of[engine.add_memory(who, turn.memory).id] = turn.dia_id
        if embed is None:  # the load row is the engine's without embeddings
            run.load_s += time.perf_counter() - t
            run.turns += sum(len(conv.turns) for conv in conversations)
            run.left_out += sum(conv.left_out for conv in conversations)
        analyse(engine)
        for conv in conversations:
            who = Identity(ACCOUNT, conv.sample_id, AGENT)
            clock.now = conv.turns[-1].at + dt.timedelta(days=1)
            for q in conv.questions:
                with run.timings.timed(f"search{label}"):
                    found = engine.search(who, q.text, limit=max(K)).memories
                scores.ranked(q, [turn_of[m.id] for m in found])
                blocks = {}
                for budget in BUDGETS:
                    with run.timings.timed(f"block {budget}{label}"):
                        blocks[budget] = engine.get_context(who, q.text, token_budget=budget)
                    shown = {turn_of[m.id] for m in blocks[budget].memories}
                    scores.add(f"block {budget}", q.category, float(bool(shown & q.evidence)))
                    if embed is None:
                        run.block_tokens.setdefault(budget, []).append(blocks[budget].tokens)
                if judged is not None:
                    scores.add("J", q.category, judged(q, blocks[ANSWER_BUDGET].text))


def analyse(engine: MemoryEngine) -> None:
    """PostgreSQL: gather the tables' statistics after the load, as autovacuum soon would (the
    planner reads a table of thousands of rows as empty otherwise)."""
    if engine.db.dialect.name == "postgresql":
        with engine.db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE korely_memories, korely_memory_terms")


def measure_peers(run: Run, conversations: Sequence[Conversation], embed: str | None) -> None:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        print("rank_bm25 not installed: its rows are left out", file=sys.stderr)
    else:
        words = Words()
        scores = run.of(BM25)
        for conv in conversations:
            ids = [t.dia_id for t in conv.turns]
            bm25 = BM25Okapi([words(t.memory) or [""] for t in conv.turns])
            for q in conv.questions:
                with run.timings.timed("rank_bm25"):
                    got = bm25.get_scores(words(q.text))
                    order = sorted(range(len(ids)), key=lambda i: (-got[i], -i))[: max(K)]
                scores.ranked(q, [ids[i] for i in order])
    store_search(run, conversations, embed)


WORD_DIMS = 4_096
WORDS_INDEX = "LangGraph InMemoryStore, index of word counts"


class WordCounts:
    """An embedding with no model, for LangGraph's store index: a text's words, as the engine's
    ``Words`` finds them (folding, stop words, Snowball stemmer), counted into ``WORD_DIMS``
    dimensions by a stable hash of each word. The store's cosine then ranks turns by the words
    they share with the question, as a bag of words does (no inverse document frequency)."""

    def __init__(self, dims: int = WORD_DIMS) -> None:
        self.dims = dims
        self._words = Words()

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        for word in self._words(text):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vector[int.from_bytes(digest, "big") % self.dims] += 1.0
        return vector

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """The vectors of ``texts``: LangGraph's index takes a function of the texts."""
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def store_search(run: Run, conversations: Sequence[Conversation], embed: str | None) -> None:
    """LangGraph's InMemoryStore as its docs configure it, with an index: of word counts (no
    model), and of the embedding when there is one. Without an index its ``search`` ignores the
    query, which ranks nothing."""
    try:
        from langgraph.store.memory import InMemoryStore
    except ImportError:
        print("langgraph not installed: InMemoryStore's rows are left out", file=sys.stderr)
        return
    indexes: list[tuple[str, str, Any]] = [(WORDS_INDEX, "InMemoryStore", WordCounts())]
    if embed is not None:
        indexes.append((f"LangGraph InMemoryStore, index {embed}", "InMemoryStore, embed",
                        embeddings(embed)))  # fmt: skip
    for name, timing, vectors in indexes:
        dims = len(vectors.embed_query("dimensions"))
        store = InMemoryStore(index={"dims": dims, "embed": vectors, "fields": ["text"]})
        scores = run.of(name)
        for conv in conversations:
            space = ("memories", conv.sample_id)
            for turn in conv.turns:
                store.put(space, turn.dia_id, {"text": turn.memory})
            for q in conv.questions:
                with run.timings.timed(timing):
                    found = store.search(space, query=q.text, limit=max(K))
                scores.ranked(q, [item.key for item in found])


def embeddings(name: str) -> Any:
    """``--embed``: a LangChain embedding model by ``provider:model`` name, or ``fake`` (a
    hash of the words, no model) to check that the path runs."""
    if name == "fake":
        from langchain_core.embeddings import DeterministicFakeEmbedding

        return DeterministicFakeEmbedding(size=64)
    from langchain.embeddings import init_embeddings

    try:
        return init_embeddings(name)
    except Exception as exc:  # no API key, no provider package: say so and stop
        raise SystemExit(f"--embed {name}: {exc.__class__.__name__}: {exc}") from exc


ANSWER = """You answer a question about two people from memories of their conversations.

{block}

Answer the question in a few words, from the memories above. A memory's date is the day
it was said: turn "yesterday" or "last week" into a date from it.

Question: {question}
Answer:"""

JUDGE = """Label a generated answer to a question about a conversation CORRECT or WRONG,
against the gold answer.

Be generous: an answer that is longer than the gold one, or says it in other words, is
CORRECT when it is about the same thing. For a question about time, an answer naming the
same date or period, in any format or relative to a date given, is CORRECT.

Question: {question}
Gold answer: {gold}
Generated answer: {generated}

Give one sentence of reasoning, then the label alone on the last line: CORRECT or WRONG."""


class Judged:
    """LoCoMo's J score as the papers that report it measure it: a chat model answers from the
    block, and the same model judges the answer against the gold one (1 CORRECT, 0 WRONG)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, q: Question, block: str) -> float:
        said = self.model.invoke(ANSWER.format(block=block, question=q.text)).text
        verdict = self.model.invoke(JUDGE.format(question=q.text, gold=q.answer, generated=said))
        last = (verdict.text.strip().splitlines() or [""])[-1]
        label = _LABEL.fullmatch(last)
        return 1.0 if label is not None and label.group(1).upper() == "CORRECT" else 0.0


def chat_model(name: str) -> Any:
    """``--answer``: a LangChain chat model by ``provider:model`` name, at temperature 0."""
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(name, temperature=0)
    except Exception as exc:  # no API key, no provider package: say so and stop
        raise SystemExit(f"--answer {name}: {exc.__class__.__name__}: {exc}") from exc


class _Clock:
    """The engine's clock: the time of the turn being kept."""

    def __init__(self) -> None:
        self.now = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now


def put_times(table: Table, backend: str, run: Run) -> None:
    per_turn = run.load_s / max(run.turns, 1) * 1000
    table.put(
        f"LoCoMo: load {run.turns:,} turns (s; ms per turn)",
        backend,
        f"{run.load_s:.1f}; {per_turn:.2f}",
    )
    for name in sorted(run.timings.samples):
        if name.startswith(("search", "block")):
            table.put(f"LoCoMo: {name}, p50 / p95 (ms)", backend, run.timings.p50_p95(name))
    engine = run.of(ENGINE)
    found = [(f"korely search, turn hit@{k}", f"turn hit@{k}") for k in K]
    found += [("korely search, session hit@10", "session hit@10")]
    found += [(f"korely block {b:,}, evidence in block", f"block {b}") for b in BUDGETS]
    for label, measure in found:
        share = engine.share(measure, SCORED) or 0.0
        table.put(f"LoCoMo: {label} (1-4)", backend, share, "{:.3f}")
    for budget, tokens in sorted(run.block_tokens.items()):
        table.put(
            f"LoCoMo: block {budget:,}, tokens (mean)", backend, statistics.fmean(tokens), "{:.0f}"
        )
    for name in ("rank_bm25", "InMemoryStore", "InMemoryStore, embed"):
        if name in run.timings.samples:
            table.put(f"LoCoMo: {name} search, p50 / p95 (ms)", backend, run.timings.p50_p95(name))


def markdown(run: Run, conversations: Sequence[Conversation]) -> str:
    """The scores, by category, for each contender."""
    columns = [(CATEGORIES[c], (c,)) for c in SCORED] + [("1-4", SCORED), ("adversarial (5)", (5,))]
    first = next(iter(run.scores.values()))
    counts = " | ".join(f"{first.count(cats):,}" for _, cats in columns)
    header = " | ".join(f"{name}" for name, _ in columns)
    out = [
        f"{TITLE} {len(conversations)} conversations, {run.turns:,} turns as memories "
        f"({run.left_out} questions left out: their evidence names no turn)",
        "",
        f"| contender: measure | {header} |",
        "|---|" + "---:|" * len(columns),
        f"| questions | {counts} |",
    ]

    def row(label: str, scores: Scores, measure: str) -> None:
        cells = []
        for _, cats in columns:
            v = scores.share(measure, cats)
            cells.append("–" if v is None else f"{v:.3f}")
        out.append(f"| {label} | {' | '.join(cells)} |")

    for contender, scores in run.scores.items():
        for kind in ("turn hit", "evidence recall", "session hit"):
            for k in K:
                row(f"{contender}: {kind}@{k}", scores, f"{kind}@{k}")
        if any(measure == "J" for measure, _ in scores.hits):
            row(
                f"{contender.replace('search', 'block')} {BUDGETS[-1]:,}: J (LLM-judged answers)",
                scores,
                "J",
            )
        for budget in BUDGETS:
            if (f"block {budget}", SCORED[0]) in scores.hits:
                row(
                    f"{contender.replace('search', 'block')} {budget:,}: evidence in block",
                    scores,
                    f"block {budget}",
                )
    return "\n".join(out)
