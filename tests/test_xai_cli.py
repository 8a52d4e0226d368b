"""grok.py in place of xAI's `grok` CLI: a client written for that CLI (pi-grok-build) runs
its exact command lines, in its JSONL and ACP modes, and reads the output as it does."""
import json

import pytest

from conftest import GROK_DETAILED, TEST_KEY
from fakeapi import FakeAPI, answer, error, models, raw, reply, tools
from test_acp import Acp, kinds, texts

JSONL_ARGS = ["--model", "grok-build", "--output-format", "streaming-json", "--always-approve", "--no-plan",
              "--no-subagents", "--max-turns", "1"]
ACP_ARGS = ["agent", "--no-leader", "--always-approve", "--model", "grok-build"]
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 170,
         "prompt_tokens_details": {"cached_tokens": 100}, "completion_tokens_details": {"reasoning_tokens": 20}}


def key_env(where, isolated_env):
    """The child's key: in XAI_API_KEY, or only in ~/.grok/.env."""
    if where == "env":
        return {"GROK_API_KEY": None, "XAI_API_KEY": TEST_KEY}
    (isolated_env.home / ".grok").mkdir()
    (isolated_env.home / ".grok" / ".env").write_text("XAI_API_KEY=%s\n" % TEST_KEY)
    return {"GROK_API_KEY": None, "XAI_API_KEY": None}


def jsonl_client(run, prompt, *extra, env=None):
    """The client's JSONL mode: one JSON object per stdout line; any non-zero exit is an error."""
    r = run("-p", prompt, *(JSONL_ARGS + list(extra)), env=env)
    events = [json.loads(line) for line in r.stdout.splitlines()]
    got = {"code": r.returncode, "stderr": r.stderr, "events": events, "thinking": "", "text": "",
           "end": None, "errors": [e.get("message") or e.get("error") for e in events if e["type"] == "error"]}
    for e in events:
        if e["type"] in ("thought", "text"):
            got["thinking" if e["type"] == "thought" else "text"] += e["data"]
        elif e["type"] == "end":
            got["end"] = e
    return got


@pytest.mark.parametrize("where", ["env", "file"])
def test_jsonl_mode_streams_thought_and_text_then_end(run, fake, isolated_env, where):
    fake.add(answer("The answer is 42.", reasoning="Six times seven.", chunk_size=5, usage=USAGE))
    got = jsonl_client(run, "what is 6*7?", env=key_env(where, isolated_env))
    assert got["code"] == 0 and got["errors"] == [], got["stderr"]
    assert got["thinking"] == "Six times seven." and got["text"] == "The answer is 42."
    kinds_seen = [e["type"] for e in got["events"]]
    assert kinds_seen.count("thought") > 1 and kinds_seen.count("text") > 1 and kinds_seen[-1] == "end"
    assert kinds_seen.index("end") > max(i for i, k in enumerate(kinds_seen) if k == "text")
    end = got["end"]
    assert end["stopReason"] == "end_turn" and end["num_turns"] == 1 and end["requestId"] == "chatcmpl-1"
    assert end["usage"]["input_tokens"] == 20 and end["usage"]["cache_read_input_tokens"] == 100     # uncached
    assert end["usage"]["total_tokens"] == 170
    assert end["sessionId"]
    req = fake.chat_requests()[0]
    assert req.json["model"] == "grok-4.3"          # xAI's CLI's model name is the default model here
    assert req.headers["authorization"] == "Bearer " + TEST_KEY


def test_jsonl_mode_cut_off_reply_ends_with_max_tokens(run, fake):
    fake.add(answer("Partial.", finish_reason="length"))
    got = jsonl_client(run, "long story")
    assert got["code"] == 0 and got["end"]["stopReason"] == "max_tokens" and got["text"] == "Partial."


def test_jsonl_mode_failures_are_error_events_and_a_non_zero_exit(run, fake):
    fake.add(error(401, {"error": "Incorrect API key provided"}))
    got = jsonl_client(run, "hi")
    assert got["code"] != 0 and got["end"] is None
    assert len(got["errors"]) == 1 and "401" in got["errors"][0]
    got = jsonl_client(run, "hi", "--bogus-flag")
    assert got["code"] == 1 and "--bogus-flag" in got["errors"][0]


