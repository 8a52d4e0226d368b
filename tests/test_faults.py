"""Fault injection: the network, the model, the tools, the user and the disk misbehave;
grok must retry where it helps, fail clearly where it does not, never hang, never show a
traceback and never lose what the session already holds."""
import email.utils
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import fast_clock, load_grok, GROK, GROK_DETAILED
import fakeapi
from fakeapi import answer, drop, drop_mid_body, error, hang, raw, reply, sse, tools
from ptyrun import PtyProcess, default_sigint


# ------------------------------------------------------------------- helpers
def data_dir(isolated_env):
    return isolated_env.home / ".local" / "share" / "grok-agent"


def session_files(isolated_env):
    return sorted((data_dir(isolated_env) / "sessions").glob("*.jsonl"))


def records(path):
    """Every line of a session file as JSON (fails the test on a damaged line)."""
    return [json.loads(line.decode("utf-8")) for line in Path(path).read_bytes().split(b"\n") if line]


def session_messages(path):
    return [r["message"] for r in records(path) if r["type"] == "message"]


def the_session(isolated_env):
    files = session_files(isolated_env)
    assert len(files) == 1, files
    return files[0]


def events(stdout):
    return [json.loads(line) for line in stdout.split("\n") if line.strip()]


def tool_outputs(stdout):
    """Tool results in call order (tools running concurrently report as each finishes)."""
    uses = [e for e in events(stdout) if e["type"] == "tool_use"]
    uses.sort(key=lambda e: [int(n) for n in e["toolCall"]["id"].split("_")[1:]])
    return [e["toolResult"]["output"] for e in uses]


def no_traceback(*texts):
    for text in texts:
        assert "Traceback" not in text and "internal error" not in text, text


# Children inherit this, so procs_with() never counts the processes of another test run on the machine.
RUN_TAG = "TESTS_OF_GROK_RUN=%d" % os.getpid()
os.environ[RUN_TAG.split("=")[0]] = RUN_TAG.split("=")[1]


