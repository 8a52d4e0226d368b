"""Self-tests of the test infrastructure: the fake API, the runner and the pty helper."""
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import TEST_KEY
from fakeapi import (answer, drop, drop_mid_body, error, hang, raw, reply, responses_reply,
                     sse, tools)
from ptyrun import PtyProcess


def post(fake, body, path="/chat/completions", headers=None, timeout=5):
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    req = urllib.request.Request(fake.url + path, data=data, method="POST",
                                 headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    return urllib.request.urlopen(req, timeout=timeout)


def fetch(fake, body, **kw):
    """POST and return the whole response body (closing the response)."""
    with post(fake, body, **kw) as r:
        return r.read()


def conn(fake, timeout=5):
    return http.client.HTTPConnection("127.0.0.1", fake.port, timeout=timeout)


def read_sse(resp):
    """data payloads of an SSE response, in order."""
    return [line[6:] for line in resp.read().decode().split("\n") if line.startswith("data: ")]


def test_plain_reply(fake):
    fake.add(answer("hi there"))
    with post(fake, {"model": "grok-x", "messages": [{"role": "user", "content": "q"}]}) as r:
        assert r.status == 200 and r.headers["Content-Length"]
        body = json.loads(r.read())
    assert body["object"] == "chat.completion" and body["model"] == "grok-x"
    msg = body["choices"][0]["message"]
    assert msg["role"] == "assistant" and body["choices"][0]["finish_reason"] == "stop"
    assert json.loads(msg["content"]) == {"tool_calls": [], "response": "hi there", "done": True}
    u = body["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] > 0
    assert u["prompt_tokens_details"] == {"cached_tokens": 0}


def test_tools_and_custom_usage(fake):
    fake.add(tools(("bash", {"command": "ls"}), ("read_file", {"path": "a"})),
             reply("plain text", usage={"prompt_tokens": 7}, finish_reason="length"))
    c = json.loads(json.loads(fetch(fake, {"messages": []}))["choices"][0]["message"]["content"])
    assert c == {"tool_calls": [{"tool": "bash", "args": {"command": "ls"}},
                                {"tool": "read_file", "args": {"path": "a"}}],
                 "response": None, "done": False}
    b = json.loads(fetch(fake, {"messages": []}))
    assert b["choices"][0]["message"]["content"] == "plain text"
    assert b["choices"][0]["finish_reason"] == "length" and b["usage"] == {"prompt_tokens": 7}


def test_streamed_reply(fake):
    text = "x" * 45
    fake.add(reply(text, chunk_size=10), reply(text))
    body = {"messages": [], "stream": True, "stream_options": {"include_usage": True}}
    with post(fake, body) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        assert r.headers["Transfer-Encoding"] == "chunked" and r.headers["Content-Length"] is None
        events = read_sse(r)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert len(chunks) == 5 + 2  # 5 pieces, finish chunk, usage chunk
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1]) == text
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 11
    # without include_usage: no usage chunk
    with post(fake, {"messages": [], "stream": True}) as r:
        events = read_sse(r)
    assert events[-1] == "[DONE]" and not any("usage" in e for e in events[:-1])


def test_stream_forced_on_and_off(fake):
    fake.add(reply("abc", stream=False), reply("abc", stream=True))
    with post(fake, {"stream": True}) as r:
        assert json.load(r)["choices"][0]["message"]["content"] == "abc"
    with post(fake, {}) as r:
        assert read_sse(r)[-1] == "[DONE]"


