"""No answer ever shows a fact or a memory to an identity the visibility rules do not let see it.

Every stored text opens with a unique tag, ``⟦n⟧``, and the test keeps a ledger
of who may read each tag: the identity that wrote it; every identity of the
account and agent definition once an administrator confirmed it; a reader it
was handed to, for the notice that it changed. After random operations, every
block, listing, history and notice is searched for tags, and each tag found must
be one its reader may see. The ledger is built from the visibility rules as
docs/concepts.md states them ("Identity and scopes"), not from the engine's
code, so a leak is caught whatever caused it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from korely_memory import Fact, Identity, KorelyError, MemoryEngine

from .soak import scale, tally
from .world import GIULIA, IDENTITIES, empty

USERS = ("giulia", "marco", "anna", None)
AGENTS = ("support", "sales")
KEYS = ("home-city", "plan", "hours")
ADMINS = {"acme": "anna", "globex": "giulia"}
TAG = re.compile(r"⟦(\d+)⟧")

identities = st.sampled_from(IDENTITIES)
readers = st.sampled_from((None, "bot", "bot", "helper", "marco"))


@dataclass
class Written:
    """One stored text and who may read it."""

    who: Identity
    memory: bool = False
    confirmed: bool = False  # reaches the whole account through ``who.agent``
    gone: bool = False  # forgotten from its memory, or its person erased
    source: int | None = None  # the tag of the memory a fact was read from


@dataclass
class Ledger:
    texts: dict[int, Written] = field(default_factory=dict)
    handed: dict[tuple[str, str], dict[int, str]] = field(
        default_factory=dict
    )  # (account, reader) -> tag -> subject

    def may_see(self, who: Identity, tag: int) -> bool:
        w = self.texts[tag]
        if w.gone:
            return False
        if w.confirmed:
            return (w.who.account, w.who.agent) == (who.account, who.agent)
        return w.who == who

    def may_be_told(self, who: Identity, reader: str, tag: int) -> bool:
        """A notice names what this reader was handed, about this block's user or about no user."""
        subject = self.handed.get((who.account, reader), {}).get(tag)
        return not self.texts[tag].gone and subject is not None and subject in (who.user or "", "")

    def hand(self, who: Identity, reader: str | None, shown: Iterable[Fact]) -> None:
        if reader is None:
            return
        for f in shown:
            for tag in tags(f.content):
                subject = "" if self.texts[tag].confirmed else (self.texts[tag].who.user or "")
                self.handed.setdefault((who.account, reader), {}).setdefault(tag, subject)


def tags(text: str) -> list[int]:
    return [int(t) for t in TAG.findall(text)]


