"""``KorelyStore``: a LangGraph ``BaseStore`` whose items are korely facts.

Code written for LangGraph's stores (``create_agent(..., store=...)``, tools reading
``runtime.store``, LangMem's memory tools and manager) runs on it unchanged, and what it
writes is memory korely keeps: a put records a fact (a new version when its words change,
history kept, readers told once), a delete forgets it, and the same items are in
``engine.get_facts`` and in the block ``KorelyMiddleware`` shows.

**Whose memory a namespace is.** ``namespaces`` lists patterns; a namespace that starts
with a pattern's labels, ``{user}`` standing for any label, is that user's memory (LangMem's
``("memories", "{langgraph_user_id}")`` is the first pattern by default). Any other
namespace is the agent's own memory (no user). The account and the agent definition are
the store's. A put there under a label that names a person (the run's ``langgraph_user_id``
or ``user_id``, or someone the memory holds) warns, once a namespace: ``erase_user`` would
miss it.

**One memory, one view.** The user's own facts that no item holds (korely's tools', a
capture's) are items too, of the namespace the first pattern gives the user: key the fact's
key, value ``{"kind": "Memory", "content": {"content": ...}}``. A put to one is a new version
of that fact, a delete forgets it.

**What a value becomes.** The fact's words are the value's ``"content"`` (or ``"text"``,
``"memory"``) when it is a non-empty string, looked for one level down too (LangMem's manager
keeps ``{"kind": ..., "content": {"content": ...}}``); a value with no such field is shown as
its compact JSON. Words past 2000 characters are cut (with "…") in the fact; the value
itself is kept whole, and every other field stays store-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.config import get_config
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from korely_memory import Identity, InvalidRequest, MemoryEngine, NotFound, StoreItem, limits

USER = "{user}"
DEFAULT_NAMESPACES: tuple[tuple[str, ...], ...] = (("memories", USER),)
FACT_KIND = "Memory"
"""The ``kind`` of a fact no item holds, served as an item: LangMem's manager's default schema."""
TEXT_FIELDS = ("content", "text", "memory")
"""The fields whose string is a fact's words, in the order they are looked for."""
MAX_WORDS = 2000

