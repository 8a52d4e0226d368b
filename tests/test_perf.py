"""Performance properties that can be checked exactly: streaming order, one connection per
session, a stable request prefix for the prompt cache, a small first request, append-only
session writes. No timing assertions: tests/bench.py measures the times."""
import json
import os
import select
import subprocess
import sys
import threading
import time

import pytest

from conftest import GROK, load_grok
from fakeapi import answer, reply, sse, tools


@pytest.fixture(scope="module")
def g():
    return load_grok("grok_perf_under_test")


def contract(text, calls=()):
    return json.dumps({"tool_calls": [{"tool": n, "args": a} for n, a in calls], "response": text,
                       "done": not calls})


def popen(run, *args):
    return subprocess.Popen([sys.executable, str(GROK)] + list(args), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=run.env())


def read_until(proc, needle, fake, timeout=30):
    """Read proc's stdout as it comes; at the moment `needle` shows up, return the output so
    far and what the fake had sent of its latest reply by then (chunks, whether finished)."""
    fd = proc.stdout.fileno()
    out = b""
    deadline = time.monotonic() + timeout     # a guard against hanging, not a measurement
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.1)[0]:
            continue
        data = os.read(fd, 4096)
        if not data:
            break
        out += data
        if needle in out:
            req = fake.chat_requests()[-1]
            return out, len(req.sent), req.done_at
    raise AssertionError("%r never appeared on stdout; got %r" % (needle, out))


def finish(proc, timeout=30):
    if proc.stdin:
        proc.stdin.close()
        proc.stdin = None       # closed already: communicate() must not flush it
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode(), err.decode()


def session_files(isolated_env):
    root = isolated_env.home / ".local" / "share" / "grok-agent" / "sessions"
    return sorted(root.glob("*.jsonl"))


# ---------------------------------------------------------------- streaming
STREAMED = "Streaming works fine, word by word."


@pytest.mark.parametrize("mode", ["headless", "repl"])
def test_answer_reaches_stdout_before_the_last_chunk_is_sent(run, fake, mode):
    chunks = (len(contract(STREAMED)) + 4) // 5
    last_chunk = threading.Event()
    fake.add(answer(STREAMED, chunk_size=5, hold=last_chunk))
    proc = popen(run, "-p", "hi") if mode == "headless" else popen(run)
    if mode == "repl":
        proc.stdin.write(b"hi\n")
    proc.stdin.close()
    try:
        out, sent, done_at = read_until(proc, b"Streaming", fake)
    finally:
        last_chunk.set()
    code, rest, err = finish(proc)
    assert code == 0, err
    # Shown while the fake held back its last chunk (how many it had sent by then varies with load).
    assert done_at is None and 0 < sent <= chunks - 1
    assert (out.decode() + rest).strip() == STREAMED  # and shown once, whole
    assert fake.chat_requests()[0].json["stream"] is True
    assert fake.chat_requests()[0].json["stream_options"] == {"include_usage": True}


def test_plain_json_reply_to_a_stream_request_is_accepted(run, fake):
    fake.add(answer("not streamed", stream=False))
    r = run("-p", "hi")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "not streamed\n"
    assert fake.chat_requests()[0].json["stream"] is True


def test_usage_in_the_first_chunk_is_kept(run, fake):
    content = contract("ok")
    fake.add(sse([
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": content[:10]}}],
         "usage": {"prompt_tokens": 123, "completion_tokens": 7, "total_tokens": 130}},
        {"choices": [{"index": 0, "delta": {"content": content[10:]}, "finish_reason": "stop"}], "usage": None},
    ]))
    r = run("-p", "hi", "--format", "json")
    assert r.returncode == 0, r.stderr
    finish_event = [json.loads(line) for line in r.stdout.splitlines() if '"step_finish"' in line][0]
    assert finish_event["usage"]["inputTokens"] == 123
    assert finish_event["usage"]["outputTokens"] == 7


def test_a_retried_stream_is_parsed_afresh(run, fake):
    # Whatever the REPL showed of the broken attempt, the answer follows whole and ungarbled.
    content = contract("Hello world, again.")
    cut = content.index("wor") + 3
    fake.add(sse([{"choices": [{"index": 0, "delta": {"content": content[:cut]}}]}], truncate=True),
             answer("Hello world, again."))
    r = run(input="hi\n")
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stdout.splitlines() if line][-1] == "Hello world, again."
    assert "retrying" in r.stderr


def test_an_invalid_streamed_reply_is_followed_by_the_whole_answer(run, fake):
    content = contract("Cut off here")
    fake.add(reply(content[:content.index(" here")], finish_reason="length"), answer("Final."))
    r = run(input="hi\n")
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stdout.splitlines() if line][-2:] == ["Cut off", "Final."]
    assert "max_tokens" in fake.chat_requests()[1].last_user


# ------------------------------------------------ the incremental "response" parser
def streamed(g, content, pieces):
    s = g.ResponseStreamer()
    text, hints = "", []
    for piece in pieces:
        out = s.feed(piece)
        if out:
            text += out
            hints.append(s.tool_calls)
    return text, hints


