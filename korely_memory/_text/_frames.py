"""Text from outside the application, made unable to open, close or imitate the block's frame.

The block reaches a model inside a frame: a ``<memory>`` section (LlamaIndex adds
``<korely>`` inside it), under headers only the block writes. Text that is not
the application's (what a user typed, what a tool returned, a stored fact or
excerpt) is passed through ``neutralise`` wherever it reaches a prompt:

- a tag of the frame's names, opening or closing, in any case, with spaces,
  attributes or invisible characters inside, with look-alike angle brackets
  (``＜``, ``‹``, ``〈``, ...) or look-alike letters (fullwidth, mathematical,
  Cyrillic ``е``, ``о``, ...) has its brackets written as ``&lt;`` and ``&gt;``,
  which no reader takes for a tag;
- a line that imitates a line only the block writes (one of its headers, its
  opening note), however it is spelled or marked up, is escaped with a leading
  backslash, which Markdown reads as literal text, not a heading.

Everything else is left as it was, so a user's HTML or code keeps its tags.
Pure: no I/O, nothing kept between calls.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

FRAME_TAGS: tuple[str, ...] = ("memory", "korely")
"""The tag names a block is framed with, by the adapters of this project."""

_OPENING = "<＜﹤‹〈〈⟨❬❮˂ᐸ«《⧼⦉⦓⸦"
_CLOSING = ">＞﹥›〉〉⟩❭❯˃ᐳ»》⧽⦊⦔⸧"
# Letters that look like the Latin ones of the frame's names, after NFKC and casefold.
_LOOKALIKES = {
    **dict.fromkeys("аɑα", "a"),
    **dict.fromkeys("еєёэҽ℮ε", "e"),
    **dict.fromkeys("кκқ", "k"),
    **dict.fromkeys("ӏιǀ|1ⅼ", "l"),
    **dict.fromkeys("мϻ", "m"),
    **dict.fromkeys("оοσ০٥ჿ0", "o"),
    **dict.fromkeys("гṛ", "r"),
    **dict.fromkeys("уүγ", "y"),
}
_MAP = str.maketrans(
    {**_LOOKALIKES, **dict.fromkeys(_OPENING, "<"), **dict.fromkeys(_CLOSING, ">")}
)
_ANGLES = re.compile(f"[{re.escape(_OPENING)}]")
_INVISIBLE = ("Cf", "Mn", "Me")  # format characters (zero-width, bidi), combining marks
_ENDS = "<\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where a tag can no longer end
_LT, _GT = "&lt;", "&gt;"
_TAG_END = 200  # skeleton characters looked at for the end of a tag


def neutralise(text: str, tags: Sequence[str] = FRAME_TAGS, lines: Iterable[str] = ()) -> str:
    """``text`` with every frame tag of ``tags`` and every line imitating one of ``lines`` made
    harmless; unchanged when it holds none (the common case costs one scan).

    Args:
        text: Text from outside the application.
        tags: The frame's tag names (lower-case letters, digits, ``_ . -``).
        lines: The lines only the block writes (its headers, its note's opening words).
    """
    read = None
    if _ANGLES.search(text):
        read = _read(text)
        if _tag_pattern(tuple(tags)).search(read):
            text = _without_tags(text, tuple(tags))
    wanted = _imitations(tuple(lines))
    if wanted and _might_imitate(read if read is not None else _read(text), wanted):
        text = "\n".join(
            "\\" + line if _imitates(line, wanted) else line for line in text.split("\n")
        )
    return text


def _read(text: str) -> str:
    """Nearly ``_skeleton(text)[0]``, at C speed: for a first look that never misses what the
    skeleton would find (look-alikes folded, invisible characters dropped)."""
    if text.isascii():
        return text.lower().translate(_MAP)
    visible = unicodedata.normalize("NFKD", text).translate(_invisible())
    return visible.casefold().translate(_MAP)


@lru_cache(maxsize=1)
def _invisible() -> dict[int, None]:
    """Every format character and combining mark (what ``_skeleton`` drops), to delete."""
    found = dict.fromkeys(c for c in range(0x10000) if unicodedata.category(chr(c)) in _INVISIBLE)
    found.update(dict.fromkeys(range(0xE0000, 0xE0080)))  # tag characters
    found.update(dict.fromkeys(range(0xE0100, 0xE01F0)))  # variation selectors
    found.update(
        dict.fromkeys(
            c for c in range(0x1D165, 0x1D1AE) if unicodedata.category(chr(c)) in _INVISIBLE
        )
    )
    return found


def _skeleton(text: str) -> tuple[str, list[int]]:
    """What ``text`` reads as, folded: compatibility forms and accented letters decomposed,
    invisible characters and combining marks dropped, look-alikes mapped to what they imitate,
    case folded; and for each of its characters, where it stands in ``text``."""
    chars: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            folded = ch.lower().translate(_MAP)
        else:
            decomposed = unicodedata.normalize("NFKD", ch)  # compatibility forms, accents apart
            visible = "".join(c for c in decomposed if unicodedata.category(c) not in _INVISIBLE)
            folded = visible.casefold().translate(_MAP)
        for f in folded:
            chars.append(f)
            where.append(i)
    return "".join(chars), where


@lru_cache(maxsize=16)
def _tag_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(t.lower()) for t in sorted(tags, key=len, reverse=True))
    return re.compile(rf"<[\s/]*(?:{names})(?![a-z0-9_.:-])")


def _without_tags(text: str, tags: tuple[str, ...]) -> str:
    skeleton, where = _skeleton(text)
    swaps: dict[int, str] = {}
    for found in _tag_pattern(tags).finditer(skeleton):
        swaps[where[found.start()]] = _LT
        end = found.end()
        for j in range(end, min(len(skeleton), end + _TAG_END)):
            if skeleton[j] in _ENDS:
                break
            if skeleton[j] == ">":
                swaps[where[j]] = _GT
                break
    if not swaps:
        return text
    return "".join(swaps.get(i, ch) for i, ch in enumerate(text))


@lru_cache(maxsize=16)
def _imitations(lines: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(w for w in (_words(line) for line in lines) if w)


def _words(text: str) -> str:
    """The words of ``text`` as a reader takes them: look-alikes folded, markup and punctuation
    dropped, one space between words."""
    return " ".join(re.sub(r"[\W_]+", " ", _skeleton(text)[0]).split())


_PREFIX_WORDS = 4  # a line of the block this long is imitated by a line that begins like it


def _imitates(line: str, wanted: tuple[str, ...]) -> bool:
    said = _words(line)
    return any(
        said == w or (w.count(" ") + 1 >= _PREFIX_WORDS and said.startswith(w + " "))
        for w in wanted
    )


def _might_imitate(read: str, wanted: tuple[str, ...]) -> bool:
    """A quick look at a text as ``_read`` gives it: False only when no line of it can imitate
    one of ``wanted``."""
    lowered = " ".join(re.sub(r"[\W_]+", " ", read).split())
    return any(w in lowered for w in wanted)
