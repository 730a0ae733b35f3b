"""Processes for the tests that race them: each a fresh interpreter of its own, with no database
connection, forked from one server per test process.

The server imports the engine and loads its tokenizer once; a process started with "spawn"
spends about a second of CPU on the same, which, over the hundred or so processes the tests
start on two cores, is half a minute of the suite. A process forked from the server has
nothing of the test that started it (no engine, no connection, no fixture): what it needs
comes as arguments, as with "spawn". Its environment is the server's, taken when the first
process starts.
"""

from __future__ import annotations

import multiprocessing

import pytest  # noqa: F401  (imported once in the server, for the test modules the targets live in)
import sqlalchemy  # noqa: F401
import tiktoken

import korely_memory  # noqa: F401
from korely_memory._tokens import OFFLINE_ENCODING

PROCESSES = multiprocessing.get_context("forkserver")
PROCESSES.set_forkserver_preload([__name__])

# tiktoken keeps the encodings it loaded: every process forked from the server has it.
tiktoken.get_encoding(OFFLINE_ENCODING)
