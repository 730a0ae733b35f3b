"""Told exactly once, over real processes: every change a reader was handed reaches it, once.

Reader processes call ``get_context(..., reader=NAME)`` for random users while writer
processes correct, forget and remember the same few keys, each time with content never
used before (so a version is never "true again"). When the time is up, a drain reads
every user's block under every reader name until nothing more is told. Then, for every
reader name:

* **duplicates**: no ended version (``Change.was``) was told twice;
* **lost**: every version handed over by a read that did not give way, and ended by the
  end of the run, is *covered* in time by a change told (see ``Coverage``: told itself,
  or, as allowed, together with a later version of the same key), and its mark in the
  store is ended and told;
* **late**: no version is told only after the first read that had to tell it;
* nothing was told that was never handed, and ``now`` is always a later version of the
  same key, or None.

Two deterministic tests force interleavings that timing finds only by luck, at the moment
between a read's snapshot and its marks: another engine ends the fact the block shows; and
another read under the same name, from a newer snapshot, tells part of what the first read
claims.

The figures are printed (``-s``) and added to the ``KORELY_RELIABILITY_TALLY`` line.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine, NotFound

from ..processes import PROCESSES
from .soak import scale, tally

ACCOUNT, AGENT = "acme", "support"
USERS = ("giulia", "marco", "anna")
KEYS = ("home-city", "plan", "hours", "language")
QUERY = "where does she live, which plan, what hours, which language"
FORGET = 0.1  # share of writes that forget the key instead (the next write remembers it anew)
SECONDS = scale(3, 60)  # how long readers and writers run together, per scenario
CHANGED = "## Changed since you last read"


def identity(user: str) -> Identity:
    return Identity(ACCOUNT, user, AGENT)


# -- the moment between a read's snapshot and its marks ---------------------------------


@contextlib.contextmanager
def between_snapshot_and_marks(
    engine: MemoryEngine, action: Callable[[], object]
) -> Iterator[None]:
    """Run ``action`` once inside the next ``get_context`` of ``engine``: after the snapshot the
    block was rendered from has closed, before the read writes its marks.

    The ONE place that knows an engine internal. Today the marks are written by
    ``MemoryEngine._write_marks``, called only after the read transaction has ended; when the
    internals move, re-point this function to the new step, and nothing else.
    """
    hook = "_write_marks"
    original = getattr(engine, hook, None)
    if original is None:
        pytest.fail(f"MemoryEngine.{hook} is gone: re-point between_snapshot_and_marks()")
    ran: list[bool] = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if not ran:
            ran.append(True)
            action()
        return original(*args, **kwargs)

    setattr(engine, hook, hooked)
    try:
        yield
    finally:
        delattr(engine, hook)
    assert ran, f"the read never reached MemoryEngine.{hook}: re-point between_snapshot_and_marks()"


def marks_in_store(engine: MemoryEngine) -> dict[tuple[str, int], tuple[bool, bool]]:
    """(reader, fact id) -> (mark says ended, mark says told), straight from the table of marks."""
    with engine.db.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT reader, fact_id, ended_at IS NOT NULL, told_at IS NOT NULL"
                " FROM korely_marks WHERE account = :account"
            ),
            {"account": ACCOUNT},
        ).all()
    return {(r[0], int(r[1])): (bool(r[2]), bool(r[3])) for r in rows}


# -- what the processes do ------------------------------------------------------------------


def read_until_stopped(url: str, name: str, seed: int, ready: Any, stop: Any, out: str) -> None:
    """Read random users' blocks under ``name``; log each read to ``out`` as JSON."""
    with MemoryEngine(url) as engine:
        ready.wait()
        reads = reads_until(stop, engine, name, seed)
    Path(out).write_text(json.dumps(reads), encoding="utf-8")


