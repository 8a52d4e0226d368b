"""Local OpenAI-compatible servers (llama.cpp, vLLM, Ollama), as the fake mimics them: the
contract's per-tool schema, cut-off replies, compaction that never grows, the server's context
window and overflow errors, stream errors, prices, a missing Responses API, agent mode's interview."""
import json
import signal

import pytest

from fakeapi import answer, error, raw, reply, responses_reply, sse, tools

LOCAL = {"GROK_CONTEXT_WINDOW": None, "GROK_PRICES": None}      # as a user of a local server runs it
OVERFLOW = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                      "type": "exceed_context_size_error", "n_prompt_tokens": 9100, "n_ctx": 8192}}


def usage(prompt, completion=50):
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def schema_of(request):
    return request.json["response_format"]["json_schema"]["schema"]


def offered(request):
    return [c["properties"]["tool"]["enum"][0] for c in schema_of(request)["properties"]["tool_calls"]["items"]["anyOf"]]


# 1. The schema bounds tool_calls and gives each tool's args their own shape.
def test_schema_bounds_tool_calls_and_shapes_each_tools_args(run, fake):
    fake.add(answer("hi"))
    assert run("-p", "hi").returncode == 0
    calls = schema_of(fake.chat_requests()[0])["properties"]["tool_calls"]
    assert calls["maxItems"] == 8
    shapes = {c["properties"]["tool"]["enum"][0]: c["properties"]["args"] for c in calls["items"]["anyOf"]}
    assert shapes["bash"] == {"type": "object", "properties": {"command": {"type": "string"}},
                              "required": ["command"], "additionalProperties": False}
    assert shapes["write_file"]["required"] == ["path", "content"]
    assert shapes["list_files"]["required"] == [] and shapes["ask_user"]["required"] == ["question"]
    assert shapes["ask_user"]["properties"]["options"] == {"type": "array", "items": {"type": "string"}}
    assert all(c["additionalProperties"] is False for c in calls["items"]["anyOf"])


# 2. A reply cut off at max_tokens is named as such, to the person and to the model.
def test_a_reply_cut_off_at_max_tokens_is_named_so(run, fake):
    cut = '{"tool_calls": [{"tool": "bash", "args": {"command": "ls"}}, {"tool": "bash", "args": {"comm'
    fake.add(reply(cut, finish_reason="length"), answer("short now"))
    r = run("-p", "hi", "-y")
    assert r.returncode == 0 and r.stdout == "short now\n", r.stderr
    assert "cut off at max_tokens" in r.stderr and "neither" not in r.stderr
    corrective = fake.chat_requests()[1].last_user
    assert "cut off at max_tokens" in corrective and "fewer tool calls" in corrective


# 3. Compaction never grows the context: a cut-off or larger summary is not taken.
@pytest.mark.parametrize("summary", [reply("S" * 400, finish_reason="length"), reply("L" * 40000)],
                         ids=["cut-off", "larger"])
def test_a_summary_that_is_cut_off_or_larger_is_not_taken(run, fake, summary):
    fake.add(*[tools(("list_files", {}), usage=usage(100)) for _ in range(3)],
             tools(("list_files", {}), usage=usage(9000)), summary, answer("done"))
    r = run("-p", "go", env={"GROK_CONTEXT_WINDOW": "10000"})
    assert r.returncode == 0, r.stderr
    summarise, after = fake.chat_requests()[4], fake.chat_requests()[5]
    assert "response_format" not in summarise.json and summarise.json["max_tokens"] < 2000   # fits what it replaces
    assert "dropped the 3 oldest messages" in r.stderr
    assert after.messages[1]["content"].startswith("[3 older messages were dropped")
    assert b"SSSS" not in after.body and b"LLLL" not in after.body


# 4. The context window is learned from the server (llama.cpp, vLLM, Ollama), asked 3 ways at once.
@pytest.mark.parametrize("path,body", [
    ("/props", {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}),
    ("/v1/models", {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 8192}]}),
    ("/api/show", {"parameters": "stop \"<|im_end|>\"\nnum_ctx 8192", "model_info": {"llama.context_length": 32768}}),
], ids=["llama.cpp", "vLLM", "Ollama"])
def test_the_context_window_is_learned_from_the_server(run, fake, path, body):
    fake.add(raw(200, body), path=path)
    fake.add(*[tools(("list_files", {}), usage=usage(100)) for _ in range(3)],
             tools(("list_files", {}), usage=usage(6500)), reply("SUMMARY: listed thrice."), answer("done"))
    r = run("-p", "go", env=LOCAL)
    assert r.returncode == 0, r.stderr
    assert "context window: 8192 tokens (from the server's %s)" % path in r.stderr
    assert "compacted 3 older messages" in r.stderr         # 6,550 of 8,192 tokens is past 75%
    probes = [q for q in fake.requests if "/chat/" not in q.path]
    assert sorted(q.path for q in probes) == ["/api/show", "/props", "/v1/models"]