def processes():
    """(pid, the fields of its /proc stat after the name) of each process still there."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            yield int(pid), Path("/proc", pid, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue


def procs_with(marker):
    """pids of this test run's live (not zombie) processes whose command line starts with marker."""
    found = []
    for pid, fields in processes():
        try:
            cmd = Path("/proc", str(pid), "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            ours = RUN_TAG.encode() in Path("/proc", str(pid), "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd.startswith(marker) and fields[0] != "Z" and ours:
            found.append(pid)
    return found


def zombie_children(ppid):
    """pids of zombie processes whose parent is ppid."""
    return [pid for pid, fields in processes() if fields[0] == "Z" and int(fields[1]) == ppid]


def wait_until(predicate, timeout=10, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def kill_marked(marker):
    for pid in procs_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ScriptedServer(fakeapi.RawServer):
    """Answers each connection with scripted raw bytes, then closes: for replies http.server
    cannot produce (bad chunking, bad status lines)."""

    def __init__(self, *replies):
        self.replies, self.count = list(replies), 0
        fakeapi.RawServer.__init__(self, "/v1")

    def handle(self, conn):
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
                          if l.lower().startswith(b"content-length:")]
                while length and len(body) < length[0]:
                    body += conn.recv(65536)
                self.count += 1
                conn.sendall(self.replies.pop(0) if self.replies else b"HTTP/1.1 418 No\r\n\r\n")
            except OSError:
                pass

    def close(self):
        self.server.close()


# ================================================================== HTTP faults
def test_connection_refused_fails_at_once_with_exit_2(run):
    url = "http://127.0.0.1:%d/v1" % closed_port()
    p = run("-p", "hi", env={"GROK_BASE_URL": url, "GROK_MAX_RETRIES": 2})
    assert p.returncode == 2
    assert "connection refused" in p.stderr and "retrying" not in p.stderr
    assert "GROK_BASE_URL" in p.stderr      # says what to check
    assert p.stdout == ""
    no_traceback(p.stderr)


def test_dns_failure_is_a_clear_error(run):
    p = run("-p", "hi", env={"GROK_BASE_URL": "http://nonexistent.invalid/v1", "GROK_MAX_RETRIES": 1})
    assert p.returncode == 2
    assert "cannot resolve host nonexistent.invalid" in p.stderr
    no_traceback(p.stderr)


@pytest.mark.parametrize("url, problem", [
    ("http://127.0.0.1:99999/v1", "GROK_BASE_URL is not a valid URL (Port out of range 0-65535)"),
    ("http://a..b/v1", "GROK_BASE_URL is not a valid URL (encoding with 'idna' codec failed"),
    ("ftp://x/v1", "GROK_BASE_URL must start with http:// or https://, not 'ftp://x/v1'"),
    ("http://127.0.0.1/v 1", "GROK_BASE_URL must not contain spaces or control characters"),
])
def test_bad_base_url_is_a_user_error(run, fake, url, problem):
    p = run("-p", "hi", env={"GROK_BASE_URL": url, "GROK_MAX_RETRIES": 0})
    assert p.returncode == 1 and p.stderr.startswith("grok: " + problem), p.stderr
    assert p.stderr.count("\n") == 1 and not fake.requests


def test_untrusted_tls_certificate_is_not_retried(run, tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("needs the openssl command to make a self-signed certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    handshakes = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            handshakes.append(1)
            try:
                ctx.wrap_socket(conn, server_side=True).close()
            except (OSError, ssl.SSLError):
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        p = run("-p", "hi", env={"GROK_BASE_URL": "https://127.0.0.1:%d/v1" % server.getsockname()[1],
                                 "GROK_MAX_RETRIES": 3})
    finally:
        server.close()
    assert p.returncode == 1, p.stderr
    assert "certificate" in p.stderr and "SSL_CERT_FILE" in p.stderr and "retrying" not in p.stderr
    assert len(handshakes) == 1
    no_traceback(p.stderr)


def test_read_timeout_is_retried(run, fake):
    fake.add(hang(10), answer("after the timeout"))
    p = run("-p", "hi", env={"GROK_TIMEOUT": 0.5})
    assert p.returncode == 0, p.stderr
    assert p.stdout == "after the timeout\n"
    assert "within the timeout" in p.stderr and "GROK_TIMEOUT" in p.stderr
    assert len(fake.chat_requests()) == 2


def test_a_host_that_drops_packets_times_out_on_connect(run, tmp_path):
    """A listening socket with a full accept queue drops SYNs, like a firewall: the connect
    gives up after CONNECT_TIMEOUT (made short here), not after GROK_TIMEOUT."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    filler = socket.create_connection(server.getsockname())     # fills the accept queue
    code = ("import sys; sys.path.insert(0, %r); import grok; grok.CONNECT_TIMEOUT = 0.5\n"
            "c = grok.Client('http://127.0.0.1:%d/v1', 'k', timeout=300, max_retries=1, backoff=0.01)\n"
            "try:\n    c.post('/chat/completions', {})\nexcept grok.TransientError as e:\n    print(e)\n"
            % (str(GROK.parent), server.getsockname()[1]))
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    finally:
        filler.close()
        server.close()
    assert "within the timeout" in p.stdout and "gave up after 1 retries" in p.stdout, p.stdout + p.stderr


def test_timeout_zero_means_no_limit(run, fake, tmp_path):
    # On a clock 1000 times fast a reply read over 1 s takes 1000 s: the default limit (300 s, a timer of
    # 0.3 s, long after the connection is made) strikes, 0 does not.
    fast = dict(fast_clock(tmp_path, 1000), GROK_MAX_RETRIES=0)
    fake.add(answer("ok", chunk_size=10, chunk_delay=0.2))
    p = run("-p", "hi", env=fast)
    assert p.returncode == 2 and "no complete reply from 127.0.0.1 within the timeout" in p.stderr, p.stderr
    fake.add(answer("ok", chunk_size=10, chunk_delay=0.2))
    p = run("-p", "hi", env=dict(fast, GROK_TIMEOUT=0))
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr


@pytest.mark.parametrize("fault, notice", [
    (drop, "connection to 127.0.0.1 dropped"),
    (drop_mid_body, "the reply stream from 127.0.0.1 broke off: 4027 bytes of the reply missing"),
])
def test_dropped_connection_is_retried(run, fake, fault, notice):
    fake.add(fault(), answer("second try"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "second try\n"
    assert p.stderr.startswith(notice) and "retrying in 0.0s (1/4)" in p.stderr
    assert len(fake.chat_requests()) == 2


def test_an_unstreamed_reply_that_keeps_breaking_off_ends_after_the_retries(run, fake):
    # Streams that break twice are asked for once unstreamed; an unstreamed reply that breaks is only retried.
    fake.add(*[drop_mid_body()] * 6)
    p = run("-p", "hi", env={"GROK_STREAM": "0", "GROK_MAX_RETRIES": "2"})
    assert p.returncode == 2, p.stderr
    assert "4027 bytes of the reply missing (gave up after 2 retries)" in p.stderr
    assert len(fake.chat_requests()) == 3


def partial_answer_events(text):
    """SSE chunks of an answer that stop in the middle of the response string."""
    body = json.dumps({"tool_calls": [], "response": text, "done": True})
    cut = body.index(text) + len(text) // 2
    return [{"choices": [{"index": 0, "delta": {"content": body[i:i + 10]}}]} for i in range(0, cut, 10)]


def test_truncated_stream_is_retried_and_shown_once(run, fake):
    fake.add(sse(partial_answer_events("The first attempt is cut short"), truncate=True),
             answer("Hello world"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip("\n").endswith("Hello world")
    assert "tool_calls" not in p.stdout and "{" not in p.stdout   # no JSON leaked into the answer
    assert "the reply stream from 127.0.0.1 broke off: no end of stream" in p.stderr
    assert len(fake.chat_requests()) == 2


def test_truncated_stream_in_the_repl_shows_no_json(run, fake):
    fake.add(sse(partial_answer_events("The first attempt is cut short"), truncate=True),
             answer("Hello world"))
    p = run(input="hi\n")
    assert p.returncode == 0, p.stderr
    assert "Hello world" in p.stdout and "tool_calls" not in p.stdout
    no_traceback(p.stderr)


def test_stream_that_stops_without_end_is_retried(run, fake):
    fake.add(sse([{"choices": [{"delta": {"content": '{"tool_calls": [], "resp'}}]}], truncate=True),
             sse([{"choices": [{"delta": {"content": '{"tool_calls": [], "resp'}}]}], truncate=True),
             answer("third"))
    p = run("-p", "hi", "--format", "json")
    assert p.returncode == 0, p.stderr
    texts = [e["text"] for e in events(p.stdout) if e["type"] == "text"]
    assert texts == ["third"]
    assert len(fake.chat_requests()) == 3


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 520])
def test_retryable_status_is_retried(run, fake, status):
    fake.add(error(status), error(status), answer("recovered"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "recovered\n"
    assert len(fake.chat_requests()) == 3
    assert p.stderr.count("HTTP %d" % status) == 2


@pytest.mark.parametrize("status", [429, 503])
def test_retries_are_bounded_then_exit_2(run, fake, status):
    fake.add(*[error(status)] * 10)
    p = run("-p", "hi", env={"GROK_MAX_RETRIES": 3})
    assert p.returncode == 2
    assert len(fake.chat_requests()) == 4          # the first try and 3 retries
    assert "gave up after 3 retries" in p.stderr and "HTTP %d" % status in p.stderr
    no_traceback(p.stderr)


def test_retries_fail_the_turn_not_the_repl(run, fake):
    fake.add(*[error(503)] * 3, answer("still here"))
    p = run(input="first\nsecond\n", env={"GROK_MAX_RETRIES": 2})
    assert p.returncode == 2          # piped: the REPL went on, the exit code tells a turn failed
    assert "gave up after 2 retries" in p.stderr
    assert "still here" in p.stdout
    assert len(fake.chat_requests()) == 4
    no_traceback(p.stderr)


def test_retry_after_seconds_is_honoured(run, fake):
    fake.add(error(429, headers={"Retry-After": "1"}), answer("ok"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    first, second = fake.chat_requests()
    assert second.time - first.time >= 1.0       # a lower bound, the backoff alone is 0.01 s


def test_retry_after_ms_is_honoured(run, fake):
    fake.add(error(429, headers={"retry-after-ms": "600"}), answer("ok"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    first, second = fake.chat_requests()
    assert second.time - first.time >= 0.6


class DateSoon:
    """A Retry-After date 2.5 s after the fake sends it (however long grok took to start)."""

    def __str__(self):
        return email.utils.formatdate(time.time() + 2.5, usegmt=True)


def test_retry_after_http_date_is_honoured(run, fake):
    fake.add(error(503, headers={"Retry-After": DateSoon()}), answer("ok"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    first, second = fake.chat_requests()
    assert second.time - first.time >= 1.0       # the date has 1 s resolution


def test_retry_after_parsing():
    g = load_grok()
    now = 1700000000.0
    assert g.parse_retry_after("2") == 2.0 and g.parse_retry_after(" 1.5 ") == 1.5
    assert g.parse_retry_after("-3") == 0.0 and g.parse_retry_after("100000") == g.RETRY_AFTER_CAP
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert g.parse_retry_after(date, now=now) == 7.0
    assert g.parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0
    for junk in (None, "", "soon", "nan", "Mon, 99 Foo 2024 99:99:99 GMT"):
        assert g.parse_retry_after(junk) is None, junk
    assert g.parse_retry_after("inf") == g.RETRY_AFTER_CAP


def test_retry_delay_backoff_jitter_and_retry_after():
    g = load_grok()
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0)):
        delays = {g.retry_delay(attempt, 1.0) for _ in range(50)}
        assert all(base <= d <= base * 1.25 for d in delays)
        assert len(delays) > 1                                  # jitter: not all the same
    assert g.retry_delay(1, 1.0, retry_after=20.0) == 20.0       # the server's wait is a lower bound
    assert 8.0 <= g.retry_delay(4, 1.0, retry_after=0.5) <= 10.0


def test_backoff_grows_exponentially(run, fake):
    fake.add(error(500), error(500), error(500), answer("ok"))
    p = run("-p", "hi", env={"GROK_RETRY_BACKOFF": 0.1})
    assert p.returncode == 0, p.stderr
    t = [r.time for r in fake.chat_requests()]
    gaps = [b - a for a, b in zip(t, t[1:])]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2 and gaps[2] >= 0.4, gaps


@pytest.mark.parametrize("status,body,hint", [
    (400, {"error": "Model not found: grok-nope"}, "-m/GROK_MODEL"),
    (401, {"error": "Incorrect API key provided"}, "API key was rejected"),
    (403, {"error": "no credits"}, "permission or credits"),
    (404, {"error": "not found"}, "GROK_BASE_URL"),
    (422, {"error": "messages: field required"}, "rejected (HTTP 422)"),
])
def test_client_errors_are_not_retried_and_say_what_to_fix(run, fake, status, body, hint):
    fake.add(error(status, body), answer("never used"))
    p = run("-p", "hi")
    assert p.returncode == 1
    assert len(fake.chat_requests()) == 1
    assert hint in p.stderr and "retrying" not in p.stderr
    no_traceback(p.stderr)


def test_client_error_in_json_mode_is_an_error_event(run, fake):
    fake.add(error(401, {"error": "bad key"}))
    p = run("-p", "hi", "--format", "json")
    assert p.returncode == 1
    evs = events(p.stdout)
    assert evs[-1]["type"] == "error" and "HTTP 401" in evs[-1]["message"]


def test_not_json_from_the_server_is_a_clear_error(run, fake):
    fake.add(raw(200, b"<html>hello</html>"))
    p = run("-p", "hi")
    assert p.returncode == 1
    assert "did not answer with JSON" in p.stderr
    no_traceback(p.stderr)


def test_an_error_object_in_a_200_reply_is_the_servers_error_not_a_bug(run, fake):
    fake.add(raw(200, json.dumps({"error": "overloaded, try again later"}).encode()))
    p = run("-p", "hi")
    assert p.returncode == 2 and "the server failed (HTTP 500): overloaded" in p.stderr, p.stderr
    no_traceback(p.stderr)


@pytest.mark.parametrize("bad", [
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n",
    b"HTTP/9 banana\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 30\r\n\r\ndata: {\"choices\": [{\"delta\"",
    b"",
])
def test_broken_http_is_retried_never_a_crash(run, bad):
    server = ScriptedServer(bad, bad)
    try:
        p = run("-p", "hi", env={"GROK_BASE_URL": server.url, "GROK_MAX_RETRIES": 1})
    finally:
        server.close()
    assert p.returncode == 2, p.stderr
    assert server.count == 2
    no_traceback(p.stderr)


# ============================================================ model output faults
def test_not_json_three_times_fails_with_exit_3(run, fake):
    fake.add(reply("I think the answer is 4"), reply("still prose"), reply("and again"), answer("never"))
    p = run("-p", "hi")
    assert p.returncode == 3
    assert len(fake.chat_requests()) == 3
    assert "3 times in a row" in p.stderr
    reqs = fake.chat_requests()
    assert "broke the JSON contract" in reqs[1].last_user
    no_traceback(p.stderr)


def test_wrong_shapes_get_corrective_messages(run, fake):
    fake.add(reply([1, 2, 3]), reply({"tool_calls": "ls", "response": None}), answer("fine"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "fine\n"
    reqs = fake.chat_requests()
    assert len(reqs) == 3
    assert "JSON object" in reqs[1].last_user and '"tool_calls" must be an array' in reqs[2].last_user


def test_a_one_megabyte_reply_is_bounded(run, fake, isolated_env):
    big = "x" * 1000000
    fake.add(*[reply(big, chunk_size=65536)] * 3)
    p = run("-p", "hi")
    assert p.returncode == 3
    reqs = fake.chat_requests()
    assert len(reqs) == 3
    assert all(len(r.body) < 100000 for r in reqs)   # the junk is not sent back in full
    assert the_session(isolated_env).stat().st_size < 100000
    no_traceback(p.stderr)


def test_a_one_megabyte_answer_is_shown_whole(run, fake):
    text = "y" * 1000000
    fake.add(answer(text, chunk_size=65536))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr[-500:]
    assert p.stdout == text + "\n"


@pytest.mark.parametrize("stream", ["0", "1"])
def test_empty_choices_are_a_strike_not_a_crash(run, fake, stream):
    empty = raw(200, {"id": "x", "object": "chat.completion", "choices": []}) if stream == "0" else \
        sse([{"id": "x", "choices": []}])
    fake.add(empty, answer("after empty"))
    p = run("-p", "hi", env={"GROK_STREAM": stream})
    assert p.returncode == 0, p.stderr
    assert p.stdout == "after empty\n"
    assert "empty" in fake.chat_requests()[1].last_user


def test_finish_reason_length_with_cut_json_is_corrected(run, fake):
    fake.add(reply('{"tool_calls": [], "response": "a very long ans', finish_reason="length"),
             answer("short"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    assert "max_tokens" in fake.chat_requests()[1].last_user


@pytest.mark.parametrize("weird", [
    raw(200, {"choices": [{"message": "not an object"}]}),
    raw(200, {"choices": [{"message": {"content": ["a", "list"]}}], "usage": "bad"}),
    raw(200, {"choices": "abc"}),
    raw(200, [1, 2]),
    raw(200, b"null"),
    sse([{"choices": [{"delta": "not an object"}]}]),
    sse([{"choices": {"a": 1}}]),
    sse([{"choices": [7], "usage": [1]}]),
    sse(["[1, 2]", '"a string"']),
])
def test_malformed_api_objects_are_strikes_not_crashes(run, fake, weird):
    fake.add(weird, weird, weird)
    p = run("-p", "hi")
    assert p.returncode == 3 and "the model broke the JSON contract 3 times in a row" in p.stderr, p.stderr
    assert len(fake.chat_requests()) == 3
    no_traceback(p.stderr)


def test_deeply_nested_json_is_a_strike_not_a_recursion_error(run, fake, isolated_env):
    deep = "[" * 100000
    fake.add(reply(deep, chunk_size=65536), reply("{\"a\":" * 50000, chunk_size=65536), answer("flat"))
    p = run("-p", "hi")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "flat\n" and len(fake.chat_requests()) == 3
    fake.add(raw(200, deep.encode()))
    p = run("-p", "hi", env={"GROK_STREAM": 0})
    assert p.returncode == 1 and "did not answer with JSON" in p.stderr
    fake.add(sse([deep]), answer("after a deep event"))
    p = run("-p", "hi")
    assert p.returncode == 0 and p.stdout == "after a deep event\n", p.stderr
    sid = "20240101-000000-dddddd"
    write_session(isolated_env, sid, [header(sid, isolated_env.work), msg("user", "one"),
                                      b'{"type": "message", "message": ' + deep.encode() + b"\n",
                                      msg("assistant", '{"response": "1"}')])
    fake.add(answer("resumed"))
    p = run("-p", "two", "--resume", sid)
    assert p.returncode == 0 and "damaged" in p.stderr, p.stderr
    no_traceback(p.stderr)


def test_a_model_that_never_stops_calling_tools_is_bounded(run, fake):
    fake.add(*[tools(("list_files", {"path": "."}))] * 20)
    p = run("-p", "hi", "--max-tool-rounds", "3")
    assert p.returncode == 3
    assert len(fake.chat_requests()) == 4
    no_traceback(p.stderr)


# ================================================================== tool faults
def run_tool(run, fake, name, args, env=None, extra=()):
    """One headless json run: the model calls one tool, then answers; the tool's output."""
    fake.add(tools((name, args)), answer("done"))
    p = run("-p", "go", "--format", "json", "-y", *extra, env=env)
    assert p.returncode == 0, p.stderr
    no_traceback(p.stderr)
    (out,) = tool_outputs(p.stdout)
    return out, p


def test_command_that_never_ends_is_killed(run, fake):
    out, _ = run_tool(run, fake, "bash", {"command": "echo begun; sleep 61.73"}, env={"GROK_BASH_TIMEOUT": 0.5})
    assert out == "begun\n\n[timed out after 0.5s: process group killed]"
    assert procs_with("sleep 61.73") == []


def test_bash_timeout_zero_means_no_limit(run, fake, tmp_path):
    # On a fast clock a command of 0.5 s runs for hours: the default limit (180 s) strikes, 0 does not.
    command, fast = {"command": "sleep 0.5; echo finished"}, dict(fast_clock(tmp_path), GROK_TIMEOUT=0)
    out, _ = run_tool(run, fake, "bash", command, env=fast)
    assert out == "\n[timed out after 180s: process group killed]"
    out, _ = run_tool(run, fake, "bash", command, env=dict(fast, GROK_BASH_TIMEOUT=0))
    assert out == "finished\n"


def test_hundred_megabytes_of_output_are_capped(run, fake):
    fake.add(tools(("bash", {"command": "yes grok | head -c 100000000; echo; echo tail-marker"})),
             answer("done"))
    proc = subprocess.Popen([sys.executable, str(GROK), "-p", "go", "--format", "json", "-y"],
                            env=run.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    (result,) = tool_outputs(out.decode())
    assert "output truncated" in result and "tail-marker" in result
    assert len(result) < 50000
    sent = fake.chat_requests()[1]
    assert len(sent.body) < 60000
    assert b"Traceback" not in err


def test_hundred_megabytes_keep_memory_bounded(run, fake, tmp_path):
    """The grok process's peak RSS, read from its /proc status (VmHWM) while it runs: wait4's
    ru_maxrss would also count the test process it was forked from, which grows with the suite."""
    fake.add(tools(("bash", {"command": "yes grok | head -c 100000000"})), answer("done"))
    proc = subprocess.Popen([sys.executable, str(GROK), "-p", "go", "-y"], env=run.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        try:
            status = Path("/proc/%d/status" % proc.pid).read_text()
            peak = max([peak] + [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")])
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    assert proc.returncode == 0
    assert 0 < peak < 80 * 1024, peak       # KiB: far below 100 MB

def test_command_reading_stdin_gets_eof(run, fake):
    out, _ = run_tool(run, fake, "bash", {"command": "cat; read x; echo after-read"},
                      env={"GROK_BASH_TIMEOUT": 10})
    assert "after-read" in out and "timed out" not in out


def test_background_children_do_not_block_the_tool(run, fake):
    try:
        out, _ = run_tool(run, fake, "bash", {"command": "sleep 62.71 & echo started"},
                          env={"GROK_BASH_TIMEOUT": 20})
        assert "started" in out and "timed out" not in out
        assert "background" in out           # the model is told what happened
    finally:
        kill_marked("sleep 62.71")


def test_command_that_closes_its_output_is_waited_for(run, fake, isolated_env):
    out, _ = run_tool(run, fake, "bash", {"command": "exec >/dev/null 2>&1; sleep 0.3; touch closed-done"},
                      env={"GROK_BASH_TIMEOUT": 20})
    assert out == "(no output)"                  # not killed: no exit code, no timeout
    assert (isolated_env.work / "closed-done").exists()


def test_reading_a_fifo_or_device_does_not_block(run, fake, isolated_env):
    os.mkfifo(str(isolated_env.work / "pipe"))
    fake.add(tools(("read_file", {"path": "pipe"}), ("read_file", {"path": "/dev/zero"})), answer("done"))
    p = run("-p", "go", "--format", "json", "-y", timeout=20)          # -y: /dev is outside the working tree
    assert p.returncode == 0, p.stderr
    fifo, dev = tool_outputs(p.stdout)
    assert "not a regular file" in fifo and "not a regular file" in dev


def test_binary_output_is_a_result(run, fake, isolated_env):
    out, p = run_tool(run, fake, "bash", {"command": "head -c 4000 /dev/urandom; printf '\\0\\377\\376end'"})
    assert out.endswith("end")
    records(the_session(isolated_env))           # still valid JSON lines


def test_non_utf8_file_names(run, fake, isolated_env):
    work = bytes(isolated_env.work)
    with open(os.path.join(work, b"caf\xe9.txt"), "wb") as f:
        f.write(b"latin-1 named file\n")
    os.mkdir(os.path.join(work, b"dir\xff"))
    fake.add(tools(("list_files", {"path": "."}), ("read_file", {"path": "caf\udce9.txt"}),
                   ("read_file", {"path": "caf\ufffd.txt"}), ("list_files", {"path": "dir\udcff"})),
             answer("done"))
    p = run("-p", "go", "--format", "json")
    assert p.returncode == 0, p.stderr
    no_traceback(p.stderr)
    listing, read, missing, sub = tool_outputs(p.stdout)
    assert "caf\ufffd.txt" in listing and "dir\ufffd/" in listing
    assert "latin-1 named file" in read
    assert "no such file" in missing
    assert "empty directory" in sub
    records(the_session(isolated_env))                  # every line parses
    assert fake.chat_requests()[1].json is not None    # the request was valid JSON
    fake.add(tools(("read_file", {"path": "caf\udce9.txt"})), answer("repl done"))
    # the REPL prints the file name too, on a strict UTF-8 stdout (as under LANG=en_US.UTF-8)
    p = run(input="go\n", env={"PYTHONIOENCODING": "utf-8"})
    assert p.returncode == 0 and "[read_file] caf\\udce9.txt" in p.stdout and "repl done" in p.stdout, p.stderr
    no_traceback(p.stderr)


def test_write_into_a_missing_directory_creates_it(run, fake, isolated_env):
    out, _ = run_tool(run, fake, "write_file", {"path": "a/b/c.txt", "content": "hi"})
    assert "wrote 2 bytes" in out
    assert (isolated_env.work / "a" / "b" / "c.txt").read_text() == "hi"


def test_write_into_a_read_only_place_is_a_result(run, fake, isolated_env):
    ro = isolated_env.work / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    # root ignores directory modes; /proc refuses new files to everybody
    target = "/proc/grok-test/x.txt" if os.geteuid() == 0 else str(ro / "x.txt")
    try:
        out, _ = run_tool(run, fake, "write_file", {"path": target, "content": "hi"})
    finally:
        ro.chmod(0o755)
    assert out.startswith("error: cannot write")


def test_paths_that_are_directories(run, fake, isolated_env):
    (isolated_env.work / "sub").mkdir()
    (isolated_env.work / "f.txt").write_text("x")
    fake.add(tools(("read_file", {"path": "sub"}), ("write_file", {"path": "sub", "content": "x"}),
                   ("list_files", {"path": "f.txt"}), ("read_file", {"path": "nope.txt"})),
             answer("done"))
    p = run("-p", "go", "--format", "json", "-y")
    assert p.returncode == 0, p.stderr
    r, w, l, n = tool_outputs(p.stdout)
    assert "is a directory" in r and "is a directory" in w
    assert "not a directory" in l and "no such file" in n
    assert (isolated_env.work / "sub").is_dir()


def test_odd_tool_arguments_are_results(run, fake):
    fake.add(tools(("bash", {"command": "echo a\u0000b"}), ("read_file", {"path": "x\u0000y"}),
                   ("bash", {"command": 5}), ("list_files", {"path": ["a"]}),
                   ("write_file", {"path": "w.json", "content": {"k": [1, 2]}}),
                   ("ask_user", {"question": "q?", "options": {"a": 1}}), ("web_search", {})),
             answer("done"))
    p = run("-p", "go", "--format", "json", "-y")
    assert p.returncode == 0, p.stderr
    no_traceback(p.stderr)
    outs = tool_outputs(p.stdout)
    assert len(outs) == 7
    assert outs[0].startswith("error") and outs[1].startswith("error") and "non-empty string" in outs[2]
    assert "wrote" in outs[4] and "no user" in outs[5] and "non-empty string" in outs[6]


def test_tools_leave_no_zombies(run, fake):
    """Finished, timed-out and backgrounded commands are all reaped while the REPL lives on."""
    fake.add(tools(("bash", {"command": "echo quick"}), ("bash", {"command": "sleep 63.91"}),
                   ("bash", {"command": "(sleep 0.2; echo x) & echo bg"})),
             answer("first done"), answer("second done"))
    proc = subprocess.Popen([sys.executable, str(GROK), "-y"], env=run.env(GROK_BASH_TIMEOUT=0.5),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        assert fake.wait_for_requests(2, timeout=20)
        time.sleep(0.5)                        # the backgrounded subshell ends meanwhile
        assert zombie_children(proc.pid) == []
        assert procs_with("sleep 63.91") == []
        proc.stdin.write(b"again\n")
        proc.stdin.close()
        proc.wait(timeout=20)
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 0
    assert b"first done" in out and b"second done" in out
    assert b"Traceback" not in err


# ================================================================ user faults
def pty_grok(run, *args, env=None, script=GROK, cwd=None):
    return PtyProcess([sys.executable, str(script)] + list(args), run.env(**(env or {})),
                      cwd or os.getcwd())


def test_ctrl_c_during_the_model_call_cancels_the_turn(run, fake, isolated_env):
    fake.add(hang(30), answer("second answer"))
    with pty_grok(run) as p:
        p.expect("> ")
        p.send("first question\n")
        assert fake.wait_for_requests(1)
        p.sendintr()
        p.expect(r"\(cancelled\)")
        p.expect("> ")
        p.send("second question\n")
        p.expect("second answer")
        p.expect("> ")
        quit_cleanly(p)
    msgs = fake.chat_requests()[1].messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[1]["content"] == "first question" and "interrupted" in msgs[2]["content"]
    assert [m["content"] for m in session_messages(the_session(isolated_env))][-1].count("second answer")


def test_ctrl_c_while_a_reply_streams_keeps_no_partial_reply(run, fake, isolated_env):
    text = "word " * 400
    fake.add(answer(text, chunk_size=8, chunk_delay=0.02), answer("next"))
    with pty_grok(run) as p:
        p.expect("> ")
        p.send("stream please\n")
        p.expect("word word word")
        p.sendintr()
        p.expect(r"\(cancelled\)")
        p.expect("> ")
        p.send("more\n")
        p.expect("next")
        p.expect("> ")
        quit_cleanly(p)
    msgs = session_messages(the_session(isolated_env))
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert "interrupted" in msgs[1]["content"] and text not in json.dumps(msgs)


def quit_cleanly(p):
    """Ctrl-D at the prompt ends the REPL with exit 0 and no traceback."""
    p.sendeof()
    assert p.wait() == 0
    no_traceback(p.plain_output)


def cancel_while_running(p, message, marker, count):
    """Send message at the prompt, Ctrl-C once `count` processes with marker run, and wait for
    the prompt and for every one of them to be gone."""
    p.expect("> ")
    p.send(message + "\n")
    wait_until(lambda: len(procs_with(marker)) == count, what="the tools to start")
    p.sendintr()
    p.expect(r"\(cancelled\)")
    p.expect("> ")
    wait_until(lambda: procs_with(marker) == [], timeout=5, what="the tools to die")


def test_ctrl_c_during_a_tool_kills_its_process_group(run, fake, isolated_env):
    marker = "sleep 64.%06d" % os.getpid()          # other test runs on this machine have their own
    fake.add(tools(("bash", {"command": "%s7 & %s8" % (marker, marker)})), answer("after"))
    with pty_grok(run, "-y") as p:
        cancel_while_running(p, "run it", marker, 2)
        assert zombie_children(p.pid) == []
        p.send("next\n")
        p.expect("after")
        p.expect("> ")
        quit_cleanly(p)
    msgs = fake.chat_requests()[1].messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "cancelled" in msgs[3]["content"] and "interrupted" in msgs[4]["content"]
    assert session_messages(the_session(isolated_env))[:5] == msgs[1:]


def test_ctrl_c_during_parallel_tools_kills_them_all(run, fake, isolated_env):
    marker = "sleep 65.%06d" % os.getpid()          # other test runs on this machine have their own
    fake.add(tools(("bash", {"command": marker + "1"}), ("bash", {"command": marker + "2"})),
             answer("after"))
    with pty_grok(run, "-y") as p:
        cancel_while_running(p, "run both", marker, 2)
        quit_cleanly(p)


def test_ctrl_c_at_the_approval_prompt_cancels_the_turn(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "touch should-not-exist"})), answer("after"))
    with pty_grok(run) as p:
        p.expect("> ")
        p.send("make a file\n")
        p.expect(r"\[y\]es / \[N\]o / \[a\]lways")
        p.sendintr()
        p.expect(r"\(cancelled\)")
        p.expect("> ")
        p.send("go on\n")
        p.expect("after")
        p.expect("> ")
        quit_cleanly(p)
    assert not (isolated_env.work / "should-not-exist").exists()
    msgs = fake.chat_requests()[1].messages
    assert [m["role"] for m in msgs][-3:] == ["user", "assistant", "user"]


def test_ctrl_c_during_a_retry_wait(run, fake, isolated_env):
    fake.add(error(503, headers={"Retry-After": "30"}), answer("after"))
    with pty_grok(run) as p:
        p.expect("> ")
        p.send("hi\n")
        p.expect(r"retrying in 30\.0s")
        p.sendintr()
        p.expect(r"\(cancelled\)")
        p.expect("> ")
        p.send("again\n")
        p.expect("after")
        p.expect("> ")
        quit_cleanly(p)
    assert len(fake.chat_requests()) == 2


def test_sigterm_at_the_approval_prompt(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "touch never"})))
    with pty_grok(run) as p:
        p.expect("> ")
        p.send("go\n")
        p.expect(r"\[y\]es / \[N\]o / \[a\]lways")
        p.kill(signal.SIGTERM)
        assert p.wait() == 143
        no_traceback(p.plain_output)
    assert not (isolated_env.work / "never").exists()
    msgs = session_messages(the_session(isolated_env))
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]


def test_ctrl_c_at_the_prompt_and_ctrl_d(run, fake):
    with pty_grok(run) as p:
        p.expect("> ")
        p.sendintr()                 # at once: in the instant before readline waits for a key
        p.expect("> ")
        p.sendintr()
        p.expect("> ")
        # typed text first, then Ctrl-C once it is echoed (a Ctrl-C in the same instant as the
        # keys flushes them under readline's read, which then waits for the next key: GNU readline)
        p.send("half a line")
        p.expect("half a line")
        p.sendintr()
        p.expect("> ")
        quit_cleanly(p)
    assert fake.chat_requests() == []


def test_ctrl_c_in_grok_detailed_too(run, fake):
    fake.add(hang(30), answer("second answer"))
    with pty_grok(run, script=GROK_DETAILED) as p:
        p.expect("> ")
        p.send("first\n")
        assert fake.wait_for_requests(1)
        p.sendintr()
        p.expect(r"\(cancelled\)")
        p.send("second\n")
        p.expect("second answer")
        p.expect("> ")
        quit_cleanly(p)


def test_sigterm_in_the_repl_during_threaded_tools(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "sleep 66.11"}), ("bash", {"command": "sleep 66.12"})))
    with pty_grok(run, "-y") as p:
        p.expect("> ")
        p.send("run both\n")
        wait_until(lambda: len(procs_with("sleep 66.1")) == 2, what="both tools to start")
        p.kill(signal.SIGTERM)
        assert p.wait() == 143
        no_traceback(p.plain_output)
    assert procs_with("sleep 66.1") == []
    msgs = session_messages(the_session(isolated_env))
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert "interrupted" in msgs[-1]["content"]