def reads_until(stop: Any, engine: MemoryEngine, name: str, seed: int) -> list[list[Any]]:
    """Read random users' blocks under ``name`` until ``stop`` is set (``read_once`` each)."""
    rng = random.Random(seed)
    reads: list[list[Any]] = []
    while not stop.is_set():
        reads.append(read_once(engine, name, rng.choice(USERS)))
    return reads


def read_once(engine: MemoryEngine, name: str, user: str) -> list[Any]:
    """One read: [reader, user, start, end, handed, [[was, now or None], ...], changed_more]."""
    # One clock for every process of the machine (CLOCK_MONOTONIC), so moments compare across them.
    start = time.monotonic()
    block = engine.get_context(identity(user), QUERY, reader=name)
    end = time.monotonic()
    if block.changed:
        assert block.text.split("\n\n")[1].startswith(CHANGED), block.text
    return [
        name,
        user,
        start,
        end,
        [f.id for f in block.facts],
        [[c.was.id, None if c.now is None else c.now.id] for c in block.changed],
        block.changed_more,
    ]


def write_until_stopped(url: str, index: int, seed: int, ready: Any, stop: Any, out: str) -> None:
    """Correct random keys with content never used before; sometimes forget one.

    Logs [what, fact id, moment the call returned]: the new version for a write, the ended
    one for a forget. The version a write ended is found afterwards through replaced_by_id.
    """
    with MemoryEngine(url) as engine:
        ready.wait()
        log = writes_until(stop, engine, index, seed)
    Path(out).write_text(json.dumps(log), encoding="utf-8")


def writes_until(stop: Any, engine: MemoryEngine, index: int, seed: int) -> list[list[Any]]:
    """Write as ``write_until_stopped`` does until ``stop`` is set; returns the log."""
    rng = random.Random(seed)
    log: list[list[Any]] = []
    i = 0
    while not stop.is_set():
        i += 1
        user, key = rng.choice(USERS), rng.choice(KEYS)
        who = identity(user)
        if rng.random() < FORGET:
            with contextlib.suppress(NotFound):  # another writer forgot it first
                log.append(["forget", engine.forget(who, key).id, time.monotonic()])
            continue
        content = f"{user} {key} by writer {index}, write {i}"
        try:
            made = engine.correct(who, key, content)
        except NotFound:  # forgotten: remembered anew
            made = engine.remember(who, key, content)
        log.append(["write", made.id, time.monotonic()])
    return log


# -- checking what was told -----------------------------------------------------------------


@dataclass
class Read:
    reader: str
    user: str
    start: float
    end: float
    handed: list[int]
    told: list[tuple[int, int | None]]
    more: int | None

    @property
    def gave_way(self) -> bool:
        return self.more is None

    @property
    def clean(self) -> bool:
        """Did not give way and left nothing waiting: every change pending for its user was told
        by it or claimed by another read under the same name."""
        return self.more == 0


@dataclass
class Version:
    id: int
    user: str
    key: str
    replaced_by: int | None
    ended: bool


@dataclass
class Figures:
    reads: int = 0
    drain_reads: int = 0
    gave_way: int = 0
    handed: int = 0  # (reader, version) pairs handed by reads that did not give way
    changes: int = 0  # ... of which the version has ended
    told: int = 0  # changes told, duplicates included
    lost: int = 0  # changes neither told nor covered, or whose mark is not ended and told
    lost_untold: int = 0  # ... by what the readers were told
    lost_in_store: int = 0  # ... by the marks left in the store
    late: int = 0  # told itself, but after the first read that should have told it
    duplicates: int = 0  # tellings of a version already told to the same reader
    strange: int = 0  # told a version never handed, or a `now` that is not a later version
    examples: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(what)


