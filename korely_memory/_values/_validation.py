"""The rules every argument must meet before anything touches the database.

Each check returns the normalised value or raises :class:`InvalidRequest`
naming the field. The limits and the checks an adapter needs are public in
``korely_memory.limits``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from ._errors import InvalidRequest
from ._identity import EndCause, Identity, Scope

MAX_NAME = 255
MAX_KEY = 100
MAX_CONTENT = 2000
MAX_MEMORY = 16_000
MIN_BUDGET, MAX_BUDGET = 50, 8000
DEFAULT_BUDGET = 800
DEFAULT_HOLD = dt.timedelta(minutes=10)
MAX_HOLD = dt.timedelta(days=1)

MAX_NAMESPACE = 255
MAX_ITEM_KEY = 255
MAX_VALUE = 100_000
"""Characters of a store item's value as JSON."""
MAX_TTL = 60 * 24 * 366 * 100
"""Minutes a store item may live between reads: a hundred years."""

_KEY = re.compile(rf"[a-z0-9][a-z0-9._:-]{{0,{MAX_KEY - 1}}}")
_SPACES = re.compile(r" +")


# Unicode's control characters (category Cc, fixed by the standard) and its line and paragraph
# separators (Zl, Zp); and the surrogates, which alone cannot be encoded to UTF-8, so that no
# database can store them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# What stored text never keeps. The control characters a terminal acts on (ESC, and every other
# C0 and C1 control but NUL, refused, and the tab and line breaks, kept) become spaces, as the
# block folds them; Unicode's bidi controls (Bidi_Control: embeddings, overrides, isolates,
# marks), which reorder what a reader sees and take no room, go. Every face returns stored text
# as it is kept, so neither may pass through any of them.
_TERMINAL = re.compile("[\x01-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


def _has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def name(field: str, value: Any, *, optional: bool = False) -> str | None:
    """An account, user, agent or reader name."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(field, f"must be a string, not {type(value).__name__}")
    if value == "":
        raise InvalidRequest(field, "must not be empty")
    if value in (".", ".."):
        raise InvalidRequest(field, f"must not be {value!r}")
    if len(value) > MAX_NAME:
        raise InvalidRequest(field, f"must be at most {MAX_NAME} characters, got {len(value)}")
    if "/" in value:
        raise InvalidRequest(field, "must not contain '/'")
    if _has_control(value):
        raise InvalidRequest(field, "must not contain a line break or other control character")
    if _has_surrogate(value):
        raise InvalidRequest(field, "must be valid Unicode (no lone surrogates)")
    return value


def label(field: str, value: Any, *, optional: bool = False) -> str | None:
    """An id the application names something by (a conversation, a message): a string of 1 to
    255 characters with no line break or other control character."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(field, f"must be a string, not {type(value).__name__}")
    if not 0 < len(value) <= MAX_NAME:
        raise InvalidRequest(field, f"must be 1 to {MAX_NAME} characters, got {len(value)}")
    if _has_control(value):
        raise InvalidRequest(field, "must not contain a line break or other control character")
    if _has_surrogate(value):
        raise InvalidRequest(field, "must be valid Unicode (no lone surrogates)")
    return value


def seqs(field: str, value: Any) -> frozenset[int] | None:
    """None, or a collection of positive integers (places in an order, from 1)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise InvalidRequest(field, f"must be a collection of integers, not {value!r:.40}")
    items = list(value)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 < item < 2**31:
            raise InvalidRequest(field, f"must hold integers from 1 to 2**31 - 1, got {item!r:.40}")
    return frozenset(items)


def identity(who: Any, field: str = "who") -> Identity:
    """An ``Identity``, or any object with ``account``, ``user`` and ``agent``, checked by name."""
    if not isinstance(who, Identity):
        for attr in ("account", "user", "agent"):
            if not hasattr(who, attr):
                raise InvalidRequest(field, "must be an Identity(account, user, agent)")
        who = Identity(who.account, who.user, who.agent)
    assert isinstance(who, Identity)
    name("account", who.account)
    name("user", who.user, optional=True)
    name("agent", who.agent)
    return who


def key(value: Any) -> str:
    """Trimmed, lower-cased, inner spaces to '-', then ``[a-z0-9][a-z0-9._:-]{0,99}``."""
    if not isinstance(value, str):
        raise InvalidRequest("key", f"must be a string, not {type(value).__name__}")
    normal = _SPACES.sub("-", value.strip().lower())
    if not _KEY.fullmatch(normal):
        raise InvalidRequest(
            "key",
            f"after trimming and lower-casing must be 1 to {MAX_KEY} characters of a-z, 0-9, '.', "
            f"'_', ':' or '-', starting with a letter or digit (got {value[:40]!r})",
        )
    return normal


def is_key(value: str) -> bool:
    """Whether ``value`` is a key as the engine keeps it (normalised already)."""
    return _KEY.fullmatch(value) is not None


def content(value: Any, *, field: str = "content", limit: int = MAX_CONTENT) -> str:
    """Text to store: terminal controls as spaces (tabs and line breaks kept), bidi controls
    dropped, trimmed, not empty, no NUL, at most ``limit`` characters."""
    if not isinstance(value, str):
        raise InvalidRequest(field, f"must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidRequest(field, "must not contain a NUL character")
    text = _TERMINAL.sub(" ", _BIDI.sub("", value)).strip()
    if not text:
        raise InvalidRequest(field, "must not be empty")
    if len(text) > limit:
        raise InvalidRequest(field, f"must be at most {limit} characters, got {len(text)}")
    if _has_surrogate(text):
        raise InvalidRequest(field, "must be valid Unicode (no lone surrogates)")
    return text


def scope(value: Any) -> Scope:
    """The scope a writer may ask for; ``account`` is stored as a proposal."""
    try:
        chosen = Scope(value)
    except ValueError:
        allowed = ", ".join(s.value for s in Scope if s is not Scope.ACCOUNT_REJECTED)
        raise InvalidRequest("scope", f"must be one of {allowed}, got {value!r}") from None
    if chosen is Scope.ACCOUNT_REJECTED:
        raise InvalidRequest(
            "scope", "account_rejected is set by an administrator's review, not written"
        )
    return Scope.ACCOUNT_PROPOSED if chosen is Scope.ACCOUNT else chosen


def moment(field: str, value: Any) -> dt.datetime | None:
    """A timezone-aware UTC datetime; naive is read as UTC, a bare date as midnight UTC."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        try:
            return value.astimezone(dt.timezone.utc)
        except OverflowError:
            raise InvalidRequest(
                field, f"is out of range once moved to UTC: {value.isoformat()}"
            ) from None
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    raise InvalidRequest(field, f"must be a datetime or a date, not {type(value).__name__}")


MOMENT_FORMS = "a date (2026-03-01) or an ISO 8601 time (2026-03-01T09:30:00Z)"
"""The forms a moment written as text takes, as every refusal of one says them."""
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def moment_text(field: str, value: Any) -> dt.date | dt.datetime:
    """A moment written as text (a tool argument, a command option, a query parameter): a date
    (``2026-03-01``) or an ISO 8601 time, ``Z`` for UTC; a ``date`` or ``datetime`` is taken as
    it is. The caller says what a date or a naive time means (``moment``, ``until``).

    Raises:
        InvalidRequest: ``value`` is none of those; the message names ``field`` and the forms.
    """
    if isinstance(value, (dt.date, dt.datetime)):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text[-1:] in ("Z", "z"):  # Python 3.10 reads no "Z"
            text = text[:-1] + "+00:00"
        try:
            if _DATE.fullmatch(text):
                return dt.date.fromisoformat(text)
            return dt.datetime.fromisoformat(text)
        except ValueError:
            pass
    raise InvalidRequest(field, f"must be {MOMENT_FORMS}, got {value!r:.60}")


def until(field: str, value: Any) -> dt.datetime | None:
    """When a fact stops being true: a datetime as ``moment`` reads it; a bare date means
    through that day, so the fact ends at the next midnight UTC."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        if value == dt.date.max:
            raise InvalidRequest(field, f"must be a day before {dt.date.max}, got {value}")
        value += dt.timedelta(days=1)
    return moment(field, value)


def token_budget(value: Any) -> int:
    """An integer from ``MIN_BUDGET`` to ``MAX_BUDGET``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest("token_budget", f"must be an integer, not {type(value).__name__}")
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise InvalidRequest(
            "token_budget", f"must be between {MIN_BUDGET} and {MAX_BUDGET}, got {value}"
        )
    return value


def max_facts(value: Any) -> int | None:
    """The ceiling on the facts one identity keeps: None (no ceiling) or a non-negative integer.
    Every entry point holds ``max_facts`` to this rule (``limits.check_max_facts`` is its name
    for adapters)."""
    return optional_count("max_facts", value)


def optional_count(field: str, value: Any) -> int | None:
    """None, or a non-negative integer."""
    return None if value is None else count(field, value)


def count(field: str, value: Any) -> int:
    """A non-negative integer (an id, a ceiling, a limit)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise InvalidRequest(field, f"must be an integer from 0 to 2**63 - 1, got {value!r:.40}")
    return value


def flag(field: str, value: Any) -> bool:
    """True or False, nothing that merely looks like one."""
    if not isinstance(value, bool):
        raise InvalidRequest(field, f"must be True or False, not {value!r:.40}")
    return value


def query(value: Any) -> str | None:
    """The text a block or a search is chosen by; longer than a memory is cut."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("query", f"must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidRequest("query", "must not contain a NUL character")
    if _has_surrogate(value):
        raise InvalidRequest("query", "must be valid Unicode (no lone surrogates)")
    return value[:MAX_MEMORY]


CAUSES = frozenset(c.value for c in EndCause)


def changes(value: Any) -> frozenset[str] | None:
    """None (the default rule), ``"all"``, or a collection of end causes to tell."""
    if value is None:
        return None
    if value == "all":
        return CAUSES
    if isinstance(value, str):
        value = [value]
    try:
        chosen = frozenset(str(v) for v in value)
    except TypeError:
        raise InvalidRequest(
            "changes", f"must be None, 'all' or a list of causes, got {value!r}"
        ) from None
    unknown = chosen - CAUSES
    if unknown:
        raise InvalidRequest(
            "changes", f"unknown causes {sorted(unknown)}; known: {sorted(CAUSES)}"
        )
    return chosen


def hold(value: Any, default: dt.timedelta) -> dt.timedelta | None:
    """None or False (no hold), True (``default``), seconds or a ``timedelta`` up to a day."""
    if value is None or value is False:
        return None
    if value is True:
        return default
    given = value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            value = dt.timedelta(seconds=value)
        except (OverflowError, ValueError):
            raise InvalidRequest("hold", f"is out of range: {value!r} seconds") from None
    if not isinstance(value, dt.timedelta):
        raise InvalidRequest(
            "hold", f"must be True, False, seconds or a timedelta, not {type(value).__name__}"
        )
    if not dt.timedelta(0) < value <= MAX_HOLD:
        # Said in the seconds it was given in: str(timedelta(seconds=-1)) is "-1 day, 23:59:59".
        said = f"{given:g} seconds" if given is not value else f"{value.total_seconds():g} seconds"
        raise InvalidRequest("hold", f"must be more than 0 and at most a day, got {said}")
    return value


# -- the items of LangGraph stores ------------------------------------------------------------


def item_namespace(value: Any, field: str = "namespace") -> tuple[str, ...]:
    """A namespace an item may be kept under: labels that are non-empty strings without '.'."""
    if not isinstance(value, (tuple, list)) or not value:
        raise InvalidRequest(field, "must be a non-empty tuple of labels")
    for label in value:
        if not isinstance(label, str) or not label:
            raise InvalidRequest(field, f"labels must be non-empty strings, got {label!r}")
        if "." in label:
            raise InvalidRequest(field, f"labels must not contain '.', got {label!r}")
        _no_nul(field, label)
    length = len(".".join(value))
    if length > MAX_NAMESPACE:
        raise InvalidRequest(
            field, f"must be at most {MAX_NAMESPACE} characters with its dots, got {length}"
        )
    return tuple(value)


def item_key(value: Any) -> str:
    """An item's key: any non-empty string of at most ``MAX_ITEM_KEY`` characters, kept exactly."""
    if not isinstance(value, str) or not value:
        raise InvalidRequest("key", f"must be a non-empty string, got {value!r}")
    if len(value) > MAX_ITEM_KEY:
        raise InvalidRequest("key", f"must be at most {MAX_ITEM_KEY} characters, got {len(value)}")
    return _no_nul("key", value)


def item_value(value: Any) -> str:
    """An item's value as the JSON kept: a dict with string keys, at most ``MAX_VALUE`` long."""
    if not isinstance(value, dict):
        raise InvalidRequest("value", f"must be a dict, not {type(value).__name__}")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise InvalidRequest("value", f"must be JSON (dicts with string keys): {error}") from None
    if not _string_keys(value):
        raise InvalidRequest("value", "must be JSON: every object key must be a string")
    if "\\u0000" in text and _holds_nul(value):
        raise InvalidRequest("value", "must not contain a NUL character in any string")
    if len(text) > MAX_VALUE:
        raise InvalidRequest(
            "value", f"must be at most {MAX_VALUE} characters as JSON, got {len(text)}"
        )
    _no_nul("value", text)
    return text


def item_ttl(value: Any) -> float | None:
    """A store item's time to live in minutes: None (for ever), or more than 0 and at most
    ``MAX_TTL``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TTL:
        raise InvalidRequest(
            "ttl", f"must be None or minutes, more than 0 and at most {MAX_TTL}, got {value!r}"
        )
    return float(value)


def item_path(field: str, value: Any, *, empty: bool = False) -> tuple[str, ...] | None:
    """Labels or keys given as a sequence of non-empty strings (``empty``: maybe none)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InvalidRequest(field, f"must be a sequence of strings, not {type(value).__name__}")
    if not value and not empty:
        raise InvalidRequest(field, "must not be empty")
    if not all(isinstance(v, str) and v for v in value):
        raise InvalidRequest(field, f"must hold non-empty strings, got {value!r}")
    for v in value:
        _no_nul(field, v)
    return tuple(value)


def item_index(value: Any) -> str:
    """What a put said to embed, as kept: null, false, or a list of paths."""
    if value is None or value is False:
        return json.dumps(value)
    if isinstance(value, (list, tuple)) and all(isinstance(p, str) and p for p in value):
        return json.dumps(list(value))
    raise InvalidRequest("index", f"must be None, False or a list of field paths, got {value!r}")


def _string_keys(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _string_keys(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_string_keys(v) for v in value)
    return True


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_nul(v) for v in value)
    return False


def _no_nul(field: str, text: str) -> str:
    if "\x00" in text:
        raise InvalidRequest(field, "must not contain a NUL character")
    if _has_surrogate(text):
        raise InvalidRequest(field, "must be valid Unicode (no lone surrogates)")
    return text
