"""Limits that hold against any server and any model: cost, time, size, one process per
session, closed outputs, cancels, odd files, proxies. Each test drives the real script."""
import json
import os
import socket
import subprocess
import sys
import threading

import pytest

from conftest import GROK
from fakeapi import RawServer, answer, endless, hang, raw, responses_reply, tools
from test_acp import Acp
from test_faults import events, no_traceback, session_files

TICKS = 10 ** 10        # cost_in_usd_ticks per USD


def priced(usd, **usage):
    return dict(usage, cost_in_usd_ticks=usd * TICKS)


@pytest.fixture
def acp(run):
    clients = []

    def start(*args, env=None):
        clients.append(Acp(run, *args, env=env))
        return clients[-1]

    yield start
    for c in clients:
        c.kill()


# ---------------------------------------------------------------------------- cost
def test_concurrent_web_searches_stay_within_the_cost_limit(run, fake):
    fake.add(tools(*[("web_search", {"query": "q%d" % i}) for i in range(8)], usage=priced(0.001)),
             answer("done", usage=priced(0.001)))       # 8: the most calls run from one reply
    fake.add(*[responses_reply("found", usage=priced(0.05)) for _ in range(8)])
    p = run("-p", "search", "--format", "json", env={"COST_LIMIT": "0.10"})
    assert p.returncode == 0, p.stderr
    assert len(fake.responses_requests()) == 1
    results = fake.chat_requests()[1].last_user
    assert results.count("\nnot run: it would pass the cost limit") == 7
    assert "answer with what you have" in results


@pytest.mark.parametrize("usage", [
    {"cost_in_usd_ticks": float("nan"), "prompt_tokens": 10 ** 6},
    {"cost_in_usd_ticks": -10 ** 12, "prompt_tokens": 10 ** 6},
    {"cost_in_usd_ticks": "lots", "prompt_tokens": 10 ** 6, "completion_tokens": float("inf")},
])
def test_odd_usage_cannot_turn_the_cost_limit_off(run, fake, usage):
    fake.add(*[tools(("list_files", {}), usage=usage)] * 3, answer("never"))
    p = run("-p", "go", "--format", "json", env={"COST_LIMIT": "0.01"})
    assert p.returncode == 3 and "cost limit reached" in p.stderr, p.stderr
    assert len(fake.chat_requests()) == 1
    assert p.stderr.count("not counts") == 1
    no_traceback(p.stderr)


def test_token_counts_as_strings_are_ignored_with_one_notice(run, fake):
    odd = {"prompt_tokens": "12", "completion_tokens": float("nan"), "total_tokens": -5}
    fake.add(tools(("list_files", {}), usage=odd), answer("fine", usage=odd))
    p = run("-p", "go", "--format", "json")
    assert p.returncode == 0, p.stderr
    finishes = [e for e in events(p.stdout) if e["type"] == "step_finish"]
    assert [f["usage"]["inputTokens"] for f in finishes] == [0, 0]
    assert p.stderr.count("not counts") == 1


# ---------------------------------------------------------------------- time, size
def test_a_reply_that_never_ends_is_cut_at_the_timeout(run, fake):
    fake.add(endless(chunk_delay=0.1))
    p = run("-p", "hi", env={"GROK_TIMEOUT": "0.5", "GROK_MAX_RETRIES": "0"}, timeout=30)
    assert p.returncode == 2
    assert "no complete reply from 127.0.0.1 within the timeout (GROK_TIMEOUT, for the whole reply)" in p.stderr