class LeakHunt(RuleBasedStateMachine):
    def __init__(self, engine: MemoryEngine) -> None:
        super().__init__()
        self.engine = engine
        empty(engine)
        for account, user in ADMINS.items():
            engine.grant_admin(account, user)
        self.ledger = Ledger()
        self.facts: list[int] = []
        self.memories: dict[int, tuple[Identity, int]] = {}  # memory id -> (owner, tag)

    @initialize(
        seeds=st.lists(st.tuples(identities, st.sampled_from(KEYS)), min_size=1, max_size=6),
        scope=st.sampled_from(("user", "account")),
    )
    def facts_read_by_bot(self, seeds: list[tuple[Identity, str]], scope: str) -> None:
        """Facts already handed to a reader, so that the steps that follow have notices to give."""
        for who, key in seeds:
            self.facts.append(self.engine.remember(who, key, self.text_for(who), scope=scope).id)
        for who in dict.fromkeys(who for who, _ in seeds):
            self.get_context(who, "bot", None)

    def text_for(self, who: Identity, memory: bool = False, source: int | None = None) -> str:
        tag = len(self.ledger.texts) + 1
        self.ledger.texts[tag] = Written(who, memory=memory, source=source)
        return f"⟦{tag}⟧ note of {who.user} via {who.agent}"

    def attempt(self, call: Any) -> Any:
        tally("isolation operations")
        try:
            return call()
        except KorelyError:
            return None

    def see(self, who: Identity, shown: Iterable[Fact], what: str) -> None:
        for f in shown:
            for tag in tags(f.content):
                assert self.ledger.may_see(who, tag), (
                    f"{what} of {who} shows ⟦{tag}⟧: {self.ledger.texts[tag]}"
                )

    # -- writes ----------------------------------------------------------------------

    @rule(
        who=identities,
        key=st.sampled_from(KEYS),
        scope=st.sampled_from(("user", "user", "account")),
        data=st.data(),
    )
    def remember(self, who: Identity, key: str, scope: str, data: st.DataObject) -> None:
        mine = [(mid, tag) for mid, (owner, tag) in self.memories.items() if owner == who]
        source = data.draw(st.none() | st.sampled_from(mine)) if mine else None
        content = self.text_for(who, source=source[1] if source else None)
        fact = self.attempt(
            lambda: self.engine.remember(
                who, key, content, scope=scope, source_memory_id=source and source[0]
            )
        )
        if fact is not None:
            self.facts.append(fact.id)

    @rule(who=identities, key=st.sampled_from(KEYS))
    def correct(self, who: Identity, key: str) -> None:
        content = self.text_for(who)
        fact = self.attempt(lambda: self.engine.correct(who, key, content))
        if fact is not None and fact.effective_scope.value == "account":
            self.ledger.texts[tags(content)[0]].confirmed = True  # an administrator's correction

    @rule(who=identities, key=st.sampled_from(KEYS))
    def forget(self, who: Identity, key: str) -> None:
        self.attempt(lambda: self.engine.forget(who, key))

    @rule(
        agent=st.sampled_from(AGENTS),
        account=st.sampled_from(tuple(ADMINS)),
        confirm=st.booleans(),
        data=st.data(),
    )
    def review(self, agent: str, account: str, confirm: bool, data: st.DataObject) -> None:
        if not self.facts:
            return
        fact_id = data.draw(st.sampled_from(self.facts))
        admin = Identity(account, ADMINS[account], agent)
        fact = self.attempt(
            lambda: (self.engine.confirm if confirm else self.engine.reject)(admin, fact_id)
        )
        if fact is not None and confirm:
            for tag in tags(fact.content):
                self.ledger.texts[tag].confirmed = True

    @rule(who=identities)
    def add_memory(self, who: Identity) -> None:
        content = self.text_for(who, memory=True)
        memory = self.engine.add_memory(who, content)
        self.memories[memory.id] = (who, tags(content)[0])

    @rule(who=identities, data=st.data())
    def forget_memory(self, who: Identity, data: st.DataObject) -> None:
        if not self.memories:
            return
        memory_id = data.draw(st.sampled_from(sorted(self.memories)))
        if self.attempt(lambda: self.engine.forget_memory(who, memory_id)) is None:
            return
        _, tag = self.memories.pop(memory_id)
        for w in self.ledger.texts.values():
            if w.source == tag:
                w.gone = True  # its words are never told again
        self.ledger.texts[tag].gone = True

    @rule(account=st.sampled_from(("acme", "globex")), user=st.sampled_from(USERS[:3]))
    def erase_user(self, account: str, user: str) -> None:
        self.engine.erase_user(account, user)
        tally("isolation operations")
        for w in self.ledger.texts.values():
            if (w.who.account, w.who.user) == (account, user) and not w.confirmed:
                w.gone = True
        for mid, (owner, _) in list(self.memories.items()):
            if (owner.account, owner.user) == (account, user):
                del self.memories[mid]

    # -- reads -------------------------------------------------------------------------

    @rule(who=identities, reader=readers, query=st.sampled_from((None, "note", "giulia", "plan")))
    def get_context(self, who: Identity, reader: str | None, query: str | None) -> None:
        block = self.engine.get_context(who, query, reader=reader, token_budget=8000, changes="all")
        tally("isolation operations")
        self.see(who, block.facts, "a block's facts")
        for m in block.memories:
            for tag in tags(m.content):
                assert self.ledger.may_see(who, tag) and self.ledger.texts[tag].memory, (
                    f"memory ⟦{tag}⟧ to {who}"
                )
        for change in block.changed:
            assert reader is not None
            for tag in tags(change.was.content):
                assert self.ledger.may_be_told(who, reader, tag), (
                    f"{who} via {reader} told ⟦{tag}⟧ ended"
                )
            if change.now is not None:
                self.see(who, [change.now], "a notice's 'now'")
        told = {t for c in block.changed for t in tags(c.was.content)}
        shown = {
            t
            for text in [*(f.content for f in block.facts), *(m.content for m in block.memories)]
            for t in tags(text)
        }
        shown |= {t for c in block.changed if c.now is not None for t in tags(c.now.content)}
        assert set(tags(block.text)) <= told | shown, "the text shows a tag no item carries"
        self.ledger.hand(who, reader, block.facts)

    @rule(who=identities, reader=readers)
    def get_context_by_a_reader(self, who: Identity, reader: str | None) -> None:
        self.get_context(who, reader or "bot", None)

    @rule(who=identities, key=st.sampled_from(KEYS))
    def correct_again(self, who: Identity, key: str) -> None:
        self.correct(who, key)

    @rule(who=identities, reader=readers, ended=st.booleans())
    def get_facts(self, who: Identity, reader: str | None, ended: bool) -> None:
        found = self.engine.get_facts(who, reader=reader, include_invalidated=ended)
        tally("isolation operations")
        self.see(who, found, "a listing")
        if not ended:
            self.ledger.hand(who, reader, found)

    @rule(who=identities, key=st.sampled_from(KEYS))
    def history(self, who: Identity, key: str) -> None:
        tally("isolation operations")
        self.see(who, self.engine.history(who, key), "history")

    @rule(who=identities)
    def search_memories(self, who: Identity) -> None:
        tally("isolation operations")
        for m in self.engine.search_memories(who, "note", limit=50):
            for tag in tags(m.content):
                assert self.ledger.may_see(who, tag), f"memory search of {who} shows ⟦{tag}⟧"

    @rule(account=st.sampled_from(("acme", "globex")))
    def proposals(self, account: str) -> None:
        tally("isolation operations")
        for f in self.engine.proposals(account):
            for tag in tags(f.content):
                w = self.ledger.texts[tag]
                assert w.who.account == account and not w.gone, (
                    f"proposals of {account} show ⟦{tag}⟧"
                )


def test_no_answer_shows_what_its_identity_may_not_see(db_url: str) -> None:
    with MemoryEngine(db_url) as engine:
        run_state_machine_as_test(
            lambda: LeakHunt(engine),  # type: ignore[arg-type]  # a factory is accepted too
            settings=settings(
                max_examples=scale(100, 2000),
                stateful_step_count=scale(50, 80),
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )


def test_a_notice_never_names_a_replacement_another_agent_definition_keeps(
    engine: MemoryEngine,
) -> None:
    """A reader told of a change read through another definition hears 'no longer true'.

    One reader name reading two agent definitions is told the changes of both,
    but what replaced a fact is named only when this identity may see it (a fact
    recorded through one definition is invisible to the others).
    """
    sales = Identity("acme", "giulia", "sales")
    engine.remember(sales, "plan", "Giulia uses the Pro plan")
    engine.get_context(sales, reader="bot")
    engine.correct(sales, "plan", "Giulia uses the Enterprise plan")
    block = engine.get_context(GIULIA, reader="bot")
    assert engine.get_facts(GIULIA) == []
    assert [c.now for c in block.changed] == [None]
    assert "Enterprise" not in block.text
