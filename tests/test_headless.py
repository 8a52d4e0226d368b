"""Headless mode (`grok -p`): the JSONL event stream, text mode, exit codes,
approval by --allow, stdin prompts, resume, interrupts. Every test runs the real script."""
import json
import re
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from conftest import GROK, ROOT, TEST_KEY
from fakeapi import answer, drop, error, hang, reply, sse, tools
from ptyrun import default_sigint

JQ = shutil.which("jq")
need_jq = pytest.mark.skipif(JQ is None, reason="jq is not installed (.ci/run installs it with apt-get)")


# ------------------------------------------------------------------ helpers
def events(stdout):
    """Every stdout line is one JSON object (nothing else may be on stdout)."""
    assert stdout.endswith("\n") or stdout == ""
    return [json.loads(line) for line in stdout.splitlines()]


def is_int(x):
    return type(x) is int


COMMON = {"type": str, "timestamp": is_int, "sessionID": str, "stepNumber": is_int}
SCHEMA = {
    "step_start": {},
    "text": {"text": str},
    "tool_use": {"toolCall": {"id": str, "name": str, "args": dict},
                 "toolResult": {"id": str, "success": bool, "output": str},
                 "timing": {"startedAt": is_int, "finishedAt": is_int, "durationMs": is_int}},
    "step_finish": {"finishReason": str,
                    "usage": {"inputTokens": is_int, "outputTokens": is_int, "totalTokens": is_int,
                              "costUsdTicks": is_int}},
    "error": {"message": str},
}


def check_fields(obj, spec, where):
    for name, kind in spec.items():
        assert name in obj, "%s: missing %r in %r" % (where, name, obj)
        value = obj[name]
        if isinstance(kind, dict):
            assert isinstance(value, dict), where
            check_fields(value, kind, where + "." + name)
        elif isinstance(kind, type):
            assert type(value) is kind, "%s.%s: %r is not %s" % (where, name, value, kind.__name__)
        else:
            assert kind(value), "%s.%s: %r" % (where, name, value)


def check_schema(evs, session_id=True):
    for ev in evs:
        assert ev["type"] in SCHEMA, ev
        common = dict(COMMON)
        if ev["type"] == "error":
            assert "stepNumber" not in ev
            del common["stepNumber"]
        if not session_id:
            assert "sessionID" not in ev
            del common["sessionID"]
        check_fields(ev, common, ev["type"])
        check_fields(ev, SCHEMA[ev["type"]], ev["type"])
        assert ev["timestamp"] > 10 ** 12          # milliseconds since the epoch
        if ev["type"] == "tool_use":
            assert ev["toolResult"]["id"] == ev["toolCall"]["id"]
            t = ev["timing"]
            assert t["startedAt"] <= t["finishedAt"] and t["durationMs"] == t["finishedAt"] - t["startedAt"]


LETTERS = {"step_start": "S", "text": "T", "tool_use": "U", "step_finish": "F", "error": "E"}


def check_order(evs):
    """step_start, text?, tool_use*, step_finish per step, never interleaved; an error ends
    the stream (after a step whose model call failed, there is no step_finish)."""
    shape = "".join(LETTERS[e["type"]] for e in evs)
    assert re.fullmatch(r"(ST?U*F)*S?E?", shape), shape
    step = 0
    for ev in evs:
        if ev["type"] == "step_start":
            step += 1
        if ev["type"] != "error":
            assert ev["stepNumber"] == step, (shape, ev)
    stamps = [e["timestamp"] for e in evs]
    assert stamps == sorted(stamps)
    return shape


def sessions_dir(env):
    return env.home / ".local" / "share" / "grok-agent" / "sessions"


def session_messages(env, session_id):
    path = sessions_dir(env) / (session_id + ".jsonl")
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["message"] for r in recs if r["type"] == "message"]