def test_an_endless_fast_reply_is_abandoned_at_the_size_cap(run, fake):
    fake.add(endless("x" * 60000), answer("after"))
    p = run("-p", "hi", timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "after\n"
    assert "the reply passed 8 MB and was abandoned" in fake.chat_requests()[1].last_user
    assert len(fake.chat_requests()[1].body) < 100000


def test_an_endless_web_search_reply_fails_that_search_alone(run, fake):
    fake.add(endless("x" * 60000), path="/responses")
    fake.add(tools(("web_search", {"query": "news"})), answer("after"))
    p = run("-p", "hi", timeout=30)
    assert p.returncode == 0 and p.stdout == "after\n", p.stderr
    result = fake.chat_requests()[1].last_user
    assert "[1] web_search news\nweb search failed: the reply passed 8 MB and was abandoned\n" in result


# ---------------------------------------------------------------------------- ACP
# (cancel while a Connection: close reply streams: test_acp.py::test_cancel_during_model_call)
def test_acp_stdin_closed_cancels_the_turn_and_runs_nothing_more(acp, fake, isolated_env):
    fake.add(tools(("bash", {"command": "sleep 5; touch first"})), tools(("bash", {"command": "touch second"})),
             answer("done"))
    c = acp("--acp", "-y")
    c.init()
    sid = c.new(isolated_env.work)
    rid = c.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while c.recv().get("params", {}).get("update", {}).get("status") != "in_progress":
        pass
    c.proc.stdin.close()
    msg, _ = c.wait(rid)
    assert msg["result"]["stopReason"] == "cancelled"
    assert c.proc.wait(timeout=20) == 0
    assert not (isolated_env.work / "first").exists() and not (isolated_env.work / "second").exists()
    assert len(fake.chat_requests()) == 1


# --------------------------------------------------------------------------- HTTP
def test_a_redirect_is_a_clear_error_and_not_followed(run, fake):
    fake.add(raw(301, b"", headers={"Location": "https://elsewhere.example/v1/chat/completions"}))
    p = run("-p", "hi")
    assert p.returncode == 1
    assert "HTTP 301, a redirect to https://elsewhere.example/v1/chat/completions" in p.stderr
    assert len(fake.chat_requests()) == 1


class Proxy(RawServer):
    """A small HTTP proxy on loopback: CONNECT tunnels, and absolute-URI requests forwarded."""

    def __init__(self):
        self.lines, self.auth = [], []
        super().__init__()

    def handle(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        line, rest = data.split(b"\r\n", 1)
        method, target, version = line.decode().split(" ")
        self.lines.append(line.decode())
        self.auth += [h.split(b":", 1)[1].strip().decode() for h in rest.split(b"\r\n")
                      if h.lower().startswith(b"proxy-authorization:")]
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            up = socket.create_connection((host, int(port)))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            hostport, path = target.split("://", 1)[1].split("/", 1)
            host, port = hostport.rsplit(":", 1)
            up = socket.create_connection((host, int(port)))
            up.sendall(("%s /%s %s\r\n" % (method, path, version)).encode() + rest)
        threading.Thread(target=self.pipe, args=(up, conn), daemon=True).start()
        self.pipe(conn, up)

    @staticmethod
    def pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.server.close()


@pytest.fixture
def proxy():
    p = Proxy()
    yield p
    p.close()


def test_http_proxy_gets_the_absolute_url_unless_no_proxy_names_the_host(run, fake, proxy):
    fake.add(answer("through the proxy"), answer("direct"))
    p = run("-p", "hi", env={"HTTP_PROXY": proxy.url})
    assert p.returncode == 0, p.stderr
    assert p.stdout == "through the proxy\n"
    assert proxy.lines == ["POST %s/chat/completions HTTP/1.1" % fake.url]
    p = run("-p", "hi", env={"HTTP_PROXY": proxy.url, "NO_PROXY": "localhost,127.0.0.1"})
    assert p.returncode == 0 and p.stdout == "direct\n"
    assert len(proxy.lines) == 1 and proxy.auth == []
    # a user and password in the proxy's URL are sent to the proxy (Basic), never shown
    fake.add(answer("authenticated"))
    authed = proxy.url.replace("http://", "http://me:s%40cret-pw@")
    p = run("-p", "hi", env={"HTTP_PROXY": authed})
    assert p.returncode == 0 and p.stdout == "authenticated\n", p.stderr
    assert proxy.auth == ["Basic bWU6c0BjcmV0LXB3"]          # base64 of me:s@cret-pw




def test_https_goes_through_a_connect_tunnel(run, fake, proxy):
    port = fake.url.split(":")[2].split("/")[0]
    p = run("-p", "hi", env={"https_proxy": proxy.url, "GROK_BASE_URL": "https://127.0.0.1:%s/v1" % port,
                             "GROK_MAX_RETRIES": "0"})
    assert [line.rsplit(" ", 1)[0] for line in proxy.lines] == ["CONNECT 127.0.0.1:%s" % port]
    assert proxy.auth == []
    assert p.returncode == 2 and "127.0.0.1" in p.stderr     # the fake speaks no TLS
    no_traceback(p.stderr)
    p = run("-p", "hi", env={"https_proxy": proxy.url.replace("//", "//me:pw@"), "GROK_MAX_RETRIES": "0",
                             "GROK_BASE_URL": "https://127.0.0.1:%s/v1" % port})
    assert proxy.auth == ["Basic bWU6cHc="] and "pw@" not in p.stderr     # on the CONNECT, never shown


# ----------------------------------------------------------- sessions and outputs
def test_a_session_in_use_is_not_resumed_by_a_second_process(run, fake, isolated_env):
    fake.add(answer("first"))
    assert run("-p", "hi").returncode == 0
    [path] = session_files(isolated_env)
    fake.add(hang(30))
    holder = subprocess.Popen([sys.executable, str(GROK), "--resume", path.stem, "-p", "more"],
                              env=run.env(GROK_MAX_RETRIES="0"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert fake.wait_for_requests(2)
        size = path.stat().st_size
        second = run("--resume", path.stem, "-p", "again")
        assert second.returncode == 1
        assert "session %s is in use by another grok process" % path.stem in second.stderr
        fake.add(answer("in a new session"))
        repl = run("--resume", path.stem, input="hello\n")
        assert repl.returncode == 0 and "in a new session" in repl.stdout
        assert "in use by another grok process: starting a new session" in repl.stderr
        assert path.stat().st_size == size and len(session_files(isolated_env)) == 2
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("args", [("-p", "hi"), ("-p", "hi", "--format", "json"), ("--acp",), ()])
def test_closed_stdout_is_a_quiet_exit_in_every_mode(run, fake, args):
    fake.add(answer("nobody reads this"))
    p = subprocess.run("exec %s %s %s >&-" % (sys.executable, GROK, " ".join(args)), shell=True,
                       env=run.env(), input="hi\n", capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    no_traceback(p.stderr)


@pytest.mark.parametrize("args, requests", [(("-p", "hi"), 1), (("-p", "hi", "--format", "json"), 0)])
def test_a_full_disk_on_stdout_is_a_clear_error_not_a_network_retry(run, fake, args, requests):
    # text mode writes the answer as it streams in (one request); json mode writes step_start first (none)
    fake.add(*[answer("nowhere to go")] * 5)
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, str(GROK)] + list(args), env=run.env(), stdin=subprocess.DEVNULL,
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=30)
    assert p.returncode == 1
    assert p.stderr.endswith("grok: cannot write to stdout: No space left on device\n"), p.stderr
    assert len(fake.chat_requests()) == requests


def test_broken_stderr_does_not_end_the_turn(run, fake):
    fake.add(raw(503, b"busy"), answer("still answered"))
    proc = subprocess.Popen([sys.executable, str(GROK), "-p", "hi"], env=run.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stderr.close()         # the reader of stderr is gone before the retry notice
    out = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert out == b"still answered\n"


# ----------------------------------------------------------------------- agent mode
@pytest.mark.parametrize("odd", [{"cost_usd": "abc"}, {"cost_usd": -100}, {"cost_usd": float("nan")},
                                 {"loops": [1]}, {"sessions": [None]}, {"verdict": 42}])
def test_odd_values_in_meta_json_are_rebuilt_from_the_files(run, fake, isolated_env, odd):
    from test_agent_mode import GOAL, full_run
    replies = full_run()
    agent = [sys.executable, str(GROK.parent / "grok_detailed.py"), "--agent"]

    def go(*args):
        return subprocess.run(agent + list(args) + ["-y"], env=run.env(COST_LIMIT="0.5"), capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=60, start_new_session=True)

    fake.add(*replies[:5] + [raw(400, b"stop before the reviewer")])
    assert go(GOAL).returncode == 1
    meta_path = isolated_env.home / ".grok_agent" / "meta.json"
    meta = json.loads(meta_path.read_text())
    if "verdict" in odd:
        meta["steps"]["planner"]["verdict"] = odd["verdict"]
    else:
        meta.update(odd)
    meta_path.write_text(json.dumps(meta))
    fake.add(*replies[5:])
    r = go()
    assert r.returncode == 0, r.stderr
    assert "meta.json is invalid" in r.stderr and "recovered the state from the files present" in r.stderr
    no_traceback(r.stderr)
    assert json.loads(meta_path.read_text())["cost_usd"] >= 0


# -------------------------------------------------------------------------- caps
def test_a_huge_command_is_refused_and_not_kept_in_the_history(run, fake, isolated_env):
    huge = "echo " + "x" * 5000000
    fake.add(tools(("bash", {"command": huge}), chunk_size=1 << 20), answer("ok"), answer("again"))
    p = run("-p", "go", "-y", "--format", "json")
    assert p.returncode == 0, p.stderr
    second = fake.chat_requests()[1]
    assert len(second.body) < 300000
    assert "not run: the command is too long (5000005 characters" in second.last_user
    [path] = session_files(isolated_env)
    assert path.stat().st_size < 300000
    p = run("-c", "-p", "more")
    assert p.returncode == 0 and len(fake.chat_requests()[2].body) < 300000


def test_a_huge_agents_md_is_cut_in_agent_mode(run, fake, isolated_env):
    from test_agent_mode import GOAL, full_run
    ws = isolated_env.home / ".grok_agent"
    ws.mkdir()
    (ws / "Agents.md").write_text("rules " * 500000)
    fake.add(*full_run())
    r = subprocess.run([sys.executable, str(GROK.parent / "grok_detailed.py"), "--agent", GOAL, "-y"],
                       env=run.env(), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                       start_new_session=True)
    assert r.returncode == 0, r.stderr
    assert max(len(q.body) for q in fake.chat_requests()) < 200000
    assert "[... %d more characters not shown]" % (3000000 - 40000) in fake.chat_requests()[0].messages[0]["content"]


def test_the_summary_request_fits_the_summary_models_window(run, fake, isolated_env):
    (isolated_env.work / "big.txt").write_text("x" * 3500)
    fake.add(*[tools(("read_file", {"path": "big.txt"}))] * 6, answer("summary"), answer("done"))
    p = run("-p", "go", env={"GROK_CONTEXT_WINDOW": "6000", "GROK_MAX_ITERATIONS": "0"})
    summaries = [q for q in fake.chat_requests() if q.messages[0]["content"].startswith("You summarise")]
    assert summaries and all(sum(len(m["content"]) for m in q.messages) <= 6000 - 2000 for q in summaries)
    assert p.returncode == 0, p.stderr


def test_term_dumb_gets_no_escapes(run, fake, tmp_path):
    from ptyrun import PtyProcess
    fake.add(tools(("list_files", {})), answer("plain"))
    p = PtyProcess([sys.executable, str(GROK)], run.env(TERM="dumb", NO_COLOR=None), tmp_path)
    p.expect("> ")
    p.send("hi\n")
    p.expect("plain")
    p.expect("> ")
    p.sendeof()
    assert p.wait() == 0
    assert "[list_files] ." in p.output and "\x1b" not in p.output


def test_a_stale_temp_file_of_a_killed_write_is_removed_at_the_next_write(run, fake, isolated_env):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = isolated_env.work / (".grok-out.txt.%d.abc123.tmp" % dead.pid)
    live = isolated_env.work / (".grok-out.txt.%d.def456.tmp" % os.getpid())
    stale.write_text("half")
    live.write_text("being written")
    fake.add(tools(("write_file", {"path": "out.txt", "content": "whole"})), answer("written"))
    assert run("-p", "go", "-y").returncode == 0
    assert (isolated_env.work / "out.txt").read_text() == "whole"
    assert not stale.exists() and live.exists()
    assert sorted(f.name for f in isolated_env.work.iterdir()) == sorted(["out.txt", live.name])
