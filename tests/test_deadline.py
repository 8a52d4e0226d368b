"""The HTTP client's deadline for a whole reply runs on a timer thread; where no thread can be had
(a container's pids limit), the request still runs, bounded by its socket timeouts."""
from fakeapi import answer
from test_faults import no_traceback


def no_threads(tmp_path):
    """Environment for a child that can start no thread at all, timers included."""
    site = tmp_path / "no_threads"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import threading\n"
        "def _refuse(*args, **kw):\n"
        "    raise RuntimeError(\"can't start new thread\")\n"
        "threading._start_new_thread = _refuse\n")
    return {"PYTHONPATH": str(site)}


def test_no_thread_for_the_deadline_still_answers(run, fake, tmp_path):
    fake.add(answer("answered without a timer"))
    r = run("-p", "hi", env=no_threads(tmp_path))
    no_traceback(r.stderr)
    assert (r.returncode, r.stdout) == (0, "answered without a timer\n"), r.stderr
    assert len(fake.chat_requests()) == 1


def test_no_thread_for_an_mcp_server_fails_that_server_not_the_run(run, fake, tmp_path):
    import json
    import sys
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"f": {"command": sys.executable, "args": ["-V"]}}}))
    fake.add(answer("answered without MCP"))
    r = run("-p", "hi", "--mcp-config", str(config), env=no_threads(tmp_path))
    no_traceback(r.stderr)
    assert (r.returncode, r.stdout) == (0, "answered without MCP\n"), r.stderr
    assert "MCP server f: failed: can't start new thread" in r.stderr


def test_no_thread_to_ask_a_server_its_window_still_answers(run, fake, tmp_path):
    fake.add(answer("answered, the window a guess"))       # a long request: the window matters
    r = run("-p", "x " * 20000, env=dict(no_threads(tmp_path), GROK_CONTEXT_WINDOW=""))
    no_traceback(r.stderr)
    assert (r.returncode, r.stdout) == (0, "answered, the window a guess\n"), r.stderr
