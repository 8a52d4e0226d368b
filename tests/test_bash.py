"""The bash tool's handling of a process, with faked processes (pytest-subprocess): output, exit
status, timeouts, huge output. Signals and process groups are tested on real processes in
test_engine.py and test_faults.py."""
import os
import signal
import threading
import types

import pytest

from conftest import load_grok

g = load_grok("grok_bash_test")
REAL_KILL_GROUP = g.kill_group
LAST = []          # the last faked process killed


@pytest.fixture(autouse=True)
def no_real_signals(monkeypatch):
    """A faked process has a made-up pid: kill it through its fake, never with os.killpg."""
    def kill(proc):
        LAST[:] = [proc]
        proc.kill()
    monkeypatch.setattr(g, "kill_group", kill)
    monkeypatch.setattr(g.Lifeline, "update", lambda add=None: None)    # no watchdog for a made-up process


def ctx(timeout=30, cancel=False, cwd="."):
    """What tool_bash gets to run a call."""
    event = threading.Event()
    if cancel:
        event.set()
    return g.ToolContext(cwd, None, timeout, set(), dict(os.environ), event, None, None, None)


def bash(fp, command, timeout=30, cancel=False, **fake):
    fp.register([fp.any()], **fake)
    c = ctx(timeout, cancel)
    result = g.tool_bash({"command": command}, c)
    assert not c.procs          # the process is forgotten once it is done
    return result


def test_output_and_exit_status(fp):
    r = bash(fp, "make", stdout="building\nfailed: no rule\n", returncode=2)
    assert r.output == "building\nfailed: no rule\n\n[exit code 2]"
    assert not r.ok
    assert fp.call_count([fp.any()]) == 1


def test_success_keeps_the_output_as_is(fp):
    r = bash(fp, "cat notes", stdout=b"caf\xc3\xa9 \x00 done\n")
    assert r.output == "café \\0 done\n" and r.ok


def test_no_output_says_so(fp):
    r = bash(fp, "true")
    assert r.output == "(no output)" and r.ok


def test_huge_output_keeps_its_head_and_tail(fp):
    data = b"H" * g.OUTPUT_HEAD + b"m" * 500000 + b"T" * g.OUTPUT_TAIL
    r = bash(fp, "yes", stdout=data)
    head, note, tail = r.output.split("\n")
    assert head == "H" * g.OUTPUT_HEAD and tail == "T" * g.OUTPUT_TAIL
    assert note == "[... 500000 bytes omitted: output truncated ...]"


def test_a_command_that_runs_too_long_is_killed(fp):
    # The fake's wait() counts the timeouts it is given as time passed: 0.1 s of timeout is
    # reached on its clock, then the kill, and the fake ends after 0.3 s of real time.
    r = bash(fp, "sleep 100", timeout=0.1, wait=0.3)
    assert r.output == "\n[timed out after 0.1s: process group killed]" and not r.ok
    assert LAST[0].received_signals() == (signal.SIGKILL,)


def test_a_cancelled_command_is_killed(fp):
    r = bash(fp, "sleep 100", cancel=True, wait=0.1)
    assert r.output == "\n[cancelled by the user]" and not r.ok
    assert LAST[0].received_signals() == (signal.SIGKILL,)


def test_kill_group_never_signals_our_own_group_or_init(monkeypatch):
    sent = []
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: sent.append(pgid))
    for pid in (0, 1):
        REAL_KILL_GROUP(types.SimpleNamespace(pid=pid))
    assert sent == []
    REAL_KILL_GROUP(types.SimpleNamespace(pid=4242))
    assert sent == [4242]
