"""The tests' program runner runs a script as ``python SCRIPT`` would, and no less guarded: what
the examples' and documents' tests conclude from it holds for a program of its own. A command
line made by ``command`` runs its program as ``python ARGS`` would, for whatever starts it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from .processes import command, run_program

PROGRAM = """
import atexit, os, sys, threading, time
atexit.register(lambda: print("at exit", flush=True))
threading.Thread(target=lambda: (time.sleep(0.2), print("thread", flush=True))).start()
print(sys.argv[1:], os.getcwd() == os.environ["WHERE"], sys.path[0] == os.environ["HERE"])
print(input(), file=sys.stderr)
sys.exit(int(os.environ["CODE"]))
"""


def test_a_program_gets_its_arguments_directory_environment_input_and_exit_code(
    tmp_path: Path,
) -> None:
    script, cwd = tmp_path / "bin" / "program.py", tmp_path / "work"
    script.parent.mkdir()
    cwd.mkdir()
    script.write_text(PROGRAM)
    env = {"WHERE": str(cwd), "HERE": str(script.parent), "CODE": "3"}
    done = run_program(script, "a", "b c", cwd=cwd, env=env, input="typed\n")
    assert done.returncode == 3
    # Its threads end, then its exit functions run, as when the interpreter ends.
    assert done.stdout == "['a', 'b c'] True True\nthread\nat exit\n"
    assert done.stderr == "typed\n"


def test_a_program_that_raises_fails_with_its_traceback(tmp_path: Path) -> None:
    (tmp_path / "raises.py").write_text("raise ValueError('no such thing')\n")
    done = run_program(tmp_path / "raises.py", cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "ValueError: no such thing" in done.stderr


def test_a_program_may_not_reach_off_this_machine_nor_import_what_is_hidden(
    tmp_path: Path,
) -> None:
    (tmp_path / "reach.py").write_text(
        "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)\n"
    )
    assert "a test tried to reach" in run_program(tmp_path / "reach.py", cwd=tmp_path).stderr
    (tmp_path / "local.py").write_text(
        "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n"
    )
    offline = run_program(tmp_path / "local.py", cwd=tmp_path, sockets=False)
    assert "this program runs without a network" in offline.stderr
    (tmp_path / "hidden.py").write_text("import langchain_korely\n")
    hidden = run_program(tmp_path / "hidden.py", cwd=tmp_path, hide=["langchain_korely"])
    assert hidden.returncode == 1 and "ModuleNotFoundError" in hidden.stderr


def test_a_command_runs_its_program_with_the_streams_directory_and_environment_it_is_given(
    tmp_path: Path,
) -> None:
    """What an MCP client does with a server's command line: start it with pipes, its own
    environment and working folder, and read its exit status."""
    script, cwd = tmp_path / "bin" / "program.py", tmp_path / "work"
    script.parent.mkdir()
    cwd.mkdir()
    script.write_text(PROGRAM)
    env = {"WHERE": str(cwd), "HERE": str(script.parent), "CODE": "3"}
    done = subprocess.run(
        command(str(script), "a", "b c"),
        cwd=cwd,
        env=env,
        input="typed\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3
    assert done.stdout == "['a', 'b c'] True True\nthread\nat exit\n"
    assert done.stderr == "typed\n"
    (cwd / "module_here.py").write_text("import sys; print(sys.argv[1:]); sys.exit(4)\n")
    as_module = subprocess.run(
        command("-m", "module_here", "x"), cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert (as_module.returncode, as_module.stdout) == (4, "['x']\n")


def test_a_command_s_program_and_its_launcher_end_together(tmp_path: Path) -> None:
    """A program killed by a signal ends its launcher by the same signal; a launcher killed
    first stops its program."""
    (tmp_path / "wait.py").write_text("import sys, time\nprint('up', flush=True)\ntime.sleep(60)\n")
    pid_file = tmp_path / "program.pid"
    launcher = subprocess.Popen(
        command(str(tmp_path / "wait.py"), pid_file=pid_file),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert launcher.stdout is not None
    assert launcher.stdout.readline() == "up\n"
    program = int(pid_file.read_text())
    assert program != launcher.pid
    os.kill(program, signal.SIGKILL)
    assert launcher.wait(30) == -signal.SIGKILL
    launcher.stdout.close()

    launcher = subprocess.Popen(
        command(str(tmp_path / "wait.py"), pid_file=pid_file), stdout=subprocess.PIPE, text=True
    )
    assert launcher.stdout is not None
    assert launcher.stdout.readline() == "up\n"
    program = int(pid_file.read_text())
    launcher.kill()
    launcher.wait(30)
    launcher.stdout.close()
    deadline = time.monotonic() + 30
    while _alive(program):
        assert time.monotonic() < deadline, "the program outlived its launcher"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
