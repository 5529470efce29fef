"""A warm Python for tests that run many short scripts: one interpreter that
has imported the heavy modules (torch, ExecuTorch's exporter: about 15 s of
imports each time on a small machine) forks a fresh child for every script.

Each script still runs as `python script.py` would run it: in its own
process, with its own `__main__` namespace (a module it does not import is
not defined for it, whatever the parent imported), its working directory
and argv, stdout and stderr captured apart, and its exit status (an uncaught
exception prints its traceback and exits 1; sys.exit's code is kept)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

_SERVER = r"""
import json, os, runpy, sys, traceback
for name in sys.argv[1:]:
    __import__(name)
sys.stdout.write("ready\n")
sys.stdout.flush()
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.chdir(req["cwd"])
            sys.argv = [req["script"], *req["args"]]
            sys.path[0] = os.path.dirname(os.path.abspath(req["script"]))
            runpy.run_path(req["script"], run_name="__main__")
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
    sys.stdout.flush()
"""


class WarmPython:
    """`run(script, cwd)` runs a script in a child forked from an interpreter
    that imported `preload` once; close() ends that interpreter."""

    def __init__(self, preload: list[str], env: dict[str, str]) -> None:
        self._proc = subprocess.Popen([sys.executable, "-c", _SERVER, *preload], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
        assert self._proc.stdout is not None
        first = self._proc.stdout.readline()
        if first != "ready\n":
            self.close()
            raise RuntimeError(f"the warm interpreter did not start (importing {preload}): {first!r}")

    def run(self, script: Path, cwd: Path, args: list[str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Runs `script` as `python script args...` in `cwd`: its exit status,
        stdout and stderr. A script still running after `timeout` seconds
        ends the warm interpreter (and the script) and raises TimeoutError."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with tempfile.TemporaryDirectory() as d:
            out, err = Path(d) / "stdout", Path(d) / "stderr"
            req = {"script": str(script), "args": args or [], "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
            self._proc.stdin.write(json.dumps(req) + "\n")
            self._proc.stdin.flush()
            if not select.select([self._proc.stdout], [], [], timeout)[0]:
                os.killpg(self._proc.pid, signal.SIGKILL)  # the server and the script it forked
                self._proc.wait()
                raise TimeoutError(f"{script} ran for more than {timeout} s")
            reply = self._proc.stdout.readline()
            if not reply:
                raise RuntimeError(f"the warm interpreter exited ({self._proc.wait()}) running {script}")
            rc = json.loads(reply)["rc"]
            return subprocess.CompletedProcess([str(script), *(args or [])], rc, out.read_text(), err.read_text())

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout:
            self._proc.stdout.close()

    def __enter__(self) -> WarmPython:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