def shell(run, script, **env):
    """Run a bash pipeline with $GROK pointing at the script (as a user's CI step would)."""
    e = run.env(GROK="%s %s" % (sys.executable, GROK), **env)
    return subprocess.run(["bash", "-c", "set -o pipefail\n" + script], env=e, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def usage(prompt, completion, **extra):
    u = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    u.update(extra)
    return u


# ------------------------------------------------------- the event stream
def test_multi_step_run_has_valid_events_in_order(run, fake, isolated_env):
    (isolated_env.work / "notes.txt").write_text("remember the milk\n")
    fake.add(tools(("bash", {"command": "echo one"}), ("read_file", {"path": "notes.txt"}),
                   ("list_files", {}), response="Looking around first.",
                   usage=usage(1000, 100, cost_in_usd_ticks=15000000)),
             tools(("write_file", {"path": "out/result.txt", "content": "42"}),
                   ("bash", {"command": "exit 3"}), usage=usage(2000, 200)),
             answer("Done: wrote out/result.txt.", usage=dict(usage(100, 10, completion_tokens_details={
                 "reasoning_tokens": 30}), total_tokens=140)))
    r = run("--prompt", "tidy up", "--format", "json", "-y")
    assert r.returncode == 0, r.stderr
    evs = events(r.stdout)
    check_schema(evs)
    assert check_order(evs) == "STUUUF" + "SUUF" + "STF"
    sid = evs[0]["sessionID"]
    assert all(e["sessionID"] == sid for e in evs)
    assert (sessions_dir(isolated_env) / (sid + ".jsonl")).exists()

    texts = [e["text"] for e in evs if e["type"] == "text"]
    assert texts == ["Looking around first.", "Done: wrote out/result.txt."]
    uses = {e["toolCall"]["name"] + ":" + json.dumps(e["toolCall"]["args"], sort_keys=True): e for e in evs
            if e["type"] == "tool_use"}
    assert uses['bash:{"command": "echo one"}']["toolResult"] == {
        "id": uses['bash:{"command": "echo one"}']["toolCall"]["id"], "success": True, "output": "one\n"}
    assert "remember the milk" in uses['read_file:{"path": "notes.txt"}']["toolResult"]["output"]
    failed = uses['bash:{"command": "exit 3"}']["toolResult"]
    assert failed["success"] is False and "exit code 3" in failed["output"]
    assert len({e["toolCall"]["id"] for e in uses.values()}) == 5
    assert (isolated_env.work / "out" / "result.txt").read_text() == "42"

    finishes = [e for e in evs if e["type"] == "step_finish"]
    assert [f["finishReason"] for f in finishes] == ["stop", "stop", "stop"]
    # costUsdTicks is 1e-6 USD: xAI's 15,000,000 ticks (1e-10 USD) = $0.0015 = 1500;
    # grok-4.3 prices: 2000 in x 1.25 + 200 out x 2.50 per 1M = $0.003; reasoning bills as output.
    assert [f["usage"] for f in finishes] == [
        {"inputTokens": 1000, "outputTokens": 100, "totalTokens": 1100, "costUsdTicks": 1500},
        {"inputTokens": 2000, "outputTokens": 200, "totalTokens": 2200, "costUsdTicks": 3000},
        {"inputTokens": 100, "outputTokens": 40, "totalTokens": 140, "costUsdTicks": 225}]
    assert r.stderr == ""


def test_parallel_tools_never_interleave_event_lines(run, fake):
    # Six big results finishing together (the tools run in six threads): each event stays one whole line.
    cmd = "sleep 0.3; head -c 60000 /dev/zero | tr '\\0' %s"
    fake.add(tools(*[("bash", {"command": cmd % c}) for c in "abcdef"]), answer("ok"))
    r = run("-p", "go", "--format", "json", "-y")
    assert r.returncode == 0, r.stderr
    evs = events(r.stdout)
    check_schema(evs)
    assert check_order(evs) == "SUUUUUUFSTF"
    outputs = sorted(e["toolResult"]["output"] for e in evs if e["type"] == "tool_use")
    for c, out in zip("abcdef", outputs):
        assert out.startswith(c * 1000) and out.endswith(c * 1000) and "output truncated" in out


def test_stdout_carries_only_events_and_diagnostics_go_to_stderr(run, fake):
    fake.add(error(503), answer("fine"))
    r = run("-p", "hi", "--format", "json", env={"GROK_MAX_RETRIES": "2"})
    assert r.returncode == 0
    assert check_order(events(r.stdout)) == "STF"
    assert "HTTP 503" in r.stderr and "retrying" in r.stderr


def test_max_tool_rounds_stops_with_exit_3(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "echo x >> rounds.txt"})),
             tools(("bash", {"command": "echo x >> rounds.txt"})),
             tools(("bash", {"command": "echo x >> rounds.txt"})), answer("never"))
    r = run("-p", "loop", "--format", "json", "--max-tool-rounds", "2", "-y")
    assert r.returncode == 3
    evs = events(r.stdout)
    check_schema(evs)
    assert check_order(evs) == "SUF" "SUF" "SFE"
    assert "after 2 rounds" in evs[-1]["message"] and "--max-tool-rounds" in evs[-1]["message"]
    assert (isolated_env.work / "rounds.txt").read_text() == "x\nx\n"
    assert len(fake.chat_requests()) == 3


