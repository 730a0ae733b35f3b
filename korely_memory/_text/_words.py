"""How text becomes the words it is found by, the same way for what is stored and what is asked.

``Words("english")`` folds case (Unicode casefolding) and accents (``Città`` is
``citta``), drops the language's stop words (so ``the`` and ``where`` never
crowd an index or a score) and stems what is left with the Snowball stemmer of
that language (``lives``, ``living`` and ``lived`` are all ``live``).
``Words(None)`` only folds. The word index, the block's relevance and
``search`` all see words through the engine's one ``Words``, and the database
records which language its index was written in, so that index and queries
always agree.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable

import Stemmer

from .._values._types import Fact

DEFAULT_LANGUAGE = "english"
LANGUAGES = frozenset(Stemmer.algorithms())
MAX_WORD = 64  # characters kept of one word

_WORD = re.compile(r"\w+", re.UNICODE)

# Snowball's English stop words, as the tokenizer splits them (contractions lose their apostrophe).
ENGLISH_STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can cannot could d did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in into
    is it its itself ll let m me more most my myself no nor not of off on once only or other
    ought our ours ourselves out over own re s same shall she should so some such t than that
    the their theirs them themselves then there these they this those through to too under
    until up ve very was we were what when where which while who whom why will with would you
    your yours yourself yourselves
    """.split()  # noqa: SIM905 (a word list reads best as words)
)
STOP_WORDS = {"english": ENGLISH_STOP_WORDS, "porter": ENGLISH_STOP_WORDS}


def check_language(language: str | None) -> str | None:
    """A stemming language the engine knows, or None; ``ValueError`` otherwise."""
    if language is None or language in LANGUAGES:
        return language
    raise ValueError(f"must be None or one of {', '.join(sorted(LANGUAGES))}, got {language!r}")


def fold(text: str) -> str:
    """Lower case without accents: ``Città`` and ``CITTA`` are the same word."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    if folded.isascii():
        return folded
    return "".join(ch for ch in folded if not unicodedata.combining(ch))


def fact_text(fact: Fact) -> str:
    """What a fact is found by: its key's words and its content."""
    return findable(fact.key, fact.content)


def findable(key: str, content: str) -> str:
    """The text a fact with this key and content is found by, in the index and in relevance."""
    return f"{key.replace('-', ' ')} {content}"


class Words:
    """The words of a text as the engine finds and scores it, in one language."""

    def __init__(self, language: str | None = DEFAULT_LANGUAGE) -> None:
        self.language = check_language(language)
        self._stop = STOP_WORDS.get(language or "", frozenset())
        self._local = threading.local()  # a Stemmer object must not be shared between threads

    def __call__(self, text: str) -> list[str]:
        """Every word of ``text``, in order and with repeats, folded, stemmed, no stop words."""
        found = [w[:MAX_WORD] for w in _WORD.findall(fold(text)) if w not in self._stop]
        if self.language is None or not found:
            return found
        return self._stemmer().stemWords(found)  # type: ignore[no-any-return]

    def distinct(self, text: str, limit: int | None = None) -> list[str]:
        """The distinct words of ``text``, first seen first, at most ``limit`` of them."""
        found = list(dict.fromkeys(self(text)))
        return found if limit is None else found[:limit]

    def of_all(self, texts: Iterable[str]) -> set[str]:
        """Every distinct word of several texts."""
        found: set[str] = set()
        for text in texts:
            found.update(self(text))
        return found

    def _stemmer(self) -> Stemmer.Stemmer:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            # Without the stemmer's own cache of words: it would keep an erased person's words
            # for the life of the thread, out of reach of an erasure.
            stemmer = self._local.stemmer = Stemmer.Stemmer(self.language, 0)
        return stemmer