def test_sigterm_at_the_prompt_exits_cleanly(run, fake):
    with pty_grok(run) as p:
        p.expect("> ")
        p.kill(signal.SIGTERM)
        assert p.wait() == 143
        no_traceback(p.plain_output)


def test_sigterm_headless_during_the_model_call(run, fake, isolated_env):
    fake.add(hang(30))
    proc = subprocess.Popen([sys.executable, str(GROK), "-p", "hi", "--format", "json"], env=run.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert fake.wait_for_requests(1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 143
    assert b"Traceback" not in err
    assert [e["type"] for e in events(out.decode())][:1] == ["step_start"]    # whole JSON lines only
    msgs = session_messages(the_session(isolated_env))
    assert msgs[0] == {"role": "user", "content": "hi"} and "interrupted" in msgs[-1]["content"]


def interrupted_headless(run, fake, requests):
    """`grok -p hi`, sent SIGINT once the fake has `requests` requests: (proc, stdout, stderr)."""
    proc = subprocess.Popen([sys.executable, str(GROK), "-p", "hi"], env=run.env(), preexec_fn=default_sigint,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert fake.wait_for_requests(requests)
    proc.send_signal(signal.SIGINT)
    return (proc,) + proc.communicate(timeout=10)


def test_sigint_headless_during_parallel_web_searches(run, fake):
    fake.add(tools(("web_search", {"query": "a"}), ("web_search", {"query": "b"})))
    fake.add(hang(30), hang(30), path="/responses")
    proc, out, err = interrupted_headless(run, fake, 3)
    assert proc.returncode == 130
    assert b"Traceback" not in err and b"Exception in thread" not in err
    assert b"cancelled" in err


def test_closing_the_terminal_kills_tools_and_keeps_the_session(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "sleep 67.31"})))
    p = pty_grok(run, "-y")
    try:
        p.expect("> ")
        p.send("run\n")
        wait_until(lambda: len(procs_with("sleep 67.31")) == 1, what="the tool to start")
        os.close(p.fd)                   # the terminal goes away: SIGHUP to the session
        p.fd = None
        deadline = time.monotonic() + 10
        while p.isalive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not p.isalive(), "grok did not exit after SIGHUP"
        assert p.status == 129
    finally:
        p.close()
        kill_marked("sleep 67.31")
    wait_until(lambda: procs_with("sleep 67.31") == [], timeout=5, what="the tool to die")
    msgs = session_messages(the_session(isolated_env))
    assert msgs[0] == {"role": "user", "content": "run"}
    assert msgs[1]["role"] == "assistant" and "sleep 67.31" in msgs[1]["content"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert "interrupted" in msgs[-1]["content"]      # the turn was settled, not just dropped


def test_sighup_headless(run, fake):
    fake.add(hang(30))
    proc = subprocess.Popen([sys.executable, str(GROK), "-p", "hi"], env=run.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert fake.wait_for_requests(1)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 129
    assert b"Traceback" not in err and out == b""


def test_ctrl_c_headless_text_mode_exits_130(run, fake):
    fake.add(hang(30))
    proc, out, err = interrupted_headless(run, fake, 1)
    assert proc.returncode == 130
    assert b"Traceback" not in err and b"cancelled" in err


# ================================================================ session faults
def test_sigkill_mid_turn_keeps_a_valid_resumable_session(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "sleep 68.41"})))
    proc = subprocess.Popen([sys.executable, str(GROK), "-p", "first", "-y"], env=run.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(procs_with("sleep 68.41")) == 1, what="the tool to start")
        proc.kill()
        proc.communicate(timeout=10)
    finally:
        kill_marked("sleep 68.41")        # SIGKILL cannot be caught: the tool's group outlives grok
    path = the_session(isolated_env)
    msgs = session_messages(path)
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    fake.add(answer("resumed"))
    p = run("-p", "second", "--resume", path.stem)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "resumed\n"
    sent = fake.chat_requests()[-1].messages
    assert sent[1] == {"role": "user", "content": "first"} and sent[-1]["content"] == "second"
    roles = [m["role"] for m in sent]
    assert all(a != b for a, b in zip(roles[1:], roles[2:])), roles   # user/assistant alternate