def test_reader_closing_stdout_stops_the_run_quietly(run, fake):
    # head exits after step_start; the reply comes later, so the next event meets a closed pipe.
    fake.add(tools(("list_files", {}), delay=0.5), tools(("list_files", {})), answer("never"))
    r = shell(run, '$GROK -p go --format json -y | head -1; echo "exit=${PIPESTATUS[0]}"')
    first, status = r.stdout.splitlines()
    assert json.loads(first)["type"] == "step_start" and status == "exit=0"
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr
    assert len(fake.chat_requests()) == 1          # it stopped instead of working for nobody


# ------------------------------------------------- jq over the event stream, as the docs show it
@need_jq
def test_jq_total_token_usage(run, fake):
    fake.add(tools(("list_files", {}), usage=usage(1000, 100)),
             tools(("list_files", {}), usage=usage(2000, 200)),
             answer("done", usage=usage(300, 20)))
    r = shell(run, """$GROK --prompt "count" --format json --always-approve | jq -s '
  [.[] | select(.type == "step_finish") | .usage.totalTokens // 0] | add'""")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "3620\n"


@need_jq
def test_jq_tool_names_and_durations(run, fake, isolated_env):
    (isolated_env.work / "a.txt").write_text("a")
    fake.add(tools(("bash", {"command": "sleep 0.3"})), tools(("read_file", {"path": "a.txt"})), answer("ok"))
    r = shell(run, """$GROK --prompt "time it" --format json -y | jq '
  select(.type == "tool_use") | {tool: .toolCall.name, ms: .timing.durationMs}'""")
    assert r.returncode == 0, r.stderr
    decoder, out, pos, found = json.JSONDecoder(), r.stdout, 0, []
    while out[pos:].strip():
        while out[pos].isspace():
            pos += 1
        obj, pos = decoder.raw_decode(out, pos)
        found.append(obj)
    assert [f["tool"] for f in found] == ["bash", "read_file"]
    assert all(type(f["ms"]) is int and f["ms"] >= 0 for f in found)
    assert found[0]["ms"] >= 250            # sleep 0.3 cannot take less


@need_jq
def test_jq_errors_to_stderr(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "touch pwned"})))
    r = shell(run, """$GROK --prompt "do it" --format json 2>/dev/null | jq -c 'select(.type == "error")' >&2
echo "exit=${PIPESTATUS[0]}" """)
    assert r.stdout == "exit=3\n"
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    ev = json.loads(lines[0])
    assert ev["type"] == "error" and ev["message"].startswith("Tool `bash` denied: command not in allowlist")
    assert not (isolated_env.work / "pwned").exists()


