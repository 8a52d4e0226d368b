"""Hostile input, second pass: a model, a file, an ACP client or a setting never gets past the approval and
never ends the program (exit 4, a traceback). One test per case; then one per weakness a mutation run found
in the tests of the trust, bounds and local-server code; then a seeded fuzz of tool arguments and ACP lines."""
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import GROK, TEST_KEY, load_grok
from fakeapi import answer, tools
from ptyrun import PROMPT, PtyProcess
from test_acp import Acp
from test_faults import events, no_traceback, procs_with, tool_outputs

APPROVE = r"run it\? \[y\]es / \[N\]o / \[a\]lways: "


def strict(line):
    """A line as a strict JSON parser reads it: NaN and Infinity are errors."""
    def refuse(name):
        raise ValueError("not JSON: %s" % name)
    return json.loads(line, parse_constant=refuse)


def denied(r):
    return r.returncode == 3 and "not in allowlist" in r.stderr


# ---------------------------------------------------------------- 1. --allow and paths outside the tree
@pytest.mark.parametrize("pattern", ["**", "*", "**/*", "?"])
def test_1_no_relative_pattern_matches_a_path_outside_the_tree(run, fake, isolated_env, pattern):
    bashrc = isolated_env.home / ".bashrc"
    bashrc.write_text("mine\n")
    for path in (str(bashrc), "../home/.bashrc"):
        fake.add(tools(("write_file", {"path": path, "content": "pwned\n"})))
        r = run("-p", "go", "--allow", pattern)
        assert denied(r), (path, r.returncode, r.stderr)
    assert bashrc.read_text() == "mine\n"
    fake.add(tools(("write_file", {"path": "x", "content": "inside\n"})), answer("done"))
    r = run("-p", "go", "--allow", pattern)           # inside the tree the same pattern still matches
    assert r.returncode == 0, r.stderr
    assert (isolated_env.work / "x").read_text() == "inside\n"


# ---------------------------------------------------------------- 2. command patterns and shell operators
@pytest.mark.parametrize("pattern, command", [
    ("cd build && touch *", "cd build && touch ok && touch ../PWNED"),
    ("cd build && touch *", "cd build && touch ok & touch ../PWNED"),
    ("echo hi > log.txt *", "echo hi > log.txt > PWNED"),
    ("*", "touch ok; touch PWNED"),
])
def test_2_a_star_never_covers_a_shell_operator(run, fake, isolated_env, pattern, command):
    work = isolated_env.work
    (work / "build").mkdir()
    fake.add(tools(("bash", {"command": command})))
    r = run("-p", "go", "--allow", pattern)
    assert denied(r), r.stderr
    assert not (work / "PWNED").exists()
    # the operators written in the pattern, at their place, still match
    fake.add(tools(("bash", {"command": "cd build && touch ok"}), ("bash", {"command": "echo hi > log.txt"})),
             answer("done"))
    r = run("-p", "go", "--allow", "cd build && touch *", "--allow", "echo hi > log.txt")
    assert r.returncode == 0, r.stderr
    assert (work / "build" / "ok").exists() and (work / "log.txt").read_text() == "hi\n"


# ---------------------------------------------------------------- 3. NUL and lone surrogates in arguments
BAD_CALLS = (("read_file", {"path": "a\u0000b"}), ("list_files", {"path": "\ud800"}),
             ("write_file", {"path": "w\u0000.txt", "content": "x"}),
             ("write_file", {"path": "w.txt", "content": "\udfff"}), ("bash", {"command": "echo a\u0000b"}),
             ("web_search", {"query": "q\ud83d"}))


def test_3_a_nul_or_lone_surrogate_fails_that_call_and_the_turn_goes_on(run, fake, isolated_env):
    fake.add(tools(*BAD_CALLS), answer("still here"))
    r = run("-p", "go", "--format", "json")
    assert r.returncode == 0, r.stderr
    no_traceback(r.stderr)
    outs = tool_outputs(r.stdout)
    why = "error: not run: the %s holds a NUL or a lone surrogate, which text cannot"
    assert outs == [why % k for k in ("path", "path", "path", "content", "command", "query")]
    assert os.listdir(str(isolated_env.work)) == []
    # the REPL answers the next line
    fake.add(tools(*BAD_CALLS), answer("first"), answer("second"))
    r = run(input="go\nand now?\n")
    assert r.returncode == 0 and "first" in r.stdout and "second" in r.stdout, r.stderr
    no_traceback(r.stderr)