_log = logging.getLogger(__name__)
_PLAIN_FIELD = re.compile(r"[\w -]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
EXACT = 2**53
_CHECKS_KEPT = 4096  # namespaces a store remembers having checked for a user's label
_RUN_USERS = ("langgraph_user_id", "user_id")


class KorelyStore(BaseStore):
    """A LangGraph store on a ``MemoryEngine``: each item is a fact of the user its namespace names.

    Example:
        ```python
        from langchain.agents import create_agent
        from langchain_korely import KorelyStore
        from korely_memory import MemoryEngine

        store = KorelyStore(MemoryEngine(), account="acme", agent="assistant")
        agent = create_agent(model, tools=[...], store=store)
        ```

    Args:
        engine: The memory.
        account: The account every item is in.
        agent: The agent definition whose memory the items are.
        namespaces: Patterns of the namespaces that are a user's memory; ``{user}`` stands
            for the label that names the user. Any other namespace is the agent's own.
        index: LangGraph's index configuration (``embed``, ``dims``, ``fields``): a query then
            ranks items by the cosine of ``embed``'s vectors of those fields. Without it, a
            query ranks items by the engine's ranking of their facts (BM25 over its words, or
            its ``embed=``); items that do not match come after, unscored by it (score 0).
        ttl: LangGraph's TTL configuration (``default_ttl`` in minutes, ``refresh_on_read``,
            ``omit_expired``, ``sweep_interval_minutes``).
    """

    supports_ttl = True

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        account: str = "default",
        agent: str = "langgraph",
        namespaces: Sequence[Sequence[str]] = DEFAULT_NAMESPACES,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        if not isinstance(engine, MemoryEngine):
            raise InvalidRequest("engine", f"must be a MemoryEngine, not {type(engine).__name__}")
        limits.check_identity(Identity(account, None, agent))
        self.engine = engine
        self.account = account
        self.agent = agent
        self.namespaces = _patterns(namespaces)
        self.index_config = dict(index) if index else None
        self.embeddings: Embeddings | None = None
        self._fields: list[tuple[str, list[str]]] = []
        if index:
            self.embeddings = ensure_embeddings(index.get("embed"))
            self._fields = [(f, tokenize_path(f)) for f in index.get("fields") or ["$"]]
        self.ttl_config: TTLConfig = TTLConfig(**(ttl or {}))
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()
        self._label_checked: set[tuple[str, ...]] = set()

    # -- BaseStore ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` as LangGraph's stores do: the reads first, in order, on the store as it
        was before the batch; then the puts, the last to an item winning."""
        todo = list(ops)
        for op in todo:
            if isinstance(op, PutOp):
                self._check(op)
            elif not isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                raise InvalidRequest("ops", f"unknown operation {type(op).__name__}")
        results: list[Result] = [None] * len(todo)
        for i, op in enumerate(todo):
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
        puts = {(op.namespace, op.key): op for op in todo if isinstance(op, PutOp)}
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- time to live ----------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete every item past its time to live (its fact ends as expired); returns how many."""
        return self.engine.items.sweep()

    async def asweep_ttl(self) -> int:
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> threading.Thread:
        """Sweep in a background thread every ``sweep_interval_minutes`` (or the configured
        interval, or 5 minutes) until ``stop_ttl_sweeper``."""
        minutes = sweep_interval_minutes or self.ttl_config.get("sweep_interval_minutes") or 5
        if self._sweeper is not None and self._sweeper.is_alive():
            return self._sweeper
        self._stop.clear()

        def sweep() -> None:
            while not self._stop.wait(minutes * 60):
                try:
                    self.sweep_ttl()
                except Exception:  # the database away for a while: sweep again next time
                    _log.exception("KorelyStore: a TTL sweep failed; the next one will retry")

        self._sweeper = threading.Thread(target=sweep, name="korely-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return self._sweeper

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeps; returns whether the thread ended within ``timeout``."""
        self._stop.set()
        if self._sweeper is None:
            return True
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    # -- the mapping -----------------------------------------------------------------------

    def whose(self, namespace: Sequence[str]) -> tuple[Identity, tuple[str, ...]]:
        """Whose memory ``namespace`` is, and what sets its items apart in that memory.

        Under the first pattern, the labels past it (LangMem's ``("memories", "giulia")``: none,
        so its keys are the facts' keys where they can be). Under any other, the whole
        namespace with the user's label as '.', which no label is: the same key under two
        patterns is two facts. Outside every pattern, the whole namespace.
        """
        labels = tuple(namespace)
        for n, pattern in enumerate(self.namespaces):
            if len(labels) >= len(pattern) and all(
                p in (USER, label) for p, label in zip(pattern, labels, strict=False)
            ):
                if USER not in pattern:
                    return Identity(self.account, None, self.agent), labels
                at = pattern.index(USER)
                try:
                    who = limits.check_identity(Identity(self.account, labels[at], self.agent))
                except InvalidRequest as refused:
                    raise InvalidRequest(
                        "namespace", f"names a user the engine refuses: {refused.message}"
                    ) from None
                if n == 0:
                    return who, labels[len(pattern) :]
                return who, (*labels[:at], ".", *labels[at + 1 :])
        return Identity(self.account, None, self.agent), labels

    # -- operations ------------------------------------------------------------------------

    def _check(self, op: PutOp) -> None:
        limits.check_item(op.namespace, op.key, op.value, index=op.index, ttl=op.ttl)
        if op.value is not None:
            self.whose(op.namespace)

    def _put(self, op: PutOp) -> None:
        if op.value is None:
            if self.engine.items.delete(self.account, self.agent, op.namespace, op.key):
                return
            who = self._home(op.namespace)
            if who is not None and self._facts_as_items(op.namespace, key=op.key):
                with contextlib.suppress(NotFound):  # forgotten meanwhile
                    self.engine.forget(who, op.key)
            return
        who, place = self.whose(op.namespace)
        if who.user is None:
            self._warn_of_a_user_label(tuple(op.namespace))
        value = dict(op.value)
        words, at = shown(value)
        self.engine.items.put(
            who,
            op.namespace,
            op.key,
            value,
            text=words,
            text_at=at,
            place=place,
            ttl=op.ttl,
            index=op.index,
        )

    def _get(self, op: GetOp) -> Item | None:
        (found,) = self.engine.items.get(
            self.account,
            self.agent,
            [(tuple(op.namespace), op.key)],
            live=self._live,
            refresh=op.refresh_ttl,
        )
        if found is None:
            found = next(iter(self._facts_as_items(op.namespace, key=op.key)), None)
        return None if found is None else _item(found)

    # -- the facts no item holds -----------------------------------------------------------

    def _home(self, namespace: Sequence[str]) -> Identity | None:
        """The user whose facts without an item ``namespace`` serves: the namespace the first
        pattern gives the user, with no label past it, where an item's key is its fact's."""
        first = self.namespaces[0]
        if USER not in first or len(namespace) != len(first):
            return None
        try:
            who, place = self.whose(namespace)
        except InvalidRequest:
            return None
        return who if who.user is not None and not place else None

    def _facts_as_items(
        self, namespace: Sequence[str], *, key: str | None = None, limit: int | None = None
    ) -> list[StoreItem]:
        """The user's own facts that no item holds (a tool's, a capture's, the engine's), as
        items of ``namespace`` when it is the user's home (else none): key the fact's key,
        value LangMem's manager's shape, ``{"kind": "Memory", "content": {"content": ...}}``;
        the last changed first (``key``: that key's only; ``limit``: this many at most)."""
        who = self._home(namespace)
        if who is None:
            return []
        labels = tuple(namespace)
        return [
            StoreItem(
                namespace=labels,
                key=fact.key,
                value=_served_value(fact.content),
                created_at=fact.created_at,
                updated_at=fact.modified_at,
                owner=who.user,
                fact_key=fact.key,
                fact_id=fact.id,
                text_at=("content", "content"),
            )
            for fact in self.engine.items.facts_without_item(who, key=key, limit=limit)
        ]

    def _home_under(self, prefix: tuple[str, ...]) -> tuple[str, ...] | None:
        """The user's home whose facts are served under ``prefix``, if it names the user (a
        prefix short of the user's label names no one in particular)."""
        first = self.namespaces[0]
        if USER not in first or not first.index(USER) < len(prefix) <= len(first):
            return None
        home = (*prefix, *first[len(prefix) :])
        return home if self._home(home) is not None else None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        where = op.filter or {}
        _check_operators(where)
        equal, rest = _split_filter(where)
        home = self._home_under(prefix)
        scored: list[tuple[StoreItem, float | None]]
        if home is None and not rest and not op.query:  # the database pages what it filtered
            page = self.engine.items.list(
                self.account,
                self.agent,
                prefix,
                live=self._live,
                limit=op.limit,
                offset=op.offset,
                equal=equal,
            )
            scored = [(i, None) for i in page]
        else:
            # Without a query, the first offset + limit of each, merged in the database's
            # order, are all a page can hold: no read of every item or fact.
            some = None if op.query else op.offset + op.limit
            # The facts first: one an item comes to hold meanwhile is then read as that item.
            served = [] if home is None else self._served(home, where, some)
            found = self.engine.items.list(
                self.account,
                self.agent,
                prefix,
                live=self._live,
                equal=equal,
                limit=None if rest else some,
            )
            if rest:
                found = [i for i in found if matches(i.value, rest)]
            if served:
                found = _merged(found, served)
            ranked = self._ranked(op.query, found) if op.query else [(i, None) for i in found]
            scored = list(ranked[op.offset : op.offset + op.limit])
        if op.refresh_ttl:
            aging = [(i.namespace, i.key) for i, _ in scored if i.ttl is not None]
            if aging:
                self.engine.items.refresh(self.account, self.agent, aging)
        return [_search_item(i, score) for i, score in scored]

    def _served(
        self, home: tuple[str, ...], where: dict[str, Any], limit: int | None
    ) -> list[StoreItem]:
        """The facts served as items of ``home`` that meet the filter ``where``, ``limit`` at
        most. Their values differ only in their words (``content.content``): a filter that
        does not look there takes all of them or none, and is checked on one."""
        if not any(f == "content" or f.startswith("content.") for f in where):
            if not matches(_served_value(""), where):
                return []
            return self._facts_as_items(home, limit=limit)
        return [i for i in self._facts_as_items(home) if matches(i.value, where)]

    def _ranked(self, query: str, found: list[StoreItem]) -> list[tuple[StoreItem, float | None]]:
        if self.embeddings is None:
            scores = self.engine.items.relevance(
                query, [_words(i) for i in found], account=self.account
            )
            order = sorted(range(len(found)), key=lambda n: -scores[n])
            return [(found[n], scores[n]) for n in order]
        texts = [self._embedded(i) for i in found]
        flat = [t for some in texts for t in some]
        scores = self.engine.items.relevance(
            query, flat, embed=self.embeddings, account=self.account
        )
        by_text = dict(zip(flat, scores, strict=True))
        best = [max((by_text[t] for t in some), default=None) for some in texts]
        order = sorted(range(len(found)), key=lambda n: (best[n] is None, -(best[n] or 0.0)))
        return [(found[n], best[n]) for n in order]

    def _embedded(self, item: StoreItem) -> list[str]:
        """The texts of ``item`` its index embeds (none when its put said ``index=False``)."""
        if item.index is False:
            return []
        value = item.value
        paths = (
            self._fields
            if item.index is None or item.index is True
            else [(p, tokenize_path(p)) for p in item.index]
        )
        texts: list[str] = []
        for path, tokens in paths:
            if path == "$":
                texts.append(json.dumps(value, ensure_ascii=False))
            else:
                texts.extend(get_text_at_path(value, tokens))
        return texts

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = self.engine.items.namespaces(self.account, self.agent, live=self._live)
        conditions = op.match_conditions or ()
        kept = [ns for ns in found if all(_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            kept = sorted({ns[: op.max_depth] for ns in kept})
        return kept[op.offset : op.offset + op.limit]

    def _warn_of_a_user_label(self, namespace: tuple[str, ...]) -> None:
        """Warn, once a namespace, when a namespace outside every pattern (the agent's own
        memory) has a label that names a person: the run's ``langgraph_user_id`` or
        ``user_id``, or someone the memory holds anything of. LangGraph's examples put the
        user first, ``(user_id, "memories")``, which the default rule does not read as the
        user's: ``erase_user`` and ``export_user`` would miss what is put there."""
        if namespace in self._label_checked or any(
            len(namespace) >= len(p) and all(a == b for a, b in zip(p, namespace, strict=False))
            for p in self.namespaces
            if USER not in p
        ):
            return  # checked before, or a pattern of the agent's own memory said so
        if len(self._label_checked) >= _CHECKS_KEPT:
            self._label_checked.clear()
        self._label_checked.add(namespace)
        named = _run_users()
        for label in namespace:
            if label in named:
                known = "the run's user"
            else:
                try:
                    if not self._names_a_person(label):
                        continue
                except InvalidRequest:  # not a name a person can have
                    continue
                known = f"a person the memory of account {self.account!r} holds"
            at = namespace.index(label)
            pattern = (*namespace[:at], USER, *namespace[at + 1 :])
            warnings.warn(
                f"KorelyStore: the namespace {namespace!r} matches no pattern of namespaces=, "
                f"so it is the agent's own memory (no user), yet its label {label!r} names "
                f"{known}: engine.erase_user and engine.export_user will not find what is put "
                f"there. If it is the memory of {label!r}, make the store with "
                f"namespaces=[{pattern!r}, ...].",
                UserWarning,
                stacklevel=5,
            )
            return

    def _names_a_person(self, label: str) -> bool:
        """Whether the memory holds anything of a person named ``label``. ``holds_user`` counts
        read marks under a reader's name too; a reader is the program a block is handed to
        (often named after the agent), no person, unless the memory holds facts of theirs."""
        if not self.engine.listings.holds_user(self.account, label):
            return False
        if label not in {r["reader"] for r in self.engine.listings.readers(self.account)}:
            return True
        return any(p["user"] == label for p in self.engine.listings.people(self.account))

    @property
    def _live(self) -> bool:
        return bool(self.ttl_config.get("omit_expired", False))


def _served_value(words: str) -> dict[str, Any]:
    return {"kind": FACT_KIND, "content": {"content": words}}


def _merged(stored: list[StoreItem], served: list[StoreItem]) -> list[StoreItem]:
    """Items and served facts in the database's order (the last written first, then by
    namespace and key), each (namespace, key) once: a stored item wins over a fact served
    under its key (an item put there between the two reads)."""
    taken = {(i.namespace, i.key) for i in stored}
    found = stored + [i for i in served if (i.namespace, i.key) not in taken]
    found.sort(key=lambda i: (i.namespace, i.key))
    found.sort(key=lambda i: i.updated_at, reverse=True)
    return found


def _run_users() -> set[str]:
    """The users the LangGraph run this is called in names (``langgraph_user_id``, LangMem's,
    and ``user_id``, LangGraph's examples'), if it is called in one."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a run
        return set()
    return {str(configurable[k]) for k in _RUN_USERS if configurable.get(k) is not None}


def words_of(value: dict[str, Any]) -> str:
    """The words of the fact that shows ``value``: its text field, else its compact JSON."""
    return shown(value)[0]


def shown(value: dict[str, Any]) -> tuple[str, tuple[str, ...] | None]:
    """The words of the fact that shows ``value``, and where in it they are (None: the value's
    compact JSON, which has no one place)."""
    at = _text_at(value)
    if at is None:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    else:
        found: Any = value
        for field in at:
            found = found[field]
        text = found
    text = text.strip()
    return (text if len(text) <= MAX_WORDS else text[: MAX_WORDS - 1] + "…"), at


def matches(value: dict[str, Any], where: dict[str, Any]) -> bool:
    """Whether ``value`` meets LangGraph's ``filter``: each field equal to the value given
    (objects and lists compared inside), or meeting its ``$eq``, ``$ne``, ``$gt``, ``$gte``,
    ``$lt`` and ``$lte``. Values compare as JSON's: a number equals a number of the same value,
    never a boolean or a string; numbers order with numbers and strings with strings. A field
    with dots that is not a key of the value is a path into it (``"user.access-level"``)."""
    return all(_meets(_at(value, field), wanted) for field, wanted in where.items())


def _split_filter(where: dict[str, Any]) -> tuple[dict[str, str | int | float], dict[str, Any]]:
    """The fields of a filter the database checks (a top-level field equal to a string or a
    number), and the rest, checked here."""
    equal: dict[str, str | int | float] = {}
    rest: dict[str, Any] = {}
    for field, wanted in where.items():
        if isinstance(wanted, dict) and set(wanted) == {"$eq"}:
            wanted = wanted["$eq"]
        if _database_checks(field, wanted):
            equal[field] = wanted
        else:
            rest[field] = where[field]
    return equal, rest


def _database_checks(field: str, wanted: Any) -> bool:
    """Whether the database compares ``field`` with ``wanted`` as ``matches`` does: a plain
    field name, a string it can hold, or a number small enough to compare exactly."""
    if not isinstance(field, str) or not _PLAIN_FIELD.fullmatch(field):
        return False
    if isinstance(wanted, str):
        return "\x00" not in wanted and not _SURROGATE.search(wanted)
    number = isinstance(wanted, (int, float)) and not isinstance(wanted, bool)
    return number and abs(wanted) < EXACT  # NaN is not


def _check_operators(where: Any) -> None:
    """Refuse an operator ``matches`` does not know, whatever the items hold."""
    if isinstance(where, dict):
        for name, inner in where.items():
            if isinstance(name, str) and name.startswith("$") and name not in _OPERATORS:
                raise InvalidRequest(
                    "filter",
                    f"unknown operator {name!r}: use $eq, $ne, $gt, $gte, $lt or $lte",
                )
            _check_operators(inner)
    elif isinstance(where, (list, tuple)):
        for inner in where:
            _check_operators(inner)


def _at(value: dict[str, Any], field: str) -> Any:
    if field in value or "." not in field:
        return value.get(field)
    found: Any = value
    for part in field.split("."):
        if not isinstance(found, dict):
            return None
        found = found.get(part)
    return found


def _meets(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_compare(found, op, v) for op, v in wanted.items())
        return isinstance(found, dict) and all(_meets(found.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(found, (list, tuple))
            and len(found) == len(wanted)
            and all(_meets(f, w) for f, w in zip(found, wanted, strict=True))
        )
    return _equal(found, wanted)


def _equal(found: Any, wanted: Any) -> bool:
    """JSON's equality: a number equals a number of the same value, never a boolean."""
    if isinstance(found, bool) != isinstance(wanted, bool):
        return False
    return bool(found == wanted)


def _compare(found: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return _meets(found, wanted)
    if op == "$ne":
        return not _meets(found, wanted)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise InvalidRequest(
            "filter", f"unknown operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte"
        )
    # Numbers with numbers, strings with strings; nothing else is ordered (as in JSON).
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (found, wanted))
    if not numbers and not (isinstance(found, str) and isinstance(wanted, str)):
        return False
    ordered = {"$gt": found > wanted, "$gte": found >= wanted, "$lt": found < wanted}
    return bool(ordered.get(op, found <= wanted))


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    if not path:
        return True
    return all(p == "*" or p == label for p, label in zip(path, labels, strict=True))


def _text_at(value: dict[str, Any], depth: int = 2) -> tuple[str, ...] | None:
    """The path of the first text field holding a non-empty string, looked for one level down
    too (LangMem's manager keeps ``{"kind": ..., "content": {"content": ...}}``)."""
    for field in TEXT_FIELDS:
        found = value.get(field)
        if isinstance(found, str) and found.strip():
            return (field,)
        if isinstance(found, dict) and depth > 1:
            inner = _text_at(found, depth - 1)
            if inner is not None:
                return (field, *inner)
    return None


def _words(item: StoreItem) -> str:
    return words_of(item.value)


def _item(found: StoreItem) -> Item:
    return Item(
        value=found.value,
        key=found.key,
        namespace=found.namespace,
        created_at=found.created_at,
        updated_at=found.updated_at,
    )


def _search_item(found: StoreItem, score: float | None) -> SearchItem:
    # An embedder's vectors may be numpy's (LangChain's DeterministicFakeEmbedding), and so
    # their cosine: a plain float is what JSON encoders (orjson, LangMem's) take.
    return SearchItem(
        namespace=found.namespace,
        key=found.key,
        value=found.value,
        created_at=found.created_at,
        updated_at=found.updated_at,
        score=None if score is None else float(score),
    )


def _patterns(value: Any) -> tuple[tuple[str, ...], ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidRequest("namespaces", "must be a sequence of namespace patterns (tuples)")
    found = []
    for pattern in value:
        if isinstance(pattern, str) or not isinstance(pattern, Sequence) or not pattern:
            raise InvalidRequest(
                "namespaces", f"each pattern must be a non-empty tuple, got {pattern!r}"
            )
        labels = tuple(pattern)
        if not all(isinstance(p, str) and p and "." not in p for p in labels):
            raise InvalidRequest(
                "namespaces", f"labels must be non-empty strings without '.', got {pattern!r}"
            )
        if labels.count(USER) > 1:
            raise InvalidRequest("namespaces", f"a pattern names one user at most, got {pattern!r}")
        found.append(labels)
    return tuple(found)