# ------------------------------------------------------- text mode
@pytest.mark.parametrize("stream", ["1", "0"])
def test_text_mode_stdout_is_exactly_the_answer(run, fake, stream):
    final = 'Line one\nLine "two" \u2713 with \\ and \t tab'
    fake.add(tools(("bash", {"command": "echo checking"}), response="I will look first."),
             reply({"response": "Not the answer either.", "tool_calls": [{"tool": "list_files", "args": {}}],
                    "done": False}),
             answer(final))
    r = run("-p", "answer me", "-y", env={"GROK_STREAM": stream})
    assert r.returncode == 0, r.stderr
    assert r.stdout == final + "\n"
    assert "I will look first." in r.stderr and "Not the answer either." in r.stderr
    assert "[bash] echo checking" in r.stderr and "[list_files] ." in r.stderr


def test_text_mode_works_in_command_substitution(run, fake):
    fake.add(answer("forty-two"))
    r = shell(run, 'answer=$($GROK -p "what is it" 2>/dev/null); printf "<%s>" "$answer"')
    assert r.returncode == 0 and r.stdout == "<forty-two>"


def test_text_mode_retried_stream_prints_the_answer_once(run, fake):
    text = "Hello from a stream that breaks off halfway and comes back"
    content = json.dumps({"tool_calls": [], "response": text, "done": True})
    pieces = [content[i:i + 10] for i in range(0, len(content), 10)]
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
              for p in pieces[:len(pieces) * 2 // 3]]
    fake.add(sse(chunks, truncate=True), answer(text))
    r = run("-p", "hi", env={"GROK_MAX_RETRIES": "1"})
    assert r.returncode == 0, r.stderr
    assert len(fake.chat_requests()) == 2
    assert r.stdout == text + "\n"
    assert "retrying" in r.stderr


def test_text_mode_error_goes_to_stderr(run, fake):
    fake.add(error(401, {"error": "Incorrect API key"}))
    r = run("-p", "hi")
    assert r.returncode == 1 and r.stdout == ""
    assert "grok: the API key was rejected (HTTP 401" in r.stderr


# ------------------------------------------------------- prompt sources
def test_prompt_from_stdin(run, fake):
    fake.add(answer("got it"))
    prompt = "first line from stdin\nsecond line \u00e9"
    r = run("-p", "-", "--format", "json", input=prompt)
    assert r.returncode == 0, r.stderr
    assert fake.chat_requests()[0].last_user == prompt
    assert [e["type"] for e in events(r.stdout)] == ["step_start", "text", "step_finish"]


def test_empty_stdin_prompt_is_a_user_error(run, fake):
    r = run("-p", "-", "--format", "json", input="  \n")
    assert r.returncode == 1
    (ev,) = events(r.stdout)
    assert ev["type"] == "error" and "prompt is empty" in ev["message"]
    assert fake.requests == []


# ------------------------------------------------------- resume
def test_resume_continues_the_same_session(run, fake, isolated_env):
    fake.add(answer("The capital is Paris."))
    r1 = run("-p", "capital of France?", "--format", "json")
    assert r1.returncode == 0, r1.stderr
    sid = events(r1.stdout)[0]["sessionID"]

    fake.add(answer("About 2.1 million."))
    r2 = run("-p", "and its population?", "--format", "json", "--resume", sid)
    assert r2.returncode == 0, r2.stderr
    evs = events(r2.stdout)
    assert {e["sessionID"] for e in evs} == {sid}
    assert evs[0]["stepNumber"] == 1             # steps count within one headless run
    second = fake.chat_requests()[1]
    assert second.headers["x-grok-conv-id"] == sid
    turns = [(m["role"], m["content"]) for m in second.messages[1:]]
    assert turns[0] == ("user", "capital of France?")
    assert turns[1][0] == "assistant" and "The capital is Paris." in turns[1][1]
    assert turns[2] == ("user", "and its population?")
    assert second.messages[0] == fake.chat_requests()[0].messages[0]     # same system prompt
    assert [p.name for p in sessions_dir(isolated_env).iterdir()] == [sid + ".jsonl"]

    fake.add(answer("Yes."))
    r3 = run("-p", "sure?", "--format", "json", "-c")
    assert r3.returncode == 0, r3.stderr
    assert {e["sessionID"] for e in events(r3.stdout)} == {sid}
    assert len(fake.chat_requests()[2].messages) == 1 + 5
    assert [m["content"] for m in session_messages(isolated_env, sid) if m["role"] == "user"] == [
        "capital of France?", "and its population?", "sure?"]


def test_resume_unknown_session_exits_1(run, fake):
    r = run("-p", "hi", "--format", "json", "--resume", "nope")
    assert r.returncode == 1
    (ev,) = events(r.stdout)
    assert ev["type"] == "error" and "no session 'nope'" in ev["message"]
    r = run("-p", "hi", "-c")
    assert r.returncode == 1 and "no session to continue" in r.stderr


# ------------------------------------------------------- approval
def test_allow_pattern_lets_a_matching_command_run(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "touch made-by-bash"}),
                   ("write_file", {"path": "out/notes.md", "content": "hi"})), answer("ok"))
    r = run("-p", "go", "--format", "json", "--allow", "touch *", "--allow", "out/*.md")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (isolated_env.work / "made-by-bash").exists()
    assert (isolated_env.work / "out" / "notes.md").read_text() == "hi"
    uses = [e for e in events(r.stdout) if e["type"] == "tool_use"]
    assert [u["toolResult"]["success"] for u in uses] == [True, True], json.dumps([u["toolResult"] for u in uses])