def test_keep_alive_one_connection(fake):
    fake.add(answer("one"), reply("two", stream=True), answer("three"))
    c = conn(fake)
    for _ in range(3):
        c.request("POST", "/v1/chat/completions", body=b'{"messages": []}',
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200
        r.read()
    c.close()
    assert fake.connections == 1
    assert len({r.conn_id for r in fake.requests}) == 1 and fake.requests[0].conn_id == 1


def test_keep_alive_is_fast(fake):
    fake.add(*[answer("x") for _ in range(10)])
    c = conn(fake)
    t = time.monotonic()
    for _ in range(10):
        c.request("POST", "/v1/chat/completions", body=b"{}")
        c.getresponse().read()
    assert time.monotonic() - t < 0.3  # no 40 ms delayed-ACK stalls (Nagle disabled)
    c.close()


def failing(fake, body=b"{}", method="POST", path="/chat/completions"):
    """(status, headers, body) of a request that must fail with an HTTP error status."""
    c = conn(fake)
    try:
        c.request(method, "/v1" + path, body=body if method == "POST" else None)
        r = c.getresponse()
        assert r.status >= 400, r.status
        return r.status, r.headers, r.read()
    finally:
        c.close()


def test_error_status_and_body(fake):
    fake.add(error(429, headers={"Retry-After": "3"}), error(500, "oops"),
             error(400, {"code": "x", "error": "bad response_format"}))
    status, headers, body = failing(fake)
    assert status == 429 and headers["Retry-After"] == "3"
    assert json.loads(body) == {"code": "Too Many Requests", "error": "fake error 429"}
    status, headers, body = failing(fake)
    assert status == 500 and body == b"oops" and headers["Content-Type"].startswith("text/plain")
    assert json.loads(failing(fake)[2])["error"] == "bad response_format"


def test_empty_queue_is_418_and_get_is_404(fake):
    status, _, body = failing(fake)
    assert status == 418 and "no scripted reply" in json.loads(body)["error"]
    fake.add(answer("x"))
    assert failing(fake, method="GET", path="/models")[0] == 404
    assert [r.method for r in fake.requests] == ["POST", "GET"] and fake.pending() == 1


def test_raw_garbage(fake):
    fake.add(raw(200, b"{not json"), raw(502, "<html>bad gateway</html>",
                                         headers={"Content-Type": "text/html"}))
    assert fetch(fake, {}) == b"{not json"
    status, headers, body = failing(fake)
    assert status == 502 and headers["Content-Type"] == "text/html"
    assert headers["Content-Length"] == str(len(body))


def test_drop(fake):
    fake.add(drop(), answer("after"))
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
        post(fake, {})
    assert json.loads(fetch(fake, {}))["choices"]  # the server keeps serving


def test_drop_mid_body(fake):
    fake.add(drop_mid_body())
    c = conn(fake)
    c.request("POST", "/v1/chat/completions", body=b"{}")
    r = c.getresponse()
    assert r.status == 200
    with pytest.raises(http.client.IncompleteRead):
        r.read()
    c.close()


def test_sse_raw_events_and_truncation(fake):
    fake.add(sse(['{"choices":[{"delta":{"content":"a"}}]}', "not json"]),
             sse(['{"choices":[]}'], truncate=True))
    with post(fake, {}) as r:
        assert read_sse(r) == ['{"choices":[{"delta":{"content":"a"}}]}', "not json", "[DONE]"]
    c = conn(fake)
    c.request("POST", "/v1/chat/completions", body=b"{}")
    r = c.getresponse()
    assert r.readline() == b'data: {"choices":[]}\n'
    with pytest.raises(http.client.IncompleteRead):
        r.read()
    c.close()


def test_hang_and_delay(fake):
    fake.add(hang(2), answer("late", delay=0.3))
    with pytest.raises(OSError):  # socket.timeout / TimeoutError / URLError
        post(fake, {}, timeout=0.3)
    assert fake.wait_for_requests(1, timeout=1)
    t = time.monotonic()
    fetch(fake, {})
    assert time.monotonic() - t >= 0.3
    assert fake.requests[1].time - t < 0.2  # recorded on arrival, before the delay


def test_responses_reply(fake):
    fake.add(responses_reply("It is sunny.", urls=["https://a.example", "https://b.example"]))
    fake.add(answer("chat"))
    b = json.loads(fetch(fake, {"model": "m", "input": "weather?"}, path="/responses"))
    assert b["object"] == "response" and b["citations"] == ["https://a.example", "https://b.example"]
    msg = b["output"][1]
    assert b["output"][0]["type"] == "web_search_call" and msg["type"] == "message"
    assert msg["content"][0]["text"] == "It is sunny."
    assert [a["url"] for a in msg["content"][0]["annotations"]] == b["citations"]
    assert b["usage"]["total_tokens"] == 70
    assert len(fake.responses_requests()) == 1 and fake.chat_requests() == []
    assert fake.pending() == 1


def test_request_recording(fake):
    fake.add(answer("ok"))
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "first"},
            {"role": "assistant", "content": "a"}, {"role": "user", "content": "second"}]
    fetch(fake, {"model": "grok-4.3", "messages": msgs},
         headers={"Authorization": "Bearer k", "X-Grok-Conv-Id": "abc"})
    assert fake.wait_for_requests(1, timeout=1) and not fake.wait_for_requests(2, timeout=0.05)
    r = fake.chat_requests()[0]
    assert r.method == "POST" and r.path == "/v1/chat/completions"
    assert r.headers["authorization"] == "Bearer k" and r.headers["x-grok-conv-id"] == "abc"
    assert r.json["model"] == "grok-4.3" and json.loads(r.body) == r.json
    assert r.messages == msgs and r.last_user == "second"
    assert isinstance(r.time, float) and r.conn_id == 1