def test_3_acp_answers_a_prompt_whose_tool_paths_hold_a_nul(run, fake, isolated_env):
    fake.add(tools(*BAD_CALLS), answer("still here"))
    acp = Acp(run)
    try:
        acp.init()
        sid = acp.new(isolated_env.work)
        result, updates = acp.prompt(sid, "go", on_request=lambda msg: {
            "outcome": {"outcome": "selected", "optionId": "allow_once"}})
        assert result["stopReason"] == "end_turn"
        failed = [u["params"]["update"] for u in updates if u["params"]["update"].get("status") == "failed"]
        assert len(failed) == len(BAD_CALLS)
        assert acp.close() == 0
    finally:
        acp.kill()
    no_traceback(acp.stderr.decode())


# ---------------------------------------------------------------- 4. invisible characters
HIDDEN = "\u00ad\u061c\u115f\u3164\u180e\u2028\u2029\ufe0f\U000e0041\U000e007f\u200d"


def test_4_invisible_characters_are_escapes_at_the_approval(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "echo safe" + HIDDEN + " done"})), answer("finished"))
    p = PtyProcess([sys.executable, str(GROK)], run.env(), isolated_env.work)
    p.expect(PROMPT)
    p.send("go\n")
    p.expect(r"echo safe\\xad\\u061c\\u115f\\u3164\\u180e\\u2028\\u2029\\ufe0f\\U000e0041\\U000e007f\\u200d done\s+"
             + APPROVE)
    p.send("n\n")
    p.expect(r"finished")
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    for char in HIDDEN:
        assert char not in p.output, ascii(char)


def test_4_visible_escapes_every_invisible_character_of_unicode():
    import unicodedata
    grok = load_grok()
    shown = {"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"}
    blank = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810),
             *range(0xFE00, 0xFE10), *range(0xE0000, 0xE1000)}
    chars = [chr(c) for c in range(0x110000) if c not in (9, 10)]
    out = grok.visible("\n".join(chars)).split("\n")
    assert len(out) == len(chars)
    for char, seen in zip(chars, out):
        if unicodedata.category(char) in shown or ord(char) in blank:
            assert seen.isascii() and seen.isprintable() and seen.startswith("\\"), ascii(char)
        else:
            assert seen == char, ascii(char)
    assert grok.visible("a\tb\nc") == "a\tb\nc" and grok.visible("a\nb", newlines=False) == "a\\nb"


# ---------------------------------------------------------------- 5./6. ACP: any line, strict JSON out
def test_5_acp_answers_any_nesting_and_stays_up(run):
    acp = Acp(run)
    try:
        deep_params = '{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"x": %s}}' % (
            "[" * 100000 + "]" * 100000)
        for line in ("[" * 100000, deep_params, "{" * 50000):
            acp.send(line)
            msg = acp.recv()
            assert msg["error"]["code"] == -32700 and msg["id"] is None, msg
        assert acp.init()["protocolVersion"] == 1
        assert acp.close() == 0
    finally:
        acp.kill()
    no_traceback(acp.stderr.decode())


def test_6_acp_ids_that_json_rpc_does_not_allow_are_invalid_and_output_is_strict(run, fake, isolated_env):
    acp = Acp(run)
    try:
        for bad_id in ("NaN", "1e400", "-Infinity", "1.5", "true", "[1]", "{}"):
            acp.send('{"jsonrpc": "2.0", "id": %s, "method": "initialize", "params": {"protocolVersion": 1}}'
                     % bad_id)
            msg = acp.recv()
            assert msg["error"]["code"] == -32600 and msg["id"] is None, (bad_id, msg)
        acp.send('{"jsonrpc": "1.0", "id": NaN}')
        assert acp.recv()["id"] is None
        # a model's NaN and 1e400 reach the client as null, in rawInput
        fake.add(tools(("read_file", {"path": "a.txt", "offset": float("nan"), "limit": float("inf")})),
                 answer("done"))
        acp.init()
        sid = acp.new(isolated_env.work)
        result, updates = acp.prompt(sid, "go")
        assert result["stopReason"] == "end_turn"
        raw = [u["params"]["update"].get("rawInput") for u in updates]
        assert {"path": "a.txt", "offset": None, "limit": None} in raw
        assert acp.close() == 0
    finally:
        acp.kill()
    for line in acp.raw:
        strict(line)
    # headless JSON events too
    fake.add(tools(("read_file", {"path": "a.txt", "offset": float("nan")})), answer("done"))
    r = run("-p", "go", "--format", "json")
    assert r.returncode == 0 and [strict(line) for line in r.stdout.splitlines()], r.stderr