@pytest.mark.parametrize("tool, args, allow, what", [
    ("bash", {"command": "rm -f keep.txt"}, ["touch *"], "command"),
    ("bash", {"command": "touch a; rm -f keep.txt"}, ["touch *"], "command"),        # no smuggling via ;
    ("bash", {"command": "touch $(rm -f keep.txt)"}, ["touch *"], "command"),
    ("write_file", {"path": "keep.txt", "content": "overwritten"}, ["out/*"], "path"),
    ("write_file", {"path": "../keep.txt", "content": "x"}, [], "path"),
])
def test_unmatched_tool_is_denied_with_exit_3(run, fake, isolated_env, tool, args, allow, what):
    (isolated_env.work / "keep.txt").write_text("precious")
    fake.add(tools((tool, args), ("list_files", {})))
    flags = [x for p in allow for x in ("--allow", p)]
    r = run("-p", "go", "--format", "json", *flags)
    assert r.returncode == 3
    evs = events(r.stdout)
    check_schema(evs)
    assert check_order(evs) == "SFE"                 # nothing of the step ran, not even list_files
    assert evs[-1]["message"].startswith("Tool `%s` denied: %s not in allowlist" % (tool, what))
    assert (isolated_env.work / "keep.txt").read_text() == "precious"
    assert not (isolated_env.work / "a").exists()
    assert "denied" in r.stderr


def test_denied_run_can_be_resumed_with_an_allow(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "touch done"})))
    r1 = run("-p", "make it", "--format", "json")
    assert r1.returncode == 3
    sid = events(r1.stdout)[0]["sessionID"]
    fake.add(tools(("bash", {"command": "touch done"})), answer("made"))
    r2 = run("-p", "allowed now, retry", "--format", "json", "--resume", sid, "--allow", "touch done")
    assert r2.returncode == 0, r2.stdout
    assert (isolated_env.work / "done").exists()
    history = " ".join(m["content"] for m in fake.chat_requests()[1].messages)
    assert "Tool `bash` denied" in history


def test_ask_user_tells_the_model_no_user_is_there(run, fake):
    fake.add(tools(("ask_user", {"question": "Which colour?", "options": ["red", "blue"]})),
             answer("I picked blue."))
    r = run("-p", "paint it", "--format", "json")
    assert r.returncode == 0
    use = [e for e in events(r.stdout) if e["type"] == "tool_use"][0]
    assert use["toolResult"]["success"] is False and "no user available" in use["toolResult"]["output"]
    assert "no user available" in fake.chat_requests()[1].last_user


