"""The days a memory is about, as words it is found by: the day it was kept, and the days its
words point to from there ("yesterday", "last Friday", "two weeks ago", "last month").

"When did she run the charity race?" is answered from a memory that says "last Sunday": the
block shows the day it was kept, and the index holds the day that Sunday was, so that a question
naming the date ("What did she do on 21 May 2023?") finds it. Only English is read; a memory in
another language is found by its own words alone.
"""

from __future__ import annotations

import datetime as dt
import re

ENGLISH = frozenset({"english", "porter"})

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)  # not strftime's: the locale's
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_COUNTS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "a couple of": 2,
    "two": 2,
    "three": 3,
    "a few": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_AGO = re.compile(
    r"\b(\d{1,2}|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
    r"\s+(day|week|month|year)s?\s+ago\b"
)
_LAST = re.compile(
    r"\b(?:last|past)\s+(night|week|weekend|month|year|" + "|".join(_WEEKDAYS) + r")\b"
)
_YESTERDAY = re.compile(r"\byesterday\b")


def days_words(kept_at: dt.datetime, text: str) -> str:
    """The day ``text`` was kept, and the days and months it points to, in words (none that
    would fall before year 1)."""
    found = [_day(kept_at)]
    for n, unit in _pointed(kept_at, text.casefold()):
        try:
            found.append(_back(kept_at, n, unit))
        except (OverflowError, ValueError):  # before year 1: no such day
            continue
    return " ".join(dict.fromkeys(found))


def _pointed(kept_at: dt.datetime, said: str) -> list[tuple[int, str]]:
    """How far back ``said`` points from ``kept_at``: (how many, "day" / "week" / ...)."""
    found: list[tuple[int, str]] = []
    if _YESTERDAY.search(said):
        found.append((1, "day"))
    for count, unit in _AGO.findall(said):
        found.append((int(count) if count.isdigit() else _COUNTS[count], unit))
    for what in _LAST.findall(said):
        if what in _WEEKDAYS:
            found.append(((kept_at.weekday() - _WEEKDAYS.index(what)) % 7 or 7, "day"))
        elif what == "night":
            found.append((1, "day"))
        elif what == "weekend":  # the Saturday before
            found.append(((kept_at.weekday() - 5) % 7 or 7, "day"))
        else:
            found.append((1, what))
    return found


def _day(at: dt.datetime) -> str:
    return f"{at.day} {_MONTHS[at.month - 1]} {at.year}"


def _back(at: dt.datetime, n: int, unit: str) -> str:
    if unit == "day":
        return _day(at - dt.timedelta(days=n))
    if unit == "week":
        return _day(at - dt.timedelta(weeks=n))
    if unit == "month":
        months = at.year * 12 + at.month - 1 - n
        if months < 12:
            raise ValueError("before year 1")
        return f"{_MONTHS[months % 12]} {months // 12}"
    if at.year - n < 1:
        raise ValueError("before year 1")
    return str(at.year - n)
