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
from fakeapi import answer, error, raw, reply, responses_reply, tools
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
    ("cd build && touch ?", "cd build && touch &"),
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
    """Environment for a child that cannot have more than `limit` threads, as under a container's pids
    limit; the HTTP client's deadline timers aside (they are not what this tests)."""
    site = tmp_path / "thread_limit"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import threading\n"
        "_start = threading._start_new_thread\n"
        "def _limited(run, *args, **kw):\n"
        "    timer = isinstance(getattr(run, '__self__', None), threading.Timer)\n"
        "    if not timer and sum(not isinstance(t, threading.Timer) for t in threading.enumerate()) >= %d:\n"
        "        raise RuntimeError(\"can't start new thread\")\n"
        "    return _start(run, *args, **kw)\n"
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
    assert r.stderr.startswith("grok: ") and name in r.stderr.split(" is ")[0], r.stderr
    assert "internal error" not in r.stderr
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


# ---------------------------------------------------------------- 10. what the tests did not notice
def test_10_a_sibling_sharing_the_working_dirs_prefix_is_outside(run, fake, isolated_env, tmp_path):
    (tmp_path / "work-keys").mkdir()
    (tmp_path / "work-keys" / "secret.txt").write_text("SIBLING-SECRET\n")
    fake.add(tools(("read_file", {"path": "../work-keys/secret.txt"})))
    r = run("-p", "go")
    assert denied(r), r.stderr
    assert "SIBLING-SECRET" not in json.dumps([q.json for q in fake.chat_requests()])


def test_10_a_group_writable_data_dir_is_refused(run, fake, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o770)
    r = run("-p", "hi", env={"GROK_DATA_DIR": shared})
    assert r.returncode == 1 and "is group/world-writable: not used" in r.stderr, r.stderr
    assert fake.requests == [] and os.listdir(str(shared)) == []


def test_10_the_repl_writes_no_history_into_an_unsafe_data_dir(run, fake, isolated_env, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o777)
    p = PtyProcess([sys.executable, str(GROK)], run.env(GROK_DATA_DIR=shared), isolated_env.work)
    p.expect(PROMPT)
    p.send("/help\n")
    p.expect(r"/clear")
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    assert os.listdir(str(shared)) == []


def test_10_a_dot_env_over_64_kb_is_not_read(run, fake, isolated_env):
    env_file = isolated_env.home / ".grok" / ".env"
    env_file.parent.mkdir()
    env_file.write_text("GROK_API_KEY=xai-%s\n# %s\n" % ("K" * 30, "x" * 70000))
    fake.add(answer("ok"))
    r = run("-p", "hi", env={"GROK_API_KEY": None})
    assert r.returncode == 1 and "no API key" in r.stderr, r.stderr
    assert fake.requests == []


