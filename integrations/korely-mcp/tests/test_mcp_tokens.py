"""The token file: its rules, the verifier over it, and the commands that make tokens."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from korely_mcp import Caller, CallerToken, TokenFile, hash_token, new_token, read_token_file
from korely_mcp.cli import main
from korely_memory import Identity, InvalidRequest

from .servers import GIULIA, token_entry, write_tokens

TOKEN = "kmcp_" + "a" * 43
GOOD = token_entry("giulia-laptop", TOKEN, GIULIA, "giulia-laptop")


def written(tmp_path: Path, content: Any) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.mark.parametrize(
    ("content", "field", "says"),
    [
        ("{not json", "tokens", "cannot read the token file"),
        ({"tokens": GOOD}, "tokens", 'must hold an object {"tokens": [...]}'),
        ({"tokens": [], "extra": 1}, "tokens", 'must hold an object {"tokens": [...]}'),
        ({"tokens": ["abc"]}, "tokens[0]", "must be an object with name, sha256"),
        ({"tokens": [{**GOOD, "role": "admin"}]}, "tokens[0]", "has unknown role"),
        ({"tokens": [{k: v for k, v in GOOD.items() if k != "user"}]}, "tokens[0]", "lacks user"),
        ({"tokens": [{**GOOD, "sha256": "abc"}]}, "tokens[0].sha256", "must be 64 hex digits"),
        ({"tokens": [{**GOOD, "account": "ac/me"}]}, "tokens[0].account", "must not contain '/'"),
        ({"tokens": [{**GOOD, "reader": None}]}, "tokens[0].reader", "is required"),
        ({"tokens": [{**GOOD, "admin": "yes"}]}, "tokens[0].admin", "must be true or false"),
        ({"tokens": [{**GOOD, "any_user": True}]}, "tokens[0].user", "must be null"),
        ({"tokens": [{**GOOD, "user": None, "admin": True}]}, "tokens[0].user", "must name"),
        ({"tokens": [{**GOOD, "name": ""}]}, "tokens[0].name", "must not be empty"),
        ({"tokens": [GOOD, {**GOOD, "name": "other"}]}, "tokens[1].sha256", "repeats"),
        (
            {"tokens": [GOOD, {**GOOD, "sha256": hash_token("other")}]},
            "tokens[1].name",
            "repeats 'giulia-laptop'",
        ),
    ],
)
def test_a_bad_token_file_is_refused_naming_the_entry_and_field(
    tmp_path: Path, content: Any, field: str, says: str
) -> None:
    path = written(tmp_path, content)
    with pytest.raises(InvalidRequest) as caught:
        read_token_file(path)
    assert caught.value.field == field
    assert says in str(caught.value)
    assert str(path) in str(caught.value)
    with pytest.raises(InvalidRequest):
        TokenFile(path)


def test_a_missing_token_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="cannot read the token file"):
        TokenFile(tmp_path / "nowhere.json")


def test_an_entry_maps_its_hash_to_a_caller_and_may_have_no_user(tmp_path: Path) -> None:
    team = Identity("acme", None, "night-shift")
    upper = {**token_entry("team", "kmcp_team", team, "night-bot")}
    upper["sha256"] = upper["sha256"].upper()
    callers = read_token_file(written(tmp_path, {"tokens": [GOOD, upper]}))
    assert callers == {
        hash_token(TOKEN): Caller(GIULIA, "giulia-laptop", "giulia-laptop"),
        hash_token("kmcp_team"): Caller(team, "night-bot", "team"),
    }


async def test_the_verifier_vouches_for_listed_tokens_only_and_follows_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tokens.json"
    write_tokens(path, [GOOD])
    verifier = TokenFile(path)
    vouched = await verifier.verify_token(TOKEN)
    assert isinstance(vouched, CallerToken)
    assert vouched.caller == Caller(GIULIA, "giulia-laptop", "giulia-laptop")
    assert (vouched.client_id, vouched.subject) == ("giulia-laptop", "giulia-laptop")
    assert vouched.token != TOKEN  # the secret itself is not kept
    assert await verifier.verify_token(TOKEN + "x") is None
    assert await verifier.verify_token("") is None

    other = "kmcp_" + "b" * 43
    write_tokens(path, [token_entry("phone", other, GIULIA, "phone")])
    assert await verifier.verify_token(TOKEN) is None
    assert await verifier.verify_token(other) is not None
    path.write_text("{")
    assert await verifier.verify_token(other) is None
    path.unlink()
    assert await verifier.verify_token(other) is None
    write_tokens(path, [GOOD])
    assert await verifier.verify_token(TOKEN) is not None
    assert len(verifier) == 1


def test_new_tokens_are_random_and_hashed_with_sha256() -> None:
    token = new_token()
    assert token.startswith("kmcp_") and len(token) >= 40
    assert token != new_token()
    assert hash_token(token) == hashlib.sha256(token.encode()).hexdigest()


def test_the_command_makes_a_token_and_its_hash() -> None:
    script = shutil.which("korely-mcp", path=str(Path(sys.executable).parent))
    assert script is not None, "the korely-mcp console script is installed"
    made = subprocess.run([script, "new-token"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    lines = dict(line.split(maxsplit=1) for line in made.stdout.splitlines())
    assert lines["sha256:"] == hash_token(lines["token:"])


def test_the_command_hashes_a_token_read_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(TOKEN + "\n"))
    assert main(["hash-token"]) == 0
    assert capsys.readouterr().out == hash_token(TOKEN) + "\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["hash-token"]) == 2
    assert "hash-token reads a token from stdin" in capsys.readouterr().err


async def test_a_token_file_others_may_write_is_refused_at_start_and_on_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens.json"
    write_tokens(path, [GOOD])
    path.chmod(0o664)
    with pytest.raises(InvalidRequest) as caught:
        TokenFile(path)
    assert caught.value.field == "tokens"
    assert f"{path} may be written by group or others (mode 0664)" in str(caught.value)
    assert f"chmod go-w {path}" in str(caught.value)

    path.chmod(0o600)
    verifier = TokenFile(path)
    assert await verifier.verify_token(TOKEN) is not None
    path.chmod(0o602)  # no content changed: the mode alone
    assert await verifier.verify_token(TOKEN) is None
    assert "may be written by group or others (mode 0602)" in caplog.text
    path.chmod(0o644)  # others may read it: a hash lets nobody in
    assert await verifier.verify_token(TOKEN) is not None
