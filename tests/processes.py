"""Processes for the tests: the ones that race each other, and the example programs and the
documents' code blocks, which run as programs of their own. Each is forked from one server per
test process, which imported the engine, loaded its tokenizer and imported both frameworks once.

A process started with "spawn", or a new ``python``, spends one to two seconds of CPU importing
the same; over the hundred or so processes the tests start on two cores, that was a minute of
the suite. A process forked from the server has nothing of the test that started it (no engine,
no connection, no fixture): what it needs comes as arguments, as with "spawn". ``PROCESSES``
gives it the server's environment, taken when the first process starts; ``run_program`` gives a
program the environment, directory and input it is given; ``command`` is the command line of a
program that something else starts (an MCP client starts its server from a command line).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import runpy
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from multiprocessing import reduction
from pathlib import Path
from typing import Any

from korely_memory._text._tokens import cl100k

PROCESSES = multiprocessing.get_context("forkserver")
# The server imports these once: this module (the engine, its tokenizer), what the racing
# processes' test modules import, what the example programs and code blocks import, and the two
# servers' commands.
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
        "korely_mcp.cli",
        "korely_server.cli",
    ]
)

# The engine keeps the encoding it loaded: every process forked from the server has it.
cl100k()

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


def command(*args: str, pid_file: Path | None = None) -> list[str]:
    """The command line of ``python ARGS`` (``-m MODULE ...`` or ``SCRIPT ...``) for something
    that starts a program itself, as an MCP client starts its server: it runs forked from the
    server, as ``run_program`` runs one, under the tests' network guard, and writes its process
    id to ``pid_file`` first when one is given.

    The command is a launcher that starts in milliseconds: it hands its standard streams, working
    folder, environment and arguments to this test process, which forks the program from the
    server; the launcher ends with the program's exit status (killed by a signal: by the same
    signal), and the program is stopped if the launcher is killed first.
    """
    pid = [] if pid_file is None else ["--pid-file", str(pid_file)]
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, _launch_address(), *pid, *args]


# Python without its site packages, so that it starts in milliseconds.
_LAUNCHER = """\
import json, os, signal, socket, struct, sys
service = socket.socket(socket.AF_UNIX)
service.connect(sys.argv[1])
pid_file = sys.argv[3] if sys.argv[2] == "--pid-file" else None
argv = sys.argv[2:] if pid_file is None else sys.argv[4:]
request = json.dumps([argv, os.getcwd(), dict(os.environ), pid_file]).encode()
socket.send_fds(service, [struct.pack("!Q", len(request)) + request], [0, 1, 2])
answer = service.recv(8)
status = struct.unpack("!q", answer)[0] if len(answer) == 8 else 1
if status < 0:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the one signal Python handles itself
    os.kill(os.getpid(), -status)
sys.exit(status)
"""

_LAUNCH_ADDRESS: list[str] = []
_LAUNCH_LOCK = threading.Lock()


def _launch_address() -> str:
    """Where this test process takes requests from launchers; it starts listening at the first."""
    with _LAUNCH_LOCK:
        if not _LAUNCH_ADDRESS:
            folder = tempfile.mkdtemp(prefix="korely-launch-")
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(os.path.join(folder, "socket"))
            listener.listen()
            threading.Thread(target=_take_launches, args=(listener,), daemon=True).start()
            _LAUNCH_ADDRESS.append(listener.getsockname())
        return _LAUNCH_ADDRESS[0]


def _take_launches(listener: socket.socket) -> None:
    while True:
        launcher, _ = listener.accept()
        threading.Thread(target=_launch, args=(launcher,), daemon=True).start()


def _launch(launcher: socket.socket) -> None:
    """Run what ``launcher`` asks, with its streams, until it ends; tell the launcher its status."""
    with launcher:
        header, fds, _, _ = socket.recv_fds(launcher, 8, 3)
        try:
            size = struct.unpack("!Q", header)[0]
            request = b""
            while len(request) < size:
                request += launcher.recv(size - len(request))
            argv, cwd, env, pid_file = json.loads(request)
            streams = [_Inherited(fd) for fd in fds]
            proc = PROCESSES.Process(
                target=_run, args=(argv, cwd, env, streams, (), True, pid_file)
            )
            proc.start()
        finally:
            for fd in fds:
                os.close(fd)
        # The launcher sends nothing more: readable means it is gone (killed), and so must be
        # the program.
        if proc.sentinel not in multiprocessing.connection.wait([proc.sentinel, launcher]):
            proc.terminate()
        proc.join()
        with contextlib.suppress(OSError):
            launcher.sendall(struct.pack("!q", proc.exitcode))


class _Inherited:
    """A file descriptor of this process that a forked program inherits (as an ``int``)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return _detach, (reduction.DupFd(self.fd),)


def _detach(inherited: Any) -> int:
    fd: int = inherited.detach()
    return fd


def _run(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    streams: Sequence[str | int],
    hide: Sequence[str],
    sockets: bool,
    pid_file: str | None = None,
) -> None:
    """Run ``argv`` (``[SCRIPT, ...]`` or ``["-m", MODULE, ...]``) as ``python`` would, its
    standard streams read from and written to ``streams`` (paths, or descriptors it inherited)."""
    if pid_file is not None:
        Path(pid_file).write_text(str(os.getpid()))
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, (stream, flags) in enumerate(
        zip(streams, (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY), strict=True)
    ):
        opened = os.open(stream, flags) if isinstance(stream, str) else stream
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
    try:
        if argv[0] == "-m":
            sys.argv = ["-m", *argv[2:]]  # run_module puts the module's path first
            sys.path[0] = os.getcwd()  # as ``python -m`` sets it
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = argv
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as ``python SCRIPT`` does
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
