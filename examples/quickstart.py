"""The story of korely-memory in one run, offline: record, correct, review, read.

    python examples/quickstart.py

Uses $KORELY_DATABASE_URL when set, else a fresh SQLite file in a temporary folder.
"""

from __future__ import annotations

import os
import tempfile

from korely_memory import Identity, MemoryEngine, Scope


def main() -> None:
    url = os.environ.get("KORELY_DATABASE_URL") or f"sqlite:///{tempfile.mkdtemp()}/quickstart.db"
    engine = MemoryEngine(url)

    giulia = Identity(account="acme", user="giulia", agent="support-copilot")
    marco = Identity(account="acme", user="marco", agent="support-copilot")
    anna = Identity(account="acme", user="anna", agent="support-copilot")  # an administrator
    engine.grant_admin("acme", "anna")

    # Monday: the agent learns where Giulia lives, and reads her context under its own name.
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    first = engine.get_context(giulia, "Where does Giulia live?", reader="support-bot")
    print("== Monday's block ==")
    print(first.text)

    # Tuesday: another conversation learns she moved. Correcting keeps the history.
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    print("\n== History of home-city ==")
    for version in engine.history(giulia, "home-city"):
        ended = f"ended: {version.end_cause}" if version.end_cause else "true now"
        print(f"{version.id}: {version.content} ({ended})")

    # Marco states something about the whole account: a proposal until an administrator confirms it.
    proposal = engine.remember(
        marco, "loyalty-program", "This account runs a channel loyalty program", scope=Scope.ACCOUNT
    )
    print(f"\n== Review queue: {[f.content for f in engine.proposals('acme')]}")
    engine.confirm(anna, proposal.id)
    print(f"== Anna confirmed fact {proposal.id}; Giulia now sees it too ==")

    # Wednesday: the agent reads again; it is told once what changed since Monday.
    block = engine.get_context(
        giulia, "Where does Giulia live?", reader="support-bot", token_budget=300
    )
    print("\n== Wednesday's block ==")
    print(block.text)
    shown = f"{len(block.facts)} facts shown, {block.omitted} left out"
    print(f"\n({block.tokens} tokens of 300; {shown})")
    engine.close()


if __name__ == "__main__":
    main()