def test_jsonl_mode_max_turns_is_the_tool_round_limit(run, fake):
    fake.add(tools(("bash", {"command": "echo one"})), tools(("bash", {"command": "echo two"})))
    got = jsonl_client(run, "keep using tools")
    assert got["code"] == 3 and "tool round limit" in got["errors"][0] and got["end"] is None
    assert len(fake.chat_requests()) == 2 and "[Limit]" in fake.chat_requests()[1].last_user


def test_grok_build_is_kept_when_it_is_the_configured_model(run, fake):
    fake.add(answer("ok"))
    assert jsonl_client(run, "hi", env={"GROK_MODEL": "grok-build"})["code"] == 0
    assert fake.chat_requests()[0].json["model"] == "grok-build"


# ------------------------------------------------------------------ grok models

def test_models_lists_the_servers_models_with_the_default_marked(run, fake):
    fake.add(models("grok-code-2", "grok-4.3"), models("grok-code-2"))
    r = run("models")
    assert r.returncode == 0 and r.stdout.splitlines() == ["- grok-code-2", "* grok-4.3 (default)",
                                                           "- grok-build (alias of grok-4.3)"]
    assert fake.requests[0].method == "GET" and fake.requests[0].headers["authorization"] == "Bearer " + TEST_KEY
    r = run("models", "--json", env={"GROK_MODEL": "grok-code-2"})
    assert r.returncode == 0 and json.loads(r.stdout) == {"models": [
        {"id": "grok-code-2", "default": True}, {"id": "grok-build", "default": False, "aliasOf": "grok-code-2"}]}
    fake.add(models("grok-4.3"))
    r = run("models", script=GROK_DETAILED)         # the same command, not a chat message "models"
    assert r.returncode == 0 and r.stdout.startswith("* grok-4.3 (default)\n") and not fake.chat_requests()


def test_models_falls_back_to_the_built_in_table(run, fake):
    r = run("models")                   # the fake answers GET /models with 404
    assert r.returncode == 0 and r.stdout.splitlines() == ["* grok-4.3 (default)", "- grok-4.20", "- grok-3-mini",
                                                           "- grok-build (alias of grok-4.3)"]
    assert "built-in list" in r.stderr and TEST_KEY not in r.stderr
    r = run("models", "--verbose")
    assert r.returncode == 1 and "usage: grok models [--json]" in r.stderr and r.stdout == ""


def test_models_never_follows_a_redirect_with_the_key(run, fake):
    # The key goes to GROK_BASE_URL only: a redirect elsewhere is named and the built-in list follows.
    with FakeAPI() as other:
        fake.add(raw(302, b"", headers={"Location": other.url + "/models"}), path="/models")
        other.add(models("stolen"), path="/models")
        r = run("models")
        assert r.returncode == 0 and r.stdout.splitlines()[0] == "* grok-4.3 (default)"
        assert "a redirect to %s/models" % other.url in r.stderr and "built-in list" in r.stderr
        assert other.requests == []


# ------------------------------------------------------------------ reasoning effort

def test_reasoning_effort_is_sent_and_dropped_once_if_the_server_rejects_it(run, fake):
    fake.add(error(400, {"error": "Argument not supported: reasoningEffort"}), answer("one"), answer("two"))
    r = run("--effort", "high", input="first\nsecond\n")
    assert r.returncode == 0 and "one" in r.stdout and "two" in r.stdout, r.stderr
    sent = [req.json.get("reasoning_effort") for req in fake.chat_requests()]
    assert sent == ["high", None, None]
    assert r.stderr.count("rejected reasoning_effort") == 1
    r = run("-p", "x", "--reasoning-effort", "extreme")
    assert r.returncode == 1 and "invalid choice" in r.stderr


def test_reasoning_effort_in_acp_and_grok_detailed(run, fake, acp_client):
    fake.add(answer("ok"), reply({"thinking": "t", "task": "a", "tool_calls": [], "response": "ok", "done": True}))
    got = acp_client("hi", "--reasoning-effort", "low")
    assert got["result"]["stopReason"] == "end_turn"
    r = run("--effort", "medium", input="hi\n", script=GROK_DETAILED)
    assert r.returncode == 0, r.stderr
    assert [req.json.get("reasoning_effort") for req in fake.chat_requests()] == ["low", "medium"]


