"""Processes for the tests: the ones that race each other, and the example programs and the
documents' code blocks, which run as programs of their own. Each is forked from one server per
test process, which imported the engine, loaded its tokenizer and imported both frameworks once.

A process started with "spawn", or a new ``python``, spends one to two seconds of CPU importing
the same; over the hundred or so processes the tests start on two cores, that was a minute of
the suite. A process forked from the server has nothing of the test that started it (no engine,
no connection, no fixture): what it needs comes as arguments, as with "spawn". ``PROCESSES``
gives it the server's environment, taken when the first process starts; ``run_program`` gives a
program the environment, directory and input it is given.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import runpy
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

import tiktoken

from korely_memory._tokens import OFFLINE_ENCODING

PROCESSES = multiprocessing.get_context("forkserver")
# The server imports these once: this module (the engine, its tokenizer), what the racing
# processes' test modules import, and what the example programs and code blocks import.
PROCESSES.set_forkserver_preload(
    [
        __name__,
        "pytest",
        "langchain.agents",
        "langchain_korely",
        "langgraph.checkpoint.memory",
        "llama_index.core.agent.workflow",
        "llama_index.core.chat_engine",
        "llama_index.core.llms.mock",
        "llama_index.memory.korely",
        "mcp",
    ]
)

# tiktoken keeps the encodings it loaded: every process forked from the server has it.
tiktoken.get_encoding(OFFLINE_ENCODING)

# The tests' network guard is the root conftest's ``local_only``.
CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def run_program(
    script: Path,
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    hide: Sequence[str] = (),
    sockets: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python SCRIPT ARGS`` as a user would run it in ``cwd``, with ``env`` (default: this
    process's) and ``input`` on its standard input: its exit code, output and errors.

    It runs under the tests' network guard: a connection off this machine raises. With
    ``sockets=False`` no socket may connect and no name resolves. The modules in ``hide`` cannot
    be imported, as when they are not installed.
    """
    with tempfile.TemporaryDirectory(prefix="korely-program-") as streams:
        paths = [os.path.join(streams, name) for name in ("stdin", "stdout", "stderr")]
        for path, text in zip(paths, (input or "", "", ""), strict=True):
            Path(path).write_text(text, encoding="utf-8")
        argv = [str(script), *args]
        proc = PROCESSES.Process(
            target=_run,
            args=(argv, str(cwd), dict(os.environ if env is None else env), paths, hide, sockets),
        )
        proc.start()
        proc.join(timeout)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
            raise subprocess.TimeoutExpired(argv, timeout)
        out, err = (Path(p).read_text(encoding="utf-8") for p in paths[1:])
    return subprocess.CompletedProcess(argv, proc.exitcode, out, err)


def _run(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    paths: list[str],
    hide: Sequence[str],
    sockets: bool,
) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, (path, flags) in enumerate(
        zip(paths, (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY), strict=True)
    ):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)  # noqa: SIM115
    for name in hide:
        sys.modules[name] = None  # type: ignore[assignment]
    if sockets:
        local_only = runpy.run_path(str(CONFTEST))["local_only"]
        socket.socket.connect = local_only(socket.socket.connect)  # type: ignore[method-assign]
    else:
        socket.socket.connect = socket.socket.connect_ex = _refuse  # type: ignore[assignment]
        socket.create_connection = socket.getaddrinfo = _refuse  # type: ignore[assignment]
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as ``python SCRIPT`` sets it
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        raise SystemExit(1) from None
    finally:
        # As the interpreter does when a program ends: wait for its threads, then run its exit
        # functions.
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()


def _refuse(*args: object, **kwargs: object) -> None:
    raise OSError("this program runs without a network")