TRICKY = [
    contract('quotes " and \\ backslash / slash'),
    contract("lines\nand\ttabs\r\b\f done"),
    contract("accents: caf\u00e9 \u00fc \u4e2d\u6587"),
    json.dumps({"tool_calls": [], "response": "emoji \U0001F600 and \U0001F680!", "done": True}),  # \ud83d\ude00
    json.dumps({"tool_calls": [], "response": "raw \u00e9 \U0001F600", "done": True}, ensure_ascii=False),
    '{ "tool_calls" : [ ] , "response" : "spaced \\u0041\\u00e9" , "done" : true }',
    '```json\n{"tool_calls": [], "response": "fenced", "done": true}\n```',
    json.dumps({"task": "response", "goal": "\"response\": \"no\"", "tool_calls": [], "response": "yes"}),
    json.dumps({"meta": {"response": "nested"}, "list": [{"response": "deep"}], "response": "top"}),
]


@pytest.mark.parametrize("content", TRICKY)
def test_streamer_matches_json_at_every_chunk_boundary(g, content):
    start = content.find("{")
    expected = json.loads(content[start:content.rfind("}") + 1])["response"]
    assert streamed(g, content, [content])[0] == expected
    assert streamed(g, content, list(content))[0] == expected
    for i in range(len(content) + 1):
        assert streamed(g, content, [content[:i], content[i:]])[0] == expected, i
    for i in range(0, len(content), 3):
        for j in range(i, min(len(content), i + 9)):
            assert streamed(g, content, [content[:i], content[i:j], content[j:]])[0] == expected, (i, j)


def test_streamer_joins_a_surrogate_pair_split_between_chunks(g):
    content = '{"tool_calls": [], "response": "a\\ud83d\\ude00b"}'
    split = content.index("\\ude00")
    for i in range(split - 6, split + 7):
        assert streamed(g, content, [content[:i], content[i:]])[0] == "a\U0001F600b"


@pytest.mark.parametrize("content,expected", [
    ('{"response": "x\\ud83dy"}', "x\ufffdy"),           # high surrogate without its pair
    ('{"response": "x\\ude00y"}', "x\ufffdy"),           # low surrogate alone
    ('{"response": "x\\ud83d"}', "x\ufffd"),             # high surrogate at the end
    ('{"response": "\\ud83d\\ud83d\\ude00"}', "\ufffd\U0001F600"),
])
def test_streamer_shows_lone_surrogates_as_replacement_characters(g, content, expected):
    for i in range(len(content) + 1):
        text = streamed(g, content, [content[:i], content[i:]])[0]
        assert text == expected
        text.encode("utf-8")        # printable


def test_streamer_does_not_stream_nested_response_keys(g):
    content = json.dumps({"tool_calls": [{"tool": "write_file", "args": {
        "path": "a.json", "content": '{"response": "inner"}', "response": "nested"}}],
        "response": "outer", "done": False})
    text, hints = streamed(g, content, list(content))
    assert text == "outer"
    assert set(hints) == {"nonempty"}


def test_streamer_reports_whether_tool_calls_came_first(g):
    after_empty = contract("answer")
    assert set(streamed(g, after_empty, list(after_empty))[1]) == {"empty"}
    before = json.dumps({"response": "progress", "tool_calls": [{"tool": "bash", "args": {}}]})
    assert set(streamed(g, before, list(before))[1]) == {"unknown"}
    assert streamed(g, '{"tool_calls": [], "response": null, "done": true}', ["{", '"tool_calls": [], "res',
                                                                             'ponse": null}'])[0] == ""


def test_headless_streams_only_a_final_answer(run, fake):
    # "response" before "tool_calls": not known to be the answer while streaming, printed whole at the end.
    late = json.dumps({"response": "checking", "tool_calls": [{"tool": "list_files", "args": {}}], "done": False})
    fake.add(reply(late, chunk_size=4), reply(json.dumps({"response": "the end", "tool_calls": [], "done": True}),
                                              chunk_size=4))
    r = run("-p", "hi")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "the end\n"
    assert "checking" in r.stderr


# -------------------------------------------------------- one connection per session
def test_one_connection_for_a_session_of_tool_rounds_and_repl_turns(run, fake, isolated_env):
    (isolated_env.work / "a.txt").write_text("alpha\n")
    fake.add(tools(("list_files", {"path": "."})), tools(("read_file", {"path": "a.txt"})),
             tools(("list_files", {})), answer("first done"), answer("second done"))
    r = run(input="do three things\nand one more\n")
    assert r.returncode == 0, r.stderr
    assert "first done" in r.stdout and "second done" in r.stdout
    reqs = fake.chat_requests()
    assert len(reqs) == 5
    assert fake.connections == 1
    assert {q.conn_id for q in reqs} == {1}
    # The prompt cache: every request extends the previous one; the conversation id is the session's.
    for before, after in zip(reqs, reqs[1:]):
        assert after.messages[:len(before.messages)] == before.messages
        assert len(after.messages) > len(before.messages)
    [session] = session_files(isolated_env)
    assert {q.headers.get("x-grok-conv-id") for q in reqs} == {session.name[:-len(".jsonl")]}
    assert "alpha" in reqs[2].last_user