def test_10_a_web_search_reserves_the_most_a_search_cost_so_far(run, fake):
    ticks = 10 ** 10
    fake.add(tools(("web_search", {"query": "a"})), tools(("web_search", {"query": "b"})), answer("done"))
    fake.add(*[responses_reply("found", usage={"cost_in_usd_ticks": ticks // 2}) for _ in range(2)])
    r = run("-p", "go", env={"COST_LIMIT": "0.9"})
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert len(fake.responses_requests()) == 1
    assert "not run: it would pass the cost limit: $0.5" in fake.chat_requests()[2].last_user


@pytest.mark.parametrize("usage, ticks", [
    ({"prompt_tokens": True, "completion_tokens": True, "total_tokens": True}, 0),
    ({"prompt_tokens": 10, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 10 ** 6}}, 27),
], ids=["true-is-no-count", "cached-above-input"])
def test_10_usage_that_is_not_a_count_costs_nothing_and_cached_never_passes_input(run, fake, usage, ticks):
    fake.add(answer("ok", usage=usage))
    r = run("-p", "hi", "--format", "json")
    assert r.returncode == 0, r.stderr
    (finish,) = [e for e in events(r.stdout) if e["type"] == "step_finish"]
    assert finish["usage"]["costUsdTicks"] == ticks and finish["usage"]["inputTokens"] == 10 * (ticks > 0)
    assert ("not counts" in r.stderr) == (ticks == 0)


def test_10_resume_takes_the_sessions_lock_before_reading_it(run, fake, isolated_env):
    import fcntl
    fake.add(answer("first"))
    assert run("-p", "hi").returncode == 0
    (path,) = (isolated_env.home / ".local" / "share" / "grok-agent" / "sessions").glob("*.jsonl")
    fd = os.open(str(path), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)       # as a running grok holds it
        fake.add(answer("second"))
        r = run("-c", input="again\n")
    finally:
        os.close(fd)
    assert r.returncode == 0 and "second" in r.stdout, r.stderr
    assert "is in use by another grok process: starting a new session" in r.stderr


def test_10_ollamas_llama_context_length_is_the_window(run, fake):
    fake.add(raw(200, {"model_info": {"general.architecture": "llama", "llama.context_length": 8192}}),
             path="/api/show")
    usage = [{"prompt_tokens": n, "completion_tokens": 50} for n in (100, 100, 100, 6500)]
    fake.add(*[tools(("list_files", {}), usage=u) for u in usage], reply("SUMMARY: listed."), answer("done"))
    r = run("-p", "go", env={"GROK_CONTEXT_WINDOW": None, "GROK_PRICES": None})
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert "context window: 8192 tokens (from the server's /api/show)" in r.stderr
    assert "compacted 3 older messages" in r.stderr         # 6,550 of 8,192 tokens is past 75%


def test_10_an_overflow_does_not_override_grok_context_window(run, fake):
    overflow = {"error": {"code": 400, "message": "the request exceeds the available context size",
                          "type": "exceed_context_size_error", "n_ctx": 8192}}
    fake.add(*[tools(("list_files", {})) for _ in range(5)], error(400, overflow), reply("SUMMARY: listed."),
             tools(("list_files", {}), usage={"prompt_tokens": 7000, "completion_tokens": 50}), answer("done"))
    r = run("-p", "go", env={"GROK_CONTEXT_WINDOW": "1000000"})
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert r.stderr.count("compacted") == 1 and len(fake.chat_requests()) == 9     # 7,050 of 1,000,000


@pytest.mark.parametrize("status", [405, 410, 501])
def test_10_web_search_is_withdrawn_when_the_server_has_no_responses_api(run, fake, status):
    fake.add(error(status), path="/responses")
    fake.add(tools(("web_search", {"query": "a"})), tools(("web_search", {"query": "b"})), answer("done"))
    r = run("-p", "go")
    assert r.returncode == 0, r.stderr
    assert len(fake.responses_requests()) == 1
    second = fake.chat_requests()[2].last_user
    assert "web_search is unavailable: the server has no Responses API (HTTP %d)" % status in second


# ---------------------------------------------------------------- fuzz: tool arguments and ACP lines
def fuzz_text(rng):
    """Text from every corner of Unicode: controls, NUL, lone surrogates, bidi and tag characters."""
    pools = ("abc ./-_*?~", "\x00\x1b\r\n\t\x7f\x85", "\ud800\udfff\udc80", "\u202e\u200b\ufeff\u2028",
             "\U000e0041\U0001f600\u00e9\u65e5", "${}();&|<>`'\"\\")
    size = rng.choice((0, 1, 3, 12, 40, 100001 if rng.random() < 0.05 else 5))
    return "".join(rng.choice(rng.choice(pools)) if rng.random() < 0.9 else chr(rng.randrange(0x110000))
                   for _ in range(size))


def fuzz_value(rng, depth=0):
    kind = rng.randrange(9 if depth < 4 else 7)
    simple = (lambda: fuzz_text(rng), lambda: rng.randrange(-10 ** 20, 10 ** 20), lambda: rng.random() * 1e308,
              lambda: rng.choice((float("nan"), float("inf"), -float("inf"), -0.0)), lambda: rng.random() < 0.5,
              lambda: None, lambda: fuzz_text(rng))
    if kind < 7:
        return simple[kind]()
    if kind == 7:
        return [fuzz_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {fuzz_text(rng): fuzz_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def fuzz_args(rng, spec):
    args = {k: fuzz_value(rng) if rng.random() < 0.5 else fuzz_text(rng) for k in spec if rng.random() < 0.8}
    if rng.random() < 0.2:
        args[fuzz_text(rng)] = fuzz_value(rng)
    return args


def test_fuzz_random_tool_arguments_never_end_the_repl(run, fake, isolated_env):
    rng = random.Random(2025)
    specs = load_grok().TOOLS
    turns = 12
    for i in range(turns):
        calls = [(name, fuzz_args(rng, specs[name].args)) for name in rng.choices(sorted(specs), k=8)]
        fake.add(tools(*calls), answer("answer %d" % i))
    r = subprocess.run([sys.executable, str(GROK)], input="".join("go %d\n" % i for i in range(turns)),
                       env=run.env(GROK_BASH_TIMEOUT="2"), cwd=str(isolated_env.work), capture_output=True,
                       text=True, errors="replace", timeout=120, start_new_session=True)
    assert r.returncode == 0, r.stderr[-3000:]
    no_traceback(r.stderr)
    assert all("answer %d" % i in r.stdout for i in range(turns))
    assert len(fake.chat_requests()) == 2 * turns


def test_fuzz_random_lines_never_end_the_acp_server(run, isolated_env):
    rng = random.Random(2026)
    methods = ["initialize", "authenticate", "session/new", "session/load", "session/prompt", "session/cancel",
               "nope"]
    acp = Acp(run)
    try:
        for n in range(300):
            shape = rng.randrange(4)
            if shape == 0:
                line = json.dumps(fuzz_value(rng))
            elif shape == 1:
                line = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))).replace(b"\n", b"")
            else:
                message = {"jsonrpc": "2.0", "method": rng.choice(methods), "params": fuzz_value(rng)}
                if shape == 2:
                    message["id"] = rng.choice((n, str(n), None, fuzz_value(rng)))
                line = json.dumps(message)
            acp.send(line if line.strip() else b"{}")
        acp.send({"jsonrpc": "2.0", "id": "last", "method": "initialize", "params": {"protocolVersion": 1}})
        answers = []
        while not answers or answers[-1].get("id") != "last":      # still up, and answering
            answers.append(acp.recv())
        assert answers[-1]["result"]["protocolVersion"] == 1 and len(answers) > 100
        assert acp.close() == 0
    finally:
        acp.kill()
    for line in acp.raw:
        assert strict(line)["jsonrpc"] == "2.0"
    no_traceback(acp.stderr.decode("utf-8", "replace"))


def test_8_acp_names_a_bad_proxy_at_its_start(run):
    r = subprocess.run([sys.executable, str(GROK), "--acp"], env=run.env(HTTP_PROXY="http://127.0.0.1:99999"),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                       start_new_session=True)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert r.stderr.startswith("grok: http_proxy / HTTP_PROXY is not a proxy URL"), r.stderr