def test_unparsable_request_body(fake):
    fake.add(answer("ok"))
    fetch(fake, b"\x00garbage")
    r = fake.requests[0]
    assert r.json is None and r.messages == [] and r.last_user is None


def test_isolated_env(isolated_env):
    assert os.environ["HOME"] == str(isolated_env.home)
    assert Path.cwd() == isolated_env.work
    assert not [k for k in os.environ if k.startswith(("GROK_", "XAI_"))]
    assert "NO_COLOR" not in os.environ and "XDG_DATA_HOME" not in os.environ


def test_run_fixture(run, fake, tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import json, os, sys\n"
                      "print(json.dumps({'env': dict(os.environ), 'args': sys.argv[1:],\n"
                      "                  'cwd': os.getcwd(), 'stdin': sys.stdin.read()}))\n")
    p = run("a", 1, script=script, env={"NO_COLOR": None, "GROK_MODEL": "m"}, input="in")
    out = json.loads(p.stdout)
    assert p.returncode == 0 and out["args"] == ["a", "1"] and out["stdin"] == "in"
    env = out["env"]
    assert env["GROK_API_KEY"] == TEST_KEY and env["GROK_BASE_URL"] == fake.url
    assert env["GROK_MODEL"] == "m" and "NO_COLOR" not in env
    assert env["HOME"] == str(tmp_path / "home") and out["cwd"] == str(tmp_path / "work")
    assert json.loads(run(script=script).stdout)["stdin"] == ""  # DEVNULL
    assert run.env(X=1)["X"] == "1" and run.env()["GROK_RETRY_BACKOFF"] == "0.01"


def test_pty_process(run, tmp_path):
    code = "import sys; print(sys.stdin.isatty()); print(input('name? '))"
    with PtyProcess([sys.executable, "-c", code], run.env(), tmp_path, cols=80, rows=24) as p:
        p.expect(r"True")
        p.expect(r"name\? ")
        p.send("bob\n")
        p.expect(r"bob\r\nbob")  # the terminal's echo, then the print
        assert p.wait() == 0
        assert "name? bob" in p.plain_output


def test_pty_interrupt_and_size(run, tmp_path):
    # "ready" is printed inside the try, so the Ctrl-C cannot arrive before the handler is in place.
    code = ("import os, time; print(os.get_terminal_size())\n"
            "try:\n    print('ready', flush=True)\n    time.sleep(10)\nexcept KeyboardInterrupt:\n"
            "    print('\\x1b[31mINT\\x1b[0m')")
    with PtyProcess([sys.executable, "-c", code], run.env(), tmp_path, cols=123, rows=45) as p:
        p.expect(r"columns=123, lines=45")
        p.expect("ready")
        p.sendintr()
        p.expect(r"INT", timeout=5)
        assert p.wait() == 0
        assert "\x1b[31m" in p.output and "\x1b" not in p.plain_output
    with PtyProcess([sys.executable, "-c", "import time; time.sleep(30)"], run.env(), tmp_path) as p:
        with pytest.raises(AssertionError, match="timeout"):
            p.expect("never", timeout=0.2)
        p.kill()
        assert p.wait() == -9
