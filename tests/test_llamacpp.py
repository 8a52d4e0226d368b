"""Against a fake that answers as llama-cpp-python's OpenAI-compatible server does (0.3.36, seen for
real with SmolLM2-135M): its JSON grammar lets raw newlines and control characters into strings,
`json_schema` gets a 500, /props and /api/show a 404, /v1/models names no window, and streamed
replies carry no usage. Each test is one thing a real run showed."""
import glob
import os
import importlib.util
import json
import re
import subprocess
import sys
import threading

import pytest

from conftest import GROK, GROK_DETAILED, load_grok
from fakeapi import error, raw, sse

LOCAL = {"GROK_CONTEXT_WINDOW": None, "GROK_PRICES": None}      # as a user of a local server runs it
LIST = {"tool": "list_files", "args": {}}
# llama-cpp-python's answers, as the real server gave them
NO_JSON_SCHEMA = {"error": {"message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                            "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}",
                            "type": "internal_server_error", "param": None, "code": None}}
MODELS = {"object": "list", "data": [{"id": "/models/SmolLM2-135M-Instruct.Q4_1.gguf", "object": "model",
                                      "owned_by": "me", "permissions": []}]}


def llama(fake, *contents):
    """The fake as llama-cpp-python: its probes' answers, a 500 for json_schema, then each content
    streamed in small pieces with no usage (it ignores stream_options.include_usage)."""
    fake.add(raw(200, MODELS), path="/v1/models")
    fake.add(error(404, {"detail": "Not Found"}), path="/props")
    fake.add(error(404, {"detail": "Not Found"}), path="/api/show")
    fake.add(error(500, NO_JSON_SCHEMA))
    for content in contents:
        text = content if isinstance(content, str) else json.dumps(content)
        pieces = [{"choices": [{"index": 0, "delta": {"content": text[i:i + 7]}, "finish_reason": None}]}
                  for i in range(0, len(text), 7)]
        fake.add(sse(pieces + [{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]))


def chats(fake):
    """The chat requests after the rejected json_schema one."""
    first, *rest = fake.chat_requests()
    assert first.json["response_format"]["type"] == "json_schema"
    assert all(q.json["response_format"]["type"] == "json_object" for q in rest)
    return rest


# 1. Raw control characters inside strings, as the grammar lets them through, are accepted.
def test_a_reply_with_raw_newlines_and_tabs_in_its_strings_is_taken(run, fake):
    llama(fake, '{"tool_calls": [], "response": "Paris.\nIt is\tthe capital.", "done": true}')
    r = run("-p", "What is the capital of France?", env=LOCAL)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Paris.\nIt is\tthe capital.\n" and "invalid reply" not in r.stderr
    assert len(chats(fake)) == 1


def test_a_reply_with_tool_calls_and_a_raw_newline_is_never_told_it_has_neither(run, fake):
    calls = '{"tool_calls": [{"tool": "list_files", "args": {}}], "response": "Let me\nlook.", "done": false}'
    llama(fake, calls, {"tool_calls": [], "response": "Paris.", "done": True})
    r = run("-p", "What is the capital of France?", env=LOCAL)
    assert r.returncode == 0 and r.stdout == "Paris.\n", r.stderr
    assert "neither" not in r.stderr and "invalid reply" not in r.stderr
    assert chats(fake)[1].last_user.startswith("Tool results:")


def test_a_broken_reply_is_told_where_it_broke_not_that_it_has_neither(run, fake):
    broken = '{"tool_calls": [{"tool": "list_files", "args": {}}] "response": "Paris.", "done": true}'
    llama(fake, broken, {"tool_calls": [], "response": "Paris.", "done": True})
    r = run("-p", "What is the capital of France?", env=LOCAL)
    assert r.returncode == 0 and r.stdout == "Paris.\n", r.stderr
    corrective = chats(fake)[1].last_user
    assert "not a JSON object (Expecting ',' delimiter: line 1 column 53" in corrective and "neither" not in corrective


# 2. Every schema grok sends compiles on llama-cpp-python's converter: no empty {} sub-schema.
def llama_grammar():
    """llama-cpp-python's schema converter (pure Python), from the venv of the real server if there."""
    found = sorted(glob.glob("/work/llama-venv/lib/python3*/site-packages/llama_cpp/llama_grammar.py"))
    if not found:
        return None
    spec = importlib.util.spec_from_file_location("llama_grammar_under_test", found[-1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def empty_subschemas(schema, where="schema"):
    if schema == {}:
        return [where]
    if isinstance(schema, list):
        return [e for i, s in enumerate(schema) for e in empty_subschemas(s, "%s[%d]" % (where, i))]
    if not isinstance(schema, dict):
        return []
    return [e for k, s in schema.items() if k not in ("enum", "required")
            for e in empty_subschemas(s, "%s.%s" % (where, k))]


def sent_schemas(run, fake):
    """The schema as grok's and grok-detailed's requests carry it, and grok's with few tools or none."""
    schemas = {}
    for name, script in (("grok", GROK), ("grok-detailed", GROK_DETAILED)):
        fake.add(raw(200, {"choices": [{"message": {"content": json.dumps(
            {"tool_calls": [], "response": "ok", "done": True})}, "finish_reason": "stop"}]}))
        args = ("-p", "hi") if script == GROK else ("hi",)
        assert run(*args, script=script, env={"GROK_STREAM": "0"}).returncode == 0
        schemas[name] = fake.chat_requests()[-1].json["response_format"]["json_schema"]["schema"]
    grok = load_grok()
    for tools in ([], ["ask_user"]):
        schemas["grok with tools %s" % tools] = grok.MINIMAL.schema({t: grok.TOOLS[t] for t in tools})
    return schemas


def test_every_schema_sent_compiles_on_llama_cpp_pythons_converter(run, fake):
    schemas = sent_schemas(run, fake)
    assert {name: empty_subschemas(s) for name, s in schemas.items()} == {name: [] for name in schemas}
    converter = llama_grammar()
    if converter is None:
        pytest.skip("llama-cpp-python is not installed here: only the shapes it rejects were checked")
    for name, schema in schemas.items():
        grammar = converter.json_schema_to_gbnf(json.dumps(schema))
        assert grammar.startswith("root ::=") or "\nroot ::=" in grammar, name
    tool_less = converter.json_schema_to_gbnf(json.dumps(schemas["grok with tools []"]))
    assert re.search(r'tool-calls ::= "\[" space +"\]"', tool_less), tool_less


# 3. `done: true` with a response ends the turn on any round, the one past the limit included.
def test_an_answer_on_the_round_past_the_limit_ends_the_turn(run, fake):
    final = {"tool_calls": [LIST], "response": "Paris is the capital of France.", "done": True}
    llama(fake, {"tool_calls": [LIST], "response": None, "done": False}, final)
    r = run("-p", "What is the capital of France?", env=dict(LOCAL, GROK_MAX_ITERATIONS="1"))
    assert r.returncode == 0 and r.stdout == "Paris is the capital of France.\n", r.stderr
    assert "round limit reached: the answer ends the turn, its calls did not run" in r.stderr
    assert "[Limit] That was the last tool round" in chats(fake)[1].last_user and fake.pending("/chat/completions") == 0


# 4. ACP: each round's answer text is a paragraph of its own, streamed or not, live or replayed.
def acp_turn(run, env, prompt="What is the capital of France?"):
    """initialize, session/new, one prompt, then session/load of it: the agent_message_chunk text
    of the prompt, the prompt's stopReason, and the text of the replay."""
    proc = subprocess.Popen([sys.executable, str(GROK), "--acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=run.env(**env), start_new_session=True, text=True)
    timer = threading.Timer(30, proc.kill)
    timer.start()

    def call(i, method, **params):
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        said = []
        for line in proc.stdout:
            msg = json.loads(line)
            if msg.get("id") == i:
                return msg["result"], "".join(said)
            update = msg.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                said.append(update["content"]["text"])
        raise AssertionError("the server ended without answering %s" % method)
    try:
        call(1, "initialize", protocolVersion=1, clientCapabilities={})
        sid = call(2, "session/new", cwd=os.getcwd(), mcpServers=[])[0]["sessionId"]
        result, live = call(3, "session/prompt", sessionId=sid, prompt=[{"type": "text", "text": prompt}])
        replayed = call(4, "session/load", sessionId=sid, cwd=os.getcwd(), mcpServers=[])[1]
        proc.stdin.close()
        assert proc.wait() == 0
        return live, result["stopReason"], replayed
    finally:
        timer.cancel()
        proc.kill()


@pytest.mark.parametrize("stream", ["1", "0"])
def test_acp_sends_each_rounds_answer_text_as_its_own_paragraph(run, fake, stream):
    paris = "The capital of France is Paris."
    replies = [{"tool_calls": [LIST], "response": paris, "done": False}] * 2 + [
        {"tool_calls": [], "response": paris, "done": True}]
    if stream == "1":
        llama(fake, *replies)
    else:
        fake.add(*[raw(200, {"choices": [{"message": {"content": json.dumps(r)}, "finish_reason": "stop"}]})
                   for r in replies])
    live, stop, replayed = acp_turn(run, dict(LOCAL, GROK_STREAM=stream))
    assert stop == "end_turn", (live, replayed)
    assert (live, replayed) == ("\n\n".join([paris] * 3),) * 2


# 5. No window and no usage from the server: grok-detailed says so instead of showing xAI's window.
def test_grok_detailed_says_the_window_is_unknown_and_estimates_tokens(run, fake):
    llama(fake, {"tool_calls": [], "response": "Paris.", "done": True})
    r = run("What is the capital of France?", script=GROK_DETAILED, env=dict(LOCAL, COLUMNS="140"))
    assert r.returncode == 0, r.stderr
    assert re.search(r"\n  ↳ in ~\d+ · out ~\d+ · estimated: the server reports no usage · ", r.stdout)
    status = r.stdout.split("\nSession saved:")[0].splitlines()[-1]
    assert re.search(r" · \$0\.0000/\$10\.00 · \d+ tokens, window unknown: set GROK_CONTEXT_WINDOW · tools 0 ",
                     status), status
    assert "1,000,000" not in r.stdout