def test_headless_tool_turn_uses_one_connection(run, fake):
    fake.add(*[tools(("list_files", {}))] * 3, answer("done"))
    r = run("-p", "hi")
    assert r.returncode == 0, r.stderr
    assert len(fake.chat_requests()) == 4
    assert fake.connections == 1


def test_idle_connection_closed_by_the_server_is_reopened_without_a_retry(run, fake):
    fake.add(tools(("list_files", {}), close=True), tools(("list_files", {}), close=True), answer("made it"))
    r = run("-p", "hi", env={"GROK_MAX_RETRIES": "0"})     # a reconnect is not a retry
    assert r.returncode == 0, r.stderr
    assert r.stdout == "made it\n"
    assert "retry" not in r.stderr.lower()
    assert len(fake.chat_requests()) == 3          # nothing sent twice
    assert fake.connections == 3


def test_connection_close_header_is_honoured(run, fake):
    fake.add(tools(("list_files", {}), headers={"Connection": "close"}), answer("ok"))
    r = run("-p", "hi")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n" and "retry" not in r.stderr.lower()
    assert [q.conn_id for q in fake.chat_requests()] == [1, 2]


def test_repl_reconnects_after_the_server_closed_the_idle_connection(run, fake):
    fake.add(answer("one", close=True), answer("two"))
    r = run(input="first\nsecond\n", env={"GROK_MAX_RETRIES": "0"})
    assert r.returncode == 0, r.stderr
    assert "one" in r.stdout and "two" in r.stdout
    assert "retry" not in r.stderr.lower()
    assert len(fake.chat_requests()) == 2 and fake.connections == 2
    first, second = fake.chat_requests()
    assert second.messages[:len(first.messages)] == first.messages


# ------------------------------------------------------------- request size, usage
def test_first_request_with_the_shipped_skills_fits_in_6_kb(run, fake):
    fake.add(answer("hi"))
    r = run("-p", "hello")
    assert r.returncode == 0, r.stderr
    req = fake.chat_requests()[0]
    system = req.messages[0]["content"]
    assert "shell-safety" in system and "code-review" in system   # the shipped skills are listed
    assert len(req.body) <= 6 * 1024, len(req.body)


def test_cached_tokens_are_reported_per_step(g, fake, monkeypatch):
    monkeypatch.setenv("GROK_API_KEY", "xai-TESTKEY0123456789abcdefABCDEF")
    monkeypatch.setenv("GROK_BASE_URL", fake.url)
    usage = {"prompt_tokens": 1000, "completion_tokens": 5, "total_tokens": 1005,
             "prompt_tokens_details": {"cached_tokens": 900}}
    fake.add(answer("hi", usage=usage))
    steps = []

    class UI(g.UI):
        def step_finish(self, step, info):
            steps.append(info)

    agent = g.Agent(g.Config(), UI())
    try:
        agent.run_turn("hello")
    finally:
        agent.close()
    assert steps[0]["tokens"]["cached"] == 900
    assert agent.last_usage["prompt_tokens_details"]["cached_tokens"] == 900
    assert g.usage_numbers({"input_tokens_details": {"cached_tokens": 7}})["cached"] == 7
    assert g.usage_numbers({"prompt_tokens_details": None})["cached"] == 0 == g.usage_numbers(None)["cached"]


# ------------------------------------------------------------------ session writes
def test_session_file_is_only_appended_to(run, fake, isolated_env):
    fake.add(tools(("list_files", {})), answer("first"), answer("second"))
    proc = popen(run)
    proc.stdin.write(b"one\n")
    proc.stdin.flush()
    read_until(proc, b"first", fake)
    [path] = session_files(isolated_env)
    deadline = time.monotonic() + 30
    while path.read_bytes().count(b'"role": "assistant"') < 2 and time.monotonic() < deadline:
        time.sleep(0.01)        # the streamed answer is shown before it is saved
    before = path.read_bytes()
    # Change a byte of what is already written: a rewrite from memory would undo it.
    marked = before.replace(b'"grok_reply"', b'"GROK_REPLY"', 1)
    assert marked != before
    path.write_bytes(marked)
    inode = path.stat().st_ino
    proc.stdin.write(b"two\n")
    proc.stdin.close()
    code, _, err = finish(proc)
    assert code == 0, err
    after = path.read_bytes()
    assert after.startswith(marked) and path.stat().st_ino == inode
    added = [json.loads(line) for line in after[len(marked):].splitlines()]
    assert [rec["message"]["role"] for rec in added if rec["type"] == "message"] == ["user", "assistant"]


def test_a_plain_http_server_never_loads_ssl(run, fake):
    # ssl costs about 4 MB and 4 ms at start-up; a local or loopback server over http needs none of it.
    fake.add(tools(("bash", {"command": "true"})), answer("ok"))
    r = subprocess.run([sys.executable, "-X", "importtime", str(GROK), "-y", "-p", "hi"], env=run.env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr[-2000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    assert "http.client" in imported and "_ssl" not in imported     # ("ssl" is listed: the hidden, failed try)
