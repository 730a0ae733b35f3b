"""The tests' program runner runs a script as ``python SCRIPT`` would, and no less guarded: what
the examples' and documents' tests conclude from it holds for a program of its own."""

from __future__ import annotations

from pathlib import Path

from .processes import run_program

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
