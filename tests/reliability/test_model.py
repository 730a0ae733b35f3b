"""The engine against a plain-Python model of its rules, driven side by side by random operations.

Several accounts, users (and agent-team memory), agent definitions and readers
share a few keys and a few words, so replacements, shadowing, facts true again
and repeated contents come up often. Every answer is compared with the model's:
who sees which fact, history, what a block shows, and the changes it tells.

Half the runs hold the engine's clock (``ModelClock``): facts are recorded and corrected with an
end a few hours ahead, and the clock moves on by hours, so that facts expire (and no longer
shadow, nor take their key) between the steps. The other half run on the engine's own clock
(PostgreSQL's, there), as an engine does by default.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from korely_memory import Identity, KorelyError, MemoryEngine

from ..helpers import snapshot
from .model import ALL_CAUSES, Block, Model, Outcome, Told
from .shape import shape_errors
from .soak import scale, tally
from .world import IDENTITIES, broken_invariants, empty

ACCOUNTS = ("acme", "globex")
USERS = ("giulia", "marco", "anna", None)
READERS = (
    "bot",
    "helper",
    "giulia",
)  # a reader named like a user: erasing giulia deletes its marks
KEYS = ("home-city", "plan", "hours")
WORDS = ("Lives in Rome", "Lives in Milan", "Lives in Turin")
ADMINS = (("acme", "anna"), ("globex", "giulia"))
CHANGES: tuple[Any, ...] = (
    None,
    "all",
    ("corrected",),
    ("stated", "read_from_memory", "rejected"),
    ("expired",),
)
BUDGET = 8000  # everything fits: what is shown is decided by visibility alone

identities = st.sampled_from(IDENTITIES)
readers = st.sampled_from((None, "bot", "bot", "bot", "helper", "giulia"))
ends = st.sampled_from((None, None, 1, 2, 3))  # an end so many hours ahead, where the clock is held


class ModelClock:
    """The engine's clock in the runs that hold it: the model's hour, plus a microsecond more on
    every reading, so that the engine's moments come in the order things happened (and an end
    due at an hour comes before anything done in it)."""

    START = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)

    def __init__(self) -> None:
        self.hour = 0
        self.readings = 0  # never reset: the engine's moments only go forward

    def __call__(self) -> dt.datetime:
        self.readings += 1
        return self.at(self.hour) + dt.timedelta(microseconds=self.readings)

    def at(self, hour: int) -> dt.datetime:
        return self.START + dt.timedelta(hours=hour)


def kinds_of(changes: Any) -> frozenset[str] | None:
    if changes is None:
        return None
    return ALL_CAUSES if changes == "all" else frozenset(changes)


class EngineAgainstModel(RuleBasedStateMachine):
    def __init__(self, engine: MemoryEngine, clock: ModelClock | None = None) -> None:
        super().__init__()
        self.engine = engine
        self.clock = clock
        empty(engine)
        self.model = Model(hour=clock.hour if clock else 0)
        for account, user in ADMINS:
            engine.grant_admin(account, user)
            self.model.admins.add((account, user))

    @initialize(
        seeds=st.lists(
            st.tuples(identities, st.sampled_from(KEYS), st.sampled_from(WORDS)),
            min_size=1,
            max_size=6,
        ),
        scope=st.sampled_from(("user", "account")),
    )
    def some_facts_read_by_bot(self, seeds: list[tuple[Identity, str, str]], scope: str) -> None:
        """Facts already read, so that the steps that follow have changes to tell."""
        for who, key, content in seeds:
            self._remember(who, key, content, scope, None)
        for who in dict.fromkeys(who for who, _, _ in seeds):
            self.get_context(who, "bot", None)

    def run(self, call: Callable[[], Any]) -> Outcome:
        """The id the engine answered with, or the class of the error it raised.

        An error leaves nothing changed.
        """
        tally("model operations")
        before = snapshot(self.engine)
        try:
            return int(call().id)
        except KorelyError as exc:
            tally("model operations refused")
            assert snapshot(self.engine) == before, f"{type(exc).__name__} changed the database"
            return type(exc)

    def pick(self, data: st.DataObject, likely: list[Any], anything: list[Any], label: str) -> Any:
        """Mostly one of ``likely`` (ids or keys that exist).

        Sometimes anything, to reach the errors too.
        """
        if likely and data.draw(st.integers(0, 4), label=f"{label} is likely") > 0:
            return data.draw(st.sampled_from(likely), label=label)
        return data.draw(st.sampled_from(anything), label=label)

    def key_of(self, who: Identity, data: st.DataObject) -> str:
        return self.pick(data, sorted(self.model.visible(who)), list(KEYS), "key")

    def memory_of(self, who: Identity, data: st.DataObject) -> int:
        every = [*sorted(self.model.memories), 10**9]
        return self.pick(data, sorted(self.model.memories_of(who)), every, "memory_id")

    # -- writes ----------------------------------------------------------------------

    def _until(self, hours: int | None) -> tuple[int | None, dt.datetime | None]:
        """An end ``hours`` ahead (None: none), as the model's hour and as the engine's moment;
        none on the engine's own clock."""
        if hours is None or self.clock is None:
            return None, None
        until = self.model.hour + hours
        return until, self.clock.at(until)

    def _remember(
        self,
        who: Identity,
        key: str,
        content: str,
        scope: str,
        source: int | None,
        hours: int | None = None,
    ) -> None:
        until, end = self._until(hours)
        got = self.run(
            lambda: self.engine.remember(
                who, key, content, scope=scope, source_memory_id=source, valid_until=end
            )
        )
        expected = self.model.remember(
            who, key, content, scope, source, got if isinstance(got, int) else None, until
        )
        assert got == expected

    @rule(who=identities, key=st.sampled_from(KEYS), content=st.sampled_from(WORDS), hours=ends)
    def remember(self, who: Identity, key: str, content: str, hours: int | None) -> None:
        self._remember(who, key, content, "user", None, hours)

    @rule(who=identities, key=st.sampled_from(KEYS), content=st.sampled_from(WORDS), hours=ends)
    def propose(self, who: Identity, key: str, content: str, hours: int | None) -> None:
        self._remember(who, key, content, "account", None, hours)

    @precondition(lambda self: self.clock is not None)
    @rule(hours=st.sampled_from((1, 1, 2)))
    def time_passes(self, hours: int) -> None:
        assert self.clock is not None
        tally("model operations")
        self.clock.hour += hours
        tally("facts expired", self.model.time_passes(hours))

    @rule(
        who=identities,
        key=st.sampled_from(KEYS),
        content=st.sampled_from(WORDS),
        scope=st.sampled_from(("user", "account")),
        data=st.data(),
    )
    def remember_from_memory(
        self, who: Identity, key: str, content: str, scope: str, data: st.DataObject
    ) -> None:
        self._remember(who, key, content, scope, self.memory_of(who, data))

    @rule(who=identities, content=st.sampled_from(WORDS), hours=ends, data=st.data())
    def correct(self, who: Identity, content: str, hours: int | None, data: st.DataObject) -> None:
        key = self.key_of(who, data)
        until, end = self._until(hours)
        got = self.run(lambda: self.engine.correct(who, key, content, valid_until=end))
        made = got if isinstance(got, int) else None
        assert got == self.model.correct(who, key, content, made, until)

    @rule(who=identities, data=st.data())
    def forget(self, who: Identity, data: st.DataObject) -> None:
        key = self.key_of(who, data)
        got = self.run(lambda: self.engine.forget(who, key))
        assert got == self.model.forget(who, key)

    @rule(admin=identities, confirm=st.booleans(), data=st.data())
    def review(self, admin: Identity, confirm: bool, data: st.DataObject) -> None:
        proposals = sorted(
            r.id for r in self.model.rows.values() if r.current and r.scope == "account_proposed"
        )
        fact_id = self.pick(data, proposals, [*sorted(self.model.rows), 10**9], "fact_id")
        if data.draw(st.integers(0, 3), label="by an administrator") > 0:
            account = (
                self.model.rows[fact_id].account if fact_id in self.model.rows else admin.account
            )
            admin = Identity(account, dict(ADMINS)[account], admin.agent)
        verb = self.engine.confirm if confirm else self.engine.reject
        got = self.run(lambda: verb(admin, fact_id))
        assert got == self.model.review(admin, fact_id, confirm)

    @rule(who=identities, content=st.sampled_from(WORDS))
    def add_memory(self, who: Identity, content: str) -> None:
        memory = self.engine.add_memory(who, f"Note: {content}")
        tally("model operations")
        self.model.add_memory(who, memory.content, memory.id)

    @rule(who=identities, data=st.data())
    def forget_memory(self, who: Identity, data: st.DataObject) -> None:
        memory_id = self.memory_of(who, data)
        got = self.run(lambda: self.engine.forget_memory(who, memory_id))
        assert got == self.model.forget_memory(who, memory_id)

    @rule(account=st.sampled_from(ACCOUNTS), user=st.sampled_from(USERS[:3]))
    def erase_user(self, account: str, user: str) -> None:
        report = self.engine.erase_user(account, user)
        tally("model operations")
        got = (report.facts, report.memories, report.marks, report.account_facts_kept)
        assert got == self.model.erase_user(account, user)

    @rule()
    def trim(self) -> None:
        tally("model operations")
        assert self.engine.trim().marks_told == self.model.trim()

    @rule(account=st.sampled_from(ACCOUNTS), reader=st.sampled_from(READERS))
    def delete_reader(self, account: str, reader: str) -> None:
        tally("model operations")
        assert self.engine.delete_reader(account, reader) == self.model.delete_reader(
            account, reader
        )

    # -- reads -------------------------------------------------------------------------

    @rule(who=identities, reader=readers, changes=st.sampled_from(CHANGES))
    def get_context(self, who: Identity, reader: str | None, changes: Any) -> None:
        block = self.engine.get_context(who, reader=reader, token_budget=BUDGET, changes=changes)
        tally("model operations")
        expected = self.model.get_context(who, reader, kinds_of(changes))
        got = Block(
            facts=frozenset(f.id for f in block.facts),
            memories=frozenset(m.id for m in block.memories),
            changed=tuple(
                Told(c.was.id, c.now.id if c.now else None, c.cause) for c in block.changed
            ),
            changed_more=block.changed_more if block.changed_more is not None else -1,
        )
        tally("changes told", len(block.changed))
        tally("expiries told", sum(c.cause == "expired" for c in block.changed))
        assert got == expected
        assert {(f.id, f.content) for f in block.facts} == {
            (i, self.model.rows[i].content) for i in expected.facts
        }
        assert shape_errors(block, self.engine, BUDGET) == []

    @rule(who=identities, reader=readers, changes=st.sampled_from(CHANGES))
    def get_context_again(self, who: Identity, reader: str | None, changes: Any) -> None:
        self.get_context(who, reader, changes)

    @rule(who=identities)
    def read_as_bot(self, who: Identity) -> None:
        """The common case: one agent reading every conversation, with the default changes."""
        self.get_context(who, "bot", None)

    @rule(who=identities, reader=readers)
    def get_facts(self, who: Identity, reader: str | None) -> None:
        got = {f.id for f in self.engine.get_facts(who, reader=reader)}
        tally("model operations")
        assert got == self.model.get_facts(who, reader)

    @rule(who=identities, key=st.sampled_from(KEYS))
    def history(self, who: Identity, key: str) -> None:
        got = [(f.id, f.content, f.end_cause) for f in self.engine.history(who, key)]
        tally("model operations")
        assert got == [(r.id, r.content, r.cause) for r in self.model.every_version(who, key)]

    @rule(who=identities)
    def include_invalidated(self, who: Identity) -> None:
        got = {f.id for f in self.engine.get_facts(who, include_invalidated=True)}
        tally("model operations")
        assert got == {r.id for r in self.model.every_version(who)}

    @invariant()
    def rows_keep_their_promises(self) -> None:
        assert broken_invariants(self.engine) == []


def test_engine_agrees_with_the_model_of_the_spec(db_url: str) -> None:
    """As many runs as ever in all: half on the engine's own clock, half on the model's."""
    runs = settings(
        max_examples=scale(100, 2000) // 2,
        stateful_step_count=scale(50, 80),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    with MemoryEngine(db_url) as engine:
        run_state_machine_as_test(
            lambda: EngineAgainstModel(engine),  # type: ignore[arg-type]  # a factory is accepted too
            settings=runs,
        )
    clock = ModelClock()
    with MemoryEngine(db_url, clock=clock) as engine:
        run_state_machine_as_test(
            lambda: EngineAgainstModel(engine, clock),  # type: ignore[arg-type]
            settings=runs,
        )