def test_another_model_gets_its_own_context_window(run, fake):
    from test_repl import piped
    fake.add(raw(200, {"default_generation_settings": {"n_ctx": 8192}}),
             raw(200, {"default_generation_settings": {"n_ctx": 4096}}), path="/props")
    fake.add(answer("one"), answer("two"))
    first = "word " * 3000      # past 75% of 4,096 tokens: the window matters from the start
    r = piped(run, first + "\n/model small-model\nsecond\n", env=LOCAL)
    assert r.returncode == 0, r.stderr
    assert "context window: 8192 tokens" in r.stderr and "context window: 4096 tokens" in r.stderr
    assert [q.json["model"] for q in fake.chat_requests()] == ["grok-4.3", "small-model"]


def test_an_overflow_error_compacts_and_retries_once(run, fake):
    fake.add(*[tools(("list_files", {})) for _ in range(5)], error(400, OVERFLOW), reply("SUMMARY: listed."),
             answer("fits now"))
    r = run("-p", "go", env=LOCAL)
    assert r.returncode == 0 and r.stdout == "fits now\n", r.stderr
    assert "context window of 8192 tokens" in r.stderr and "compacted" in r.stderr
    assert fake.chat_requests()[7].messages[1]["content"].startswith("[Summary")


def test_an_overflow_that_compaction_cannot_help_says_so_with_numbers(run, fake):
    fake.add(error(400, {"error": {"message": "Requested tokens (12000) exceed context window of 8192"}}))
    r = run("-p", "word " * 9000, env=LOCAL)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "do not fit the server's context window (8192 tokens), even compacted" in r.stderr
    assert "model name" not in r.stderr


def test_an_error_inside_the_stream_is_shown(run, fake):
    fake.add(sse([b'error: {"code": 500, "message": "llama died: out of memory", "type": "server_error"}\n\n']))
    r = run("-p", "hi")
    assert r.returncode == 2 and "llama died: out of memory" in r.stderr, r.stderr


def test_a_stream_that_breaks_again_is_asked_once_unstreamed_to_show_why(run, fake):
    broken = [{"choices": [{"delta": {"content": '{"tool_calls": [], "resp'}}]}]
    fake.add(sse(broken, truncate=True), sse(broken, truncate=True),
             error(400, {"error": "Requested tokens (9000) exceed context window of 8192"}))
    r = run("-p", "hi", env=LOCAL)
    assert r.returncode == 1, r.stderr
    assert fake.chat_requests()[2].json.get("stream") is None
    assert "exceed context window of 8192" in r.stderr


# 5. xAI's prices apply to xAI's API only.
def test_a_local_server_is_not_charged_xai_prices(run, fake, tmp_path):
    fake.add(answer("a", usage=usage(10 ** 6)))
    r = run("-p", "hi", env=dict(LOCAL, GROK_DATA_DIR=tmp_path / "d", COST_LIMIT="0.01"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("price unknown for model grok-4.3") == 1 and "COST_LIMIT cannot apply" in r.stderr
    recs = [json.loads(line) for f in (tmp_path / "d" / "sessions").glob("*.jsonl") for line in f.open()]
    assert [rec["cost_usd"] for rec in recs if rec["type"] == "usage"] == [0]
    fake.add(tools(("list_files", {}), usage=usage(10 ** 6)), answer("never"))
    r = run("-p", "hi", env=dict(LOCAL, GROK_PRICES="1,0,2", COST_LIMIT="0.5"))
    assert r.returncode == 3 and "cost limit reached: $1.0001 of $0.50" in r.stderr
    assert "GROK_PRICES must be" in run("-p", "hi", env={"GROK_PRICES": "cheap"}).stderr


# 6. A tool the server does not offer is withdrawn for the session.
def test_web_search_is_withdrawn_after_the_server_has_no_responses_api(run, fake):
    fake.add(error(404, {"error": "not found"}), responses_reply("never"), path="/responses")
    fake.add(tools(("web_search", {"query": "a"})), tools(("web_search", {"query": "b"})), answer("done"))
    r = run("-p", "go")
    assert r.returncode == 0, r.stderr
    assert len(fake.responses_requests()) == 1 and r.stderr.count("web_search is unavailable") == 1
    first, second, third = fake.chat_requests()
    assert "web_search" in offered(first) and "web_search" not in offered(second)
    assert "withdrawn" in second.last_user and "withdrawn" in third.last_user


# 7. Agent mode: the interview offers only ask_user; SIGTERM leaves a resumable state.
def test_agent_interview_offers_only_ask_user_and_sigterm_leaves_it_resumable(run, fake, isolated_env):
    fake.add(answer("# Goal\nCount."), reply(answer("x").kw["content"], delay=30))
    from test_agent_mode import signalled
    code, err = signalled(run, fake, "count files", signal.SIGTERM)
    assert code == 143 and "terminated by signal 15 at planner (loop 1)" in err, err
    meta = json.loads((isolated_env.home / ".grok_agent" / "meta.json").read_text())
    assert meta["status"] == "interrupted" and meta["step"] == "planner"
    interview, planner = fake.chat_requests()
    assert offered(interview) == ["ask_user"] and len(offered(planner)) == 6


# 8. A server that rejects json_schema: the fallback says the schema is still sent.
def test_the_response_format_fallback_says_the_schema_is_still_sent(run, fake):
    fake.add(error(500, {"error": {"code": 500, "message": "response_format json_schema unsupported"}}),
             answer("ok"))
    r = run("-p", "hi")
    assert r.returncode == 0 and "falling back to json_object (the schema is still sent)" in r.stderr