def write_session(isolated_env, sid, lines):
    sdir = data_dir(isolated_env) / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    path = sdir / (sid + ".jsonl")
    path.write_bytes(b"".join(l if isinstance(l, bytes) else (json.dumps(l) + "\n").encode() for l in lines))
    return path


def header(sid, cwd):
    return {"type": "session", "version": 1, "id": sid, "cwd": str(cwd), "model": "grok-4.3",
            "system": "SYSTEM PROMPT"}


def msg(role, content):
    return {"type": "message", "message": {"role": role, "content": content}}


def test_torn_and_corrupted_session_loads_what_is_valid(run, fake, isolated_env):
    sid = "20240101-000000-abcdef"
    path = write_session(isolated_env, sid, [
        header(sid, isolated_env.work), msg("user", "one"), msg("assistant", '{"response": "1"}'),
        b"\x00\xff garbage line\n", [1, 2], {"type": "usage", "cost_usd": "lots"},
        {"type": "message", "message": "not a dict"}, {"type": "reset", "messages": "abc"},
        {"type": "message", "message": {"role": 5, "content": None}},
        msg("user", "two"), msg("assistant", '{"response": "2"}'),
        b'{"type": "message", "message": {"role": "user", "cont'])
    fake.add(answer("three"))
    p = run("-p", "next", "--resume", sid)
    assert p.returncode == 0, p.stderr
    assert "damaged" in p.stderr and "warning" in p.stderr
    no_traceback(p.stderr)
    sent = fake.chat_requests()[0].messages
    assert sent[0] == {"role": "system", "content": "SYSTEM PROMPT"}
    assert [m["content"] for m in sent[1:]] == ["one", '{"response": "1"}', "two", '{"response": "2"}', "next"]
    # what this run appended starts on a line of its own: nothing more is lost
    lines = path.read_bytes().split(b"\n")
    torn = lines.index(b'{"type": "message", "message": {"role": "user", "cont')
    assert json.loads(lines[torn + 1])["message"] == {"role": "user", "content": "next"}
    assert [m["content"] for m in session_messages_lenient(path)][-2:] == ["next", json.dumps(
        {"tool_calls": [], "response": "three", "done": True})]