class Coverage:
    """When a change handed to one reader name counts as told.

    The chain of a version is what ``replaced_by_id`` leads to; a forgotten version ends
    its chain, and a key remembered again starts a new one. Take a version ``v`` this
    reader name was handed by a read that did not give way, and which has ended by the end
    of the run. Its *due* read is the first clean read (it did not give way and left nothing
    waiting) of ``v``'s user under that name that started after both ``v``'s end (its
    writer's call had returned) and the end of the first read that handed ``v``. That read's
    snapshot held the end and the mark, so it had to tell ``v``, or find it claimed by a
    read under the same name that had started before it ended. The drain ends with a clean
    read of every user under every name, so every change has a due read.

    ``v`` is covered by a change told to the same name, from a read that started before its
    due read ended, when

    * the change's ``was`` is ``v``; or
    * (the allowance: two versions handed, both ended, both now lead to the same current
      version, told once from the one read last) the change's ``was`` is a strictly later
      version of ``v``'s chain and its ``now`` is not None: with ``v`` still waiting, the
      engine tells that one change for both. Versions that are "no longer true" have no
      current version in common: each is told on its own, as a single reader is told them.

    ``v`` is also covered, with nothing told, when it was first handed by a read from an older
    snapshot than another read of the same name that had handed a strictly later version of
    its chain (as a fact, or as what a change said holds now): the second read started before
    the first ended. The name had moved past ``v`` already; what ``v``'s end led to is that
    later version's to tell.

    Not covered: *late* if ``v`` itself was told after its due read, else *lost*. A telling
    of a later version after the due read covers nothing: ``v`` was no longer waiting then.
    The store is asked as well: the mark of every change handed must say ended and told.
    """

    def __init__(self, versions: dict[int, Version], ended_at: dict[int, float]) -> None:
        self.versions = versions
        self.ended_at = ended_at
        # Each version's place: (the first version of its chain, how far along it is).
        self.place: dict[int, tuple[int, int]] = {}
        replaced = {v.replaced_by for v in versions.values()}
        for root in versions:
            if root in replaced:
                continue
            step, at = 0, root
            while True:
                self.place[at] = (root, step)
                nxt = versions[at].replaced_by
                if nxt is None or nxt in self.place:
                    break
                step, at = step + 1, nxt

    def later(self, w: int, v: int) -> bool:
        """Whether ``w`` comes strictly after ``v`` in ``v``'s chain."""
        (chain_w, at_w), (chain_v, at_v) = self.place[w], self.place[v]
        return chain_w == chain_v and at_w > at_v

    def check(
        self,
        reader: str,
        reads: list[Read],
        store: dict[tuple[str, int], tuple[bool, bool]],
        fig: Figures,
    ) -> None:
        reads = sorted(reads, key=lambda r: r.start)
        first_handed: dict[int, float] = {}
        shown_at_all = {v for r in reads for v in r.handed}
        # When each version was first handed over (as a fact, or as a change's `now`), by the
        # start of the read that did.
        reached: dict[int, float] = {}
        for r in reads:
            if not r.gave_way:
                for v in [*r.handed, *(now for _, now in r.told if now is not None)]:
                    reached.setdefault(v, r.start)
        told: Counter[int] = Counter()
        first_told: dict[int, float] = {}  # was -> start of the first read that told it
        # Per chain, in order of read start: how far along the chain the `was` of a change
        # with a `now` got, at most, so far (the allowance).
        reach: dict[int, tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
        clean: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
        for r in reads:
            if r.clean:
                clean[r.user][0].append(r.start)
                clean[r.user][1].append(r.end)
            if not r.gave_way:
                for v in r.handed:
                    first_handed[v] = min(first_handed.get(v, math.inf), r.end)
            for was, now in r.told:
                told[was] += 1
                first_told.setdefault(was, r.start)
                if was not in self.place or (now is not None and now not in self.place):
                    fig.strange += 1
                    fig.note(f"{reader}: told {was} -> {now}, not a version of the world")
                    continue
                if was not in shown_at_all:
                    fig.strange += 1
                    fig.note(f"{reader}: told {was}, never handed")
                if now is not None and not self.later(now, was):
                    fig.strange += 1
                    fig.note(f"{reader}: told {was} -> {now}, not a later version")
                if now is not None:
                    chain, at = self.place[was]
                    starts, furthest = reach[chain]
                    starts.append(r.start)
                    furthest.append(max(at, furthest[-1]) if furthest else at)
        fig.told += sum(told.values())
        # A telling repeats another when it tells a version's end again, or a version as what
        # holds now again.
        ends, nows = set(), set()
        for was, now in (t for r in reads for t in r.told):
            if was in ends or (now is not None and now in nows):
                fig.duplicates += 1
                fig.note(f"{reader}: told {was} -> {now} again")
            ends.add(was)
            if now is not None:
                nows.add(now)
        fig.handed += len(first_handed)
        for v, handed_end in first_handed.items():
            version = self.versions[v]
            if not version.ended:
                continue
            fig.changes += 1
            # The due read: the first clean read of the user after the end and the handing.
            starts, ends = clean[version.user]
            after = max(handed_end, self.ended_at.get(v, math.inf))
            i = bisect.bisect_right(starts, after)
            due = ends[i] if i < len(starts) else math.inf
            chain, at = self.place[v]
            starts, furthest = reach[chain]
            j = bisect.bisect_left(starts, due)  # the tellings from reads that started before
            in_time = first_told.get(v, math.inf) < due or (j > 0 and furthest[j - 1] > at)
            moved_on = any(
                self.later(w, v) and start < handed_end
                for w, start in reached.items()
                if self.place.get(w, (None, 0))[0] == chain
            )
            in_time = in_time or moved_on
            direct = v in told
            mark = store.get((reader, v))
            in_store = mark == (True, True)
            what = f"{reader}: version {v} of {version.user}/{version.key}"
            if not in_time and direct:
                fig.late += 1
                fig.note(f"{what} told late")
            if not in_time and not direct:
                fig.lost_untold += 1
            if not in_store:
                fig.lost_in_store += 1
            if (not in_time and not direct) or not in_store:
                fig.lost += 1
                fig.note(f"{what} lost (covered in time: {in_time}, mark ended/told: {mark})")


def drain(engine: MemoryEngine, names: list[str]) -> list[Read]:
    """Read every user's block under every name until a read tells nothing and leaves nothing."""
    reads: list[Read] = []
    for name in names:
        for user in USERS:
            for _ in range(200):
                r = as_read(read_once(engine, name, user))
                reads.append(r)
                if r.clean and not r.told:
                    break
            else:
                pytest.fail(f"{name} never finished reading the changes of {user}")
    return reads


def as_read(row: list[Any]) -> Read:
    name, user, start, end, handed, told, more = row
    return Read(name, user, start, end, handed, [(w, n) for w, n in told], more)


def plant(engine: MemoryEngine) -> None:
    """The first version of every key of every user."""
    for user in USERS:
        for key in KEYS:
            engine.remember(identity(user), key, f"{user} {key}, first version")


def run_world(url: str, tmp_path: Path, names: list[str], writers: int, label: str) -> Figures:
    with MemoryEngine(url) as engine:
        plant(engine)
        ready = PROCESSES.Barrier(len(names) + writers + 1, timeout=120)
        stop = PROCESSES.Event()
        seed = random.randrange(2**32)
        procs = [
            PROCESSES.Process(
                target=read_until_stopped,
                args=(url, name, seed + i, ready, stop, str(tmp_path / f"reads-{i}.json")),
            )
            for i, name in enumerate(names)
        ] + [
            PROCESSES.Process(
                target=write_until_stopped,
                args=(url, w, seed + 1000 + w, ready, stop, str(tmp_path / f"writes-{w}.json")),
            )
            for w in range(writers)
        ]
        for p in procs:
            p.start()
        try:
            ready.wait()
            time.sleep(SECONDS)
        finally:
            stop.set()
            for p in procs:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()
                    p.join()
        assert [p.exitcode for p in procs] == [0] * len(procs), f"seed {seed}"

        reads = [
            as_read(row)
            for i in range(len(names))
            for row in json.loads((tmp_path / f"reads-{i}.json").read_text(encoding="utf-8"))
        ]
        log = [
            entry
            for w in range(writers)
            for entry in json.loads((tmp_path / f"writes-{w}.json").read_text(encoding="utf-8"))
        ]
        return check_world(engine, reads, log, names, label, seed)


def check_world(
    engine: MemoryEngine,
    reads: list[Read],
    log: list[list[Any]],
    names: list[str],
    label: str,
    seed: int,
) -> Figures:
    """Drain what is left to tell, then check every change against what happened: ``reads`` (of
    ``read_once``) and the writers' ``log`` (of ``write_until_stopped``)."""
    drained = drain(engine, sorted(set(names)))
    versions = {
        f.id: Version(f.id, user, key, f.replaced_by_id, not f.is_current)
        for user in USERS
        for key in KEYS
        for f in engine.history(identity(user), key)
    }
    store = marks_in_store(engine)
    before = {v.replaced_by: v.id for v in versions.values() if v.replaced_by is not None}
    ended_at: dict[int, float] = {}
    for what, fact_id, moment in log:
        if what == "forget":
            ended_at[fact_id] = moment
        elif fact_id in before:
            ended_at[before[fact_id]] = moment
    fig = Figures(
        reads=len(reads),
        drain_reads=len(drained),
        gave_way=sum(r.gave_way for r in reads + drained),
    )
    coverage = Coverage(versions, ended_at)
    by_name: dict[str, list[Read]] = defaultdict(list)
    for r in reads + drained:
        by_name[r.reader].append(r)
    for name, its_reads in sorted(by_name.items()):
        coverage.check(name, its_reads, store, fig)
    report(label, fig, len(log), seed)
    return fig


def report(label: str, fig: Figures, writes: int, seed: int) -> None:
    line = (
        f"told once, {label}: {fig.reads} reads (+{fig.drain_reads} drain), {writes} writes, "
        f"{fig.gave_way} gave way, {fig.handed} handed, {fig.changes} changes, {fig.told} told, "
        f"{fig.lost} lost ({fig.lost_untold} by the tellings, {fig.lost_in_store} by the marks), "
        f"{fig.late} late, {fig.duplicates} duplicates, {fig.strange} strange (seed {seed})"
    )
    print("\n" + line)
    for example in fig.examples:
        print("  " + example)
    for what in ("reads", "gave_way", "changes", "told", "lost", "late", "duplicates"):
        tally(f"told once, {label}: {what.replace('_', ' ')}", getattr(fig, what))


def assert_told_once(fig: Figures) -> None:
    assert fig.reads > 0 and fig.changes > 0, "the run made no change to tell"
    assert (fig.lost, fig.duplicates, fig.late, fig.strange) == (0, 0, 0, 0), fig.examples


# -- the tests --------------------------------------------------------------------------------


def test_each_change_is_told_once_to_readers_of_distinct_names(db_url: str, tmp_path: Path) -> None:
    """4 reader processes, each under its own name, and 2 writer processes."""
    backend = db_url.split(":", 1)[0].split("+")[0]
    names = [f"reader-{i}" for i in range(4)]
    assert_told_once(run_world(db_url, tmp_path, names, 2, f"{backend}, 4 names, 2 writers"))


def test_each_change_is_told_once_to_one_name_read_by_many_processes(
    db_url: str, tmp_path: Path
) -> None:
    """8 reader processes under one name, and 2 writer processes: once per name, not per process."""
    backend = db_url.split(":", 1)[0].split("+")[0]
    names = ["support-bot"] * 8
    assert_told_once(run_world(db_url, tmp_path, names, 2, f"{backend}, 1 name x 8, 2 writers"))


@pytest.mark.parametrize("ending", ["corrected", "forgotten"])
def test_a_fact_ended_between_the_snapshot_and_the_marks_is_still_told(
    db_url: str, ending: str
) -> None:
    """Another engine ends the fact a block shows after that block's snapshot, before its marks."""
    who = identity("giulia")
    with MemoryEngine(db_url) as engine, MemoryEngine(db_url) as other:
        rome = engine.remember(who, "home-city", "Giulia lives in Rome")
        engine.remember(who, "plan", "Giulia is on the Pro plan")
        after: list[int | None] = []

        def end_rome() -> None:
            if ending == "corrected":
                after.append(other.correct(who, "home-city", "Giulia lives in Milan").id)
            else:
                other.forget(who, "home-city")
                after.append(None)

        with between_snapshot_and_marks(engine, end_rome):
            first = engine.get_context(who, "where", reader="support-bot")
        assert rome.id in [f.id for f in first.facts]
        assert first.changed_more == 0, "the read gave way: the interleaving was not tested"

        second = engine.get_context(who, "where", reader="support-bot")
        assert [(c.was.id, None if c.now is None else c.now.id) for c in second.changed] == [
            (rome.id, after[0])
        ], f"the {ending} fact the first block showed was never told"
        assert CHANGED in second.text
        assert second.changed[0].cause == ending
        third = engine.get_context(who, "where", reader="support-bot")
        assert third.changed == () and third.changed_more == 0


def test_a_read_under_the_same_name_never_swallows_a_change_another_read_tells(
    db_url: str,
) -> None:
    """Two reads under one name, from two snapshots, each claim part of what the other tells.

    The name was handed Rome, then Florence (a read filtered to forgotten facts leaves Rome
    waiting), and Florence became Milan: one change tells both, from Florence. While the
    first read is between its snapshot and its marks, Milan is forgotten, two other facts
    change and a second read tells those two and "no longer true: Florence", with Rome
    waiting as the fourth. Whatever the first read then claims, Rome must still be told:
    as "no longer true: Rome", or together with Florence by a change naming what holds now.
    """
    who, bot = identity("giulia"), "support-bot"
    with MemoryEngine(db_url) as engine, MemoryEngine(db_url) as other:
        rome = engine.remember(who, "home-city", "Giulia lives in Rome")
        engine.remember(who, "plan", "Giulia is on the Pro plan")
        engine.remember(who, "hours", "Giulia works mornings")
        engine.get_context(who, reader=bot)
        florence = other.correct(who, "home-city", "Giulia lives in Florence")
        assert engine.get_context(who, reader=bot, changes=["forgotten"]).changed == ()
        other.correct(who, "home-city", "Giulia lives in Milan")
        told: list[tuple[int, int | None]] = []

        def meanwhile() -> None:
            other.forget(who, "home-city")
            other.correct(who, "plan", "Giulia is on the Enterprise plan")
            other.correct(who, "hours", "Giulia works afternoons")
            block = other.get_context(who, reader=bot)
            told.extend((c.was.id, None if c.now is None else c.now.id) for c in block.changed)

        with between_snapshot_and_marks(engine, meanwhile):
            first = engine.get_context(who, reader=bot)
        assert first.changed_more is not None, "the read gave way: the interleaving was not tested"
        told.extend((c.was.id, None if c.now is None else c.now.id) for c in first.changed)
        for _ in range(10):
            block = engine.get_context(who, reader=bot)
            told.extend((c.was.id, None if c.now is None else c.now.id) for c in block.changed)
            if not block.changed and block.changed_more == 0:
                break
        assert any(
            was == rome.id or (was == florence.id and now is not None) for was, now in told
        ), f"Rome was never told: only {told}"
        assert len({was for was, _ in told}) == len(told), f"told twice: {told}"


# -- the rule itself, on made-up reads ---------------------------------------------------------

# Rome (1) corrected to Florence (2) at t=10, Florence to Milan (3) at t=20.
ROME_FLORENCE_MILAN = {
    1: Version(1, "giulia", "home-city", 2, True),
    2: Version(2, "giulia", "home-city", 3, True),
    3: Version(3, "giulia", "home-city", None, False),
}
ENDED_AT = {1: 10.0, 2: 20.0}
TOLD_IN_STORE = {("bot", 1): (True, True), ("bot", 2): (True, True)}


def judge(*reads: tuple[float, list[int], list[tuple[int, int | None]], int | None]) -> Figures:
    fig = Figures()
    made = [Read("bot", "giulia", t, t + 1, handed, told, more) for t, handed, told, more in reads]
    Coverage(ROME_FLORENCE_MILAN, ENDED_AT).check("bot", made, TOLD_IN_STORE, fig)
    return fig


def test_the_rule_allows_one_change_for_two_versions_that_lead_to_the_same_one() -> None:
    # Rome waits while the read that hands Florence has no room left to tell it.
    fig = judge((0, [1], [], 0), (11, [2], [], 1), (21, [3], [(2, 3)], 0))
    assert (fig.changes, fig.told, fig.lost, fig.late, fig.duplicates) == (2, 1, 0, 0, 0)


def test_the_rule_finds_a_change_lost_even_when_a_later_one_is_told() -> None:
    # The read at t=11 left nothing waiting, yet said nothing of Rome: Rome was not waiting.
    fig = judge((0, [1], [], 0), (11, [2], [], 0), (21, [3], [(2, 3)], 0))
    assert (fig.lost, fig.lost_untold) == (1, 1)


def test_the_rule_counts_duplicates_late_tellings_and_marks_left_untold() -> None:
    assert judge((0, [1], [], 0), (11, [2], [(1, 2)], 0), (21, [3], [(1, 2)], 0)).duplicates == 1
    assert judge((0, [1], [], 0), (11, [2], [], 0), (21, [3], [(1, 3)], 0)).late == 1
    # Told, yet its mark in the store says it never ended.
    fig = Figures()
    reads = [
        Read("bot", "giulia", 0, 1, [1], [], 0),
        Read("bot", "giulia", 11, 12, [2], [(1, 2)], 0),
        Read("bot", "giulia", 21, 22, [3], [(2, 3)], 0),
    ]
    store = {("bot", 1): (False, False), ("bot", 2): (True, True)}
    Coverage(ROME_FLORENCE_MILAN, ENDED_AT).check("bot", reads, store, fig)
    assert (fig.lost, fig.lost_untold, fig.lost_in_store) == (1, 0, 1)


def test_the_rule_ignores_what_only_a_read_that_gave_way_showed() -> None:
    assert judge((0, [1], [], None), (21, [3], [], 0)).changes == 0


def test_the_rule_counts_a_version_told_twice_as_what_holds_now() -> None:
    # Milan told as what holds now twice, each time with another `was`.
    fig = judge((0, [1], [], 0), (11, [2], [], 1), (21, [3], [(2, 3)], 0), (22, [3], [(1, 3)], 0))
    assert fig.duplicates == 1


def test_the_rule_takes_a_version_handed_behind_a_newer_read_as_moved_past() -> None:
    # The read at t=20.5 told Rome -> Milan; the read at t=21 had its snapshot before Florence
    # ended, handed Florence afterwards, and nothing more is said of Florence: Milan had been
    # handed over first.
    fig = judge((0, [1], [], 0), (20.5, [3], [(1, 3)], 0), (21, [2], [], 0))
    assert (fig.changes, fig.lost, fig.duplicates) == (2, 0, 0)
    # Florence handed by a read that ended before any read handed Milan is no such case.
    fig = judge((0, [1], [], 0), (11, [2], [(1, 2)], 0), (21, [3], [], 0))
    assert fig.lost == 1