# ------------------------------------------------------- exit codes
def test_success_exits_0(run, fake):
    fake.add(answer("hi"))
    r = run("-p", "hello", "--format", "json")
    assert r.returncode == 0 and check_order(events(r.stdout)) == "STF"


@pytest.mark.parametrize("fmt", [["--format", "json"], ["--format=json"], ["--form", "json"]])
def test_bad_flag_exits_1_with_an_error_event(run, fake, fmt):
    r = run("-p", "hi", "--frobnicate", *fmt)
    assert r.returncode == 1
    (ev,) = events(r.stdout)
    check_schema([ev], session_id=False)            # no session was assigned
    assert "--frobnicate" in ev["message"]
    assert r.stderr.startswith("usage: grok") and "Traceback" not in r.stderr
    assert fake.requests == []


def test_bad_flag_value_in_text_mode_exits_1_with_stdout_empty(run, fake):
    r = run("-p", "hi", "--max-tool-rounds", "many")
    assert r.returncode == 1 and r.stdout == ""
    assert "--max-tool-rounds" in r.stderr


def test_missing_key_exits_1(run, fake):
    r = run("-p", "hi", "--format", "json", env={"GROK_API_KEY": None})
    assert r.returncode == 1
    (ev,) = events(r.stdout)
    assert ev["type"] == "error" and "GROK_API_KEY" in ev["message"]
    assert fake.requests == []


def test_rejected_key_401_exits_1_without_retrying(run, fake):
    fake.add(error(401, {"error": "Incorrect API key provided"}), answer("never"))
    r = run("-p", "hi", "--format", "json")
    assert r.returncode == 1
    evs = events(r.stdout)
    assert check_order(evs) == "SE"
    assert "HTTP 401" in evs[-1]["message"] and TEST_KEY not in r.stdout + r.stderr
    assert len(fake.requests) == 1


@pytest.mark.parametrize("fault", [lambda: error(429), lambda: error(503), lambda: error(500), drop])
def test_transient_failure_after_retries_exits_2(run, fake, fault):
    fake.add(fault(), fault(), answer("too late"))
    r = run("-p", "hi", "--format", "json", env={"GROK_MAX_RETRIES": "1"})
    assert r.returncode == 2
    evs = events(r.stdout)
    check_schema(evs)
    assert check_order(evs) == "SE"
    assert "gave up after 1 retries" in evs[-1]["message"]
    assert len(fake.chat_requests()) == 2
    assert "retrying" in r.stderr


def test_network_down_exits_2(run, fake):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                        # nothing listens there now
    r = run("-p", "hi", "--format", "json",
            env={"GROK_BASE_URL": "http://127.0.0.1:%d/v1" % port, "GROK_MAX_RETRIES": "1"})
    assert r.returncode == 2
    evs = events(r.stdout)
    assert check_order(evs) == "SE" and "connection refused" in evs[-1]["message"]


def test_contract_broken_three_times_exits_3(run, fake):
    fake.add(reply("not json at all"), reply("still prose"), reply('{"tool_calls": "nope"}'), answer("late"))
    r = run("-p", "hi", "--format", "json")
    assert r.returncode == 3
    evs = events(r.stdout)
    check_schema(evs)
    assert check_order(evs) == "SF" "SF" "SFE"
    assert "broke the JSON contract 3 times" in evs[-1]["message"]
    assert len(fake.chat_requests()) == 3


def test_cost_limit_exits_3(run, fake):
    fake.add(tools(("list_files", {}), usage=usage(10, 10, cost_in_usd_ticks=2 * 10 ** 8)), answer("never"))
    r = run("-p", "hi", "--format", "json", "-y", env={"COST_LIMIT": "0.01"})
    assert r.returncode == 3
    evs = events(r.stdout)
    assert check_order(evs) == "SUFE"
    assert "cost limit" in evs[-1]["message"]
    assert evs[-2]["usage"]["costUsdTicks"] == 20000            # $0.02
    assert len(fake.chat_requests()) == 1