def session_messages_lenient(path):
    out = []
    for line in Path(path).read_bytes().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("type") == "message" and isinstance(rec["message"], dict):
            out.append(rec["message"])
    return out


def test_continue_and_listing_survive_damaged_sessions(run, fake, isolated_env):
    sid = "20240101-000000-abcdef"
    write_session(isolated_env, sid, [header(sid, isolated_env.work), [1], {"type": "usage", "cost_usd": "x"},
                                      {"type": "message", "message": None}, msg("user", "one"),
                                      msg("assistant", '{"response": "1"}')])
    fake.add(answer("continued"))
    p = run("-p", "more", "-c")
    assert p.returncode == 0, p.stderr
    assert fake.chat_requests()[0].messages[1]["content"] == "one"
    no_traceback(p.stderr)


def test_binary_garbage_session_file(run, fake, isolated_env):
    sid = "20240101-000000-bbbbbb"
    write_session(isolated_env, sid, [os.urandom(3000).replace(b"\n", b"")])
    fake.add(answer("fresh"))
    p = run("-p", "hello", "--resume", sid)
    assert p.returncode == 0, p.stderr
    assert "damaged" in p.stderr
    assert fake.chat_requests()[0].messages[-1]["content"] == "hello"


def test_two_processes_write_different_sessions(run, fake, isolated_env):
    fake.add(*[tools(("bash", {"command": "echo step %d" % i}), ("list_files", {})) for i in range(6)])
    fake.add(*[answer("done")] * 4)
    procs = [subprocess.Popen([sys.executable, str(GROK), "-p", "prompt-%d" % i, "-y", "--max-tool-rounds", "3"],
                              env=run.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for i in range(2)]
    for proc in procs:
        proc.communicate(timeout=30)
    files = session_files(isolated_env)
    assert len(files) == 2
    for path in files:
        msgs = session_messages(path)
        prompts = [m["content"] for m in msgs if m["role"] == "user" and m["content"].startswith("prompt-")]
        assert len(prompts) == 1
        assert records(path)[0]["id"] == path.stem


def test_unwritable_data_dir_warns_and_chats_on(run, fake, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    fake.add(tools(("bash", {"command": "echo hi"})), answer("works"))
    p = run("-p", "hi", "-y", env={"GROK_DATA_DIR": blocker / "data"})
    assert p.returncode == 0, p.stderr
    assert p.stdout == "works\n"
    assert p.stderr.count("cannot save the session") == 1
    no_traceback(p.stderr)
    # and the REPL too
    fake.add(answer("repl works"))
    p = run(input="hi\n", env={"GROK_DATA_DIR": blocker / "data"})
    assert p.returncode == 0 and "repl works" in p.stdout
    assert "cannot save the session" in p.stderr


def test_session_file_modes(run, fake, isolated_env):
    sessions = data_dir(isolated_env) / "sessions"
    sessions.mkdir(parents=True, mode=0o755)
    sessions.chmod(0o755)                      # a directory made by someone else, too open
    fake.add(answer("ok"))
    p = run("-p", "hi")
    assert p.returncode == 0
    path = the_session(isolated_env)
    assert path.stat().st_mode & 0o777 == 0o600
    assert sessions.stat().st_mode & 0o777 == 0o700