# ---------------------------------------------------------------- 7. bounded threads
def thread_limit(tmp_path, limit):
    """Environment for a child that cannot have more than `limit` threads, as under a container's pids limit."""
    site = tmp_path / "thread_limit"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import threading\n"
        "_start = threading._start_new_thread\n"
        "def _limited(*args, **kw):\n"
        "    if threading.active_count() >= %d:\n"
        "        raise RuntimeError(\"can't start new thread\")\n"
        "    return _start(*args, **kw)\n"
        "threading._start_new_thread = _limited\n" % limit)
    return {"PYTHONPATH": str(site)}


def test_7_a_reply_runs_at_most_8_calls(run, fake, isolated_env):
    fake.add(tools(*[("bash", {"command": "echo %d >> ran.txt" % i}) for i in range(200)]), answer("done"))
    r = run("-p", "go", "-y")
    assert r.returncode == 0, r.stderr
    assert sorted((isolated_env.work / "ran.txt").read_text().split()) == [str(i) for i in range(8)]
    results = fake.chat_requests()[1].last_user
    assert results.count("\nerror: not run: one reply runs at most 8 tool calls; ask again for it") == 192


def test_7_no_thread_to_be_had_fails_a_call_not_the_run(run, fake, isolated_env, tmp_path):
    (isolated_env.work / "a.txt").write_text("text of a\n")
    calls = [("read_file", {"path": "a.txt"})] * 3 + [("bash", {"command": "exec sleep 61.%d7" % i})
                                                      for i in range(197)]
    fake.add(tools(*calls), answer("done"))
    r = run("-p", "go", "-y", "--format", "json", env=thread_limit(tmp_path, 1))
    assert r.returncode == 0, r.stderr
    no_traceback(r.stderr)
    outs = tool_outputs(r.stdout)
    assert outs[:3] == ["text of a\n"] * 3                  # run on the main thread
    assert outs[3:8] == ["error: bash failed: RuntimeError: can't start new thread"] * 5
    assert procs_with("sleep 61.") == []


# ---------------------------------------------------------------- 8. settings
@pytest.mark.parametrize("name, value", [
    ("GROK_PRICES", "nan,0.2,2.5"), ("GROK_PRICES", "1.25,inf,2.5"), ("GROK_PRICES", "1e308,1e308,1e308"),
    ("COST_LIMIT", "nan"), ("GROK_TIMEOUT", "inf"), ("GROK_TIMEOUT", "1e308"), ("GROK_CONTEXT_WINDOW", "1e400"),
    ("GROK_RETRY_BACKOFF", "inf"), ("GROK_MAX_TOKENS", "nan"), ("COMPACT_THRESHOLD", "-5"),
    ("HTTP_PROXY", "http://127.0.0.1:99999"), ("http_proxy", "http://127.0.0.1:abc"), ("HTTP_PROXY", "http://:80"),
])
def test_8_a_setting_that_cannot_work_ends_the_run_before_the_first_request(run, fake, name, value):
    fake.add(answer("paid for"))
    r = run("-p", "hi", env={name: value})
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("grok: " + name) and "internal error" not in r.stderr, r.stderr
    assert fake.requests == []


# ---------------------------------------------------------------- 9. .env files
def test_9_the_last_definition_in_a_dot_env_wins_and_utf16_is_read(run, fake, isolated_env):
    env_file = isolated_env.home / ".grok" / ".env"
    env_file.parent.mkdir()
    first, second = "xai-FIRST" + "1" * 24, "xai-SECOND" + "2" * 24
    for text, encoding, key in (("GROK_API_KEY=%s\nGROK_API_KEY=%s\n" % (first, second), "utf-8", second),
                                ("GROK_API_KEY=%s\n" % first, "utf-16", first),
                                ("GROK_API_KEY=%s\n" % second, "utf-16-be", second),
                                ("export GROK_API_KEY=%s\n" % first, "utf-8-sig", first)):
        data = text.encode(encoding)
        env_file.write_bytes(b"\xfe\xff" + data if encoding == "utf-16-be" else data)
        fake.add(answer("ok"))
        r = run("-p", "hi", env={"GROK_API_KEY": None})
        assert r.returncode == 0, (encoding, r.stderr)
        assert fake.chat_requests()[-1].headers["authorization"] == "Bearer " + key
    assert TEST_KEY not in json.dumps([dict(q.headers) for q in fake.chat_requests()])