PANIC = """
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, {root!r})
import grok

def broken(*args, **kwargs):
    raise RuntimeError("simulated bug")

grok.{target} = broken
raise SystemExit(grok.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("target, shape, session", [
    ("tool_results_message", "SUFE", True),      # a bug in the loop, mid-run
    ("build_system_prompt", "E", False),         # a bug before the run has a session
])
def test_unexpected_exception_exits_4_with_an_error_event(run, fake, tmp_path, target, shape, session):
    wrapper = tmp_path / "panicking_grok.py"
    wrapper.write_text(PANIC.format(root=str(ROOT), target=target))
    fake.add(tools(("list_files", {})))
    r = run("-p", "hi", "--format", "json", "-y", script=wrapper)
    assert r.returncode == 4
    evs = events(r.stdout)
    check_schema(evs, session_id=session)
    assert check_order(evs) == shape
    assert evs[-1]["message"].startswith("internal error: RuntimeError: simulated bug")
    assert "Traceback" not in r.stdout + r.stderr

    fake.add(tools(("list_files", {})))
    r = run("-p", "hi", "-y", script=wrapper)
    assert r.returncode == 4 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1].startswith("grok: internal error: RuntimeError: simulated bug")
    assert "Traceback" not in r.stderr


def interrupt_run(run, fake, args, ready):
    """Start grok, wait until ready() is true, send SIGINT; returns (returncode, stdout, stderr)."""
    p = subprocess.Popen([sys.executable, str(GROK)] + args, env=run.env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=default_sigint)
    try:
        for _ in range(200):
            if ready():
                break
            try:
                p.wait(0.05)
                break
            except subprocess.TimeoutExpired:
                pass
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err


def test_sigint_during_a_request_exits_130_and_keeps_the_session(run, fake, isolated_env):
    fake.add(hang(30))
    code, out, err = interrupt_run(run, fake, ["-p", "slow one", "--format", "json"],
                                   lambda: len(fake.requests) >= 1)
    assert code == 130, err
    evs = events(out)
    assert check_order(evs) == "SE" and evs[-1]["message"].startswith("interrupted")
    assert "Traceback" not in err
    sid = evs[0]["sessionID"]
    fake.add(answer("back"))
    r = run("-p", "again", "--format", "json", "--resume", sid)
    assert r.returncode == 0
    roles = [(m["role"], m["content"]) for m in fake.chat_requests()[1].messages[1:]]
    assert roles[0] == ("user", "slow one") and "interrupted" in roles[1][1] and roles[2] == ("user", "again")


def test_sigint_during_a_tool_exits_130_and_kills_it(run, fake, isolated_env):
    work = isolated_env.work
    fake.add(tools(("bash", {"command": "touch started; sleep 20; touch finished"})), answer("never"))
    code, out, err = interrupt_run(run, fake, ["-p", "wait", "--format", "json", "-y"],
                                   lambda: (work / "started").exists())
    assert code == 130, err
    evs = events(out)
    check_schema(evs)
    assert check_order(evs) == "SFE"                   # the cancelled tool reports no result
    sid = evs[0]["sessionID"]
    msgs = session_messages(isolated_env, sid)
    assert msgs[-2]["role"] == "user" and "cancelled" in msgs[-2]["content"]
    assert msgs[-1]["role"] == "assistant"
    assert not (work / "finished").exists()


def test_continue_skips_a_session_nobody_typed_into(run, fake):
    fake.add(answer("first answer"), answer("second answer"))
    first = events(run("-p", "remember 42", "--format", "json").stdout)[0]["sessionID"]
    empty = run(input="")                      # a REPL opened and closed at once (piped EOF)
    assert empty.returncode == 0
    r = run("-p", "what number?", "-c", "--format", "json")
    assert r.returncode == 0
    assert events(r.stdout)[0]["sessionID"] == first
    assert "remember 42" in json.dumps(fake.chat_requests()[1].messages)