# ------------------------------------------------------------------ ACP mode

@pytest.fixture
def acp_client(run, isolated_env):
    """The client's ACP mode: initialize, authenticate with the method it looks for, session/new,
    session/prompt; thought and message chunks, then usage and request id from _meta."""
    clients = []

    def go(prompt, *extra, env=None):
        c = Acp(run, *(ACP_ARGS + list(extra) + ["stdio"]), env=env)
        clients.append(c)
        init = c.init()
        offered = [m["id"] for m in init["authMethods"]]
        got = {"init": init, "offered": offered}
        method = "cached_token" if "cached_token" in offered else "xai.api_key" if "xai.api_key" in offered else None
        if method is None:
            return got
        got["auth"] = c.call("authenticate", {"methodId": method})[0]
        sid = c.new(isolated_env.work)
        got["result"], updates = c.prompt(sid, prompt)
        got["thinking"], got["text"] = texts(updates, "agent_thought_chunk"), texts(updates)
        got["kinds"], got["code"] = kinds(updates), c.close()
        return got

    yield go
    for c in clients:
        c.kill()


@pytest.mark.parametrize("where,method", [("env", "xai.api_key"), ("file", "cached_token")])
def test_acp_mode_authenticates_streams_thoughts_and_reports_usage(fake, isolated_env, acp_client, where, method):
    fake.add(answer("Paris.", reasoning="The capital of France.", chunk_size=4, usage=USAGE))
    got = acp_client("capital of France?", env=key_env(where, isolated_env))
    assert got["offered"] == [method] and got["auth"]["result"] == {}
    assert got["result"]["stopReason"] == "end_turn" and got["code"] == 0
    assert got["thinking"] == "The capital of France." and got["text"] == "Paris."
    assert got["kinds"].count("agent_thought_chunk") > 1
    assert got["kinds"].index("agent_thought_chunk") < got["kinds"].index("agent_message_chunk")
    meta = got["result"]["_meta"]
    assert (meta["inputTokens"], meta["outputTokens"], meta["cachedReadTokens"]) == (120, 30, 100)
    assert meta["totalTokens"] == 170 and meta["requestId"] == "chatcmpl-1"
    assert meta["usage"]["inputTokens"] == 120 and meta["costUsd"] > 0        # what was there stays
    assert fake.chat_requests()[0].json["model"] == "grok-4.3"


def test_acp_authenticate_checks_the_method_and_the_key(run, fake, isolated_env):
    c = Acp(run, *(ACP_ARGS + ["stdio"]), env={"GROK_API_KEY": None})
    try:
        assert c.init()["authMethods"] == []
        assert c.call("authenticate", {"methodId": "cached_token"})[0]["error"]["code"] == -32000
        assert c.call("authenticate", {"methodId": "oauth"})[0]["error"]["code"] == -32602
        assert c.close() == 0
    finally:
        c.kill()
    c = Acp(run, *(ACP_ARGS + ["stdio"]))
    try:
        c.init()
        assert c.call("authenticate", {"methodId": "nope"})[0]["error"]["code"] == -32602
        assert "result" in c.call("authenticate", {"methodId": "xai.api_key"})[0]
        sid = c.new(isolated_env.work)
        msg = c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "look"},
                                                                     {"type": "image", "data": "AAAA"}]})[0]
        assert msg["error"]["code"] == -32602 and "image" in msg["error"]["message"]
        assert c.close() == 0 and fake.chat_requests() == []
    finally:
        c.kill()


# ------------------------------------------------------------------ grok-detailed

def test_grok_detailed_shows_the_models_reasoning_on_the_thinking_line(run, fake):
    fake.add(reply({"thinking": "Contract thought.", "task": "Answer", "tool_calls": [], "response": "Hi.",
                    "done": True}, reasoning="Reasoning from the API."),
             reply({"thinking": "Second.", "task": "Answer", "tool_calls": [], "response": "Yo.", "done": True},
                   reasoning="Unstreamed reasoning.", stream=False))
    r = run(input="hello\nagain\n", script=GROK_DETAILED)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.strip().startswith("thinking")]
    assert lines[0].split(None, 1)[1] == "Reasoning from the API. Contract thought."
    assert lines[1].split(None, 1)[1] == "Unstreamed reasoning. Second."
