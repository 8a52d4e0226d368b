"""The engine as a user drives it headless (`grok -p`): the contract loop, the six tools,
config and key lookup, API errors, cost, sessions, skills; plus unit tests of the parsers."""
import json
import os
import re
import stat
import time

import pytest

from conftest import load_grok, GROK, TEST_KEY
from fakeapi import answer, error, reply, responses_reply, tools


grok = load_grok()


def tool_round(run, *calls, args=(), env=None):
    """One headless turn: the model calls `calls`, then answers; returns the tool results
    message of the second request (and checks the turn succeeded)."""
    run.fake.add(tools(*calls), answer("all done"))
    r = run("-p", "go", "-y", *args, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "all done\n"
    reqs = run.fake.chat_requests()
    assert len(reqs) == 2
    return reqs[1].last_user


def session_records(data_dir):
    sdir = data_dir / "sessions"
    files = sorted(sdir.glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0], [json.loads(line) for line in files[0].read_text().splitlines()]


def pid_gone(pid):
    """True when the process no longer runs (a zombie waiting for a reaper counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


# ------------------------------------------------------------------ plain turn

@pytest.mark.parametrize("stream", ["1", "0"], ids=["streamed", "not-streamed"])
def test_plain_answer_is_printed_and_the_request_follows_the_contract(run, fake, stream):
    fake.add(answer("Hello there."))
    r = run("-p", "hi", env={"GROK_STREAM": stream})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Hello there.\n"
    assert "Traceback" not in r.stderr
    [req] = fake.chat_requests()
    body = req.json
    assert req.method == "POST" and req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer " + TEST_KEY
    assert body["model"] == "grok-4.3"
    assert body["max_tokens"] == 4000
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == "hi"
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    assert set(schema["required"]) == {"tool_calls", "response", "done"}
    assert {c["properties"]["tool"]["enum"][0] for c in schema["properties"]["tool_calls"]["items"]["anyOf"]} == {
        "bash", "web_search", "read_file", "write_file", "list_files", "ask_user"}
    system = body["messages"][0]["content"]
    for name in ("bash", "web_search", "read_file", "write_file", "list_files", "ask_user"):
        assert "- %s {" % name in system
    assert req.headers["x-grok-conv-id"]
    assert body.get("stream", False) is (stream == "1")


def test_multi_tool_round_trip_returns_results_as_one_user_message_in_call_order(run, fake, tmp_path):
    work = tmp_path / "work"
    (work / "notes.txt").write_text("line one\nline two\n")
    (work / "sub").mkdir()
    fake.add(tools(("bash", {"command": "sleep 0.3; echo slow-first"}),
                   ("read_file", {"path": "notes.txt"}),
                   ("bash", {"command": "echo quick-third"}),
                   ("list_files", {"path": "."})),
             answer("Read it all."))
    r = run("-p", "look around", "-y")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Read it all.\n"
    first, second = fake.chat_requests()
    sent = second.json["messages"]
    # Append-only: the second request is the first one plus the reply and one results message.
    assert sent[:2] == first.json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert json.loads(sent[2]["content"])["tool_calls"][0]["args"]["command"].startswith("sleep")
    results = sent[3]["content"]
    marks = [results.index(s) for s in ("[1] bash sleep 0.3; echo slow-first\nslow-first",
                                        "[2] read_file notes.txt\nline one\nline two",
                                        "[3] bash echo quick-third\nquick-third",
                                        "[4] list_files .\n")]
    assert marks == sorted(marks)
    assert "dir  sub/" in results and "file notes.txt 18" in results


def test_answer_with_tools_loops_until_the_reply_has_no_tool_calls(run, fake):
    fake.add(tools(("bash", {"command": "echo 1"})), tools(("bash", {"command": "echo 2"})),
             answer("two rounds"))
    r = run("-p", "go", "-y")
    assert r.returncode == 0 and r.stdout == "two rounds\n"
    reqs = fake.chat_requests()
    assert len(reqs) == 3
    assert [m["role"] for m in reqs[2].messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert reqs[2].last_user.startswith("Tool results:") and "\n2" in reqs[2].last_user


# ------------------------------------------------------------------- read_file

def test_read_file_missing_file_is_a_result_not_a_crash(run):
    out = tool_round(run, ("read_file", {"path": "nope.txt"}))
    assert "error: no such file:" in out and "nope.txt" in out
    assert "[Self-correction]" in out


def test_read_file_binary_file_is_not_dumped(run, tmp_path):
    (tmp_path / "work" / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    out = tool_round(run, ("read_file", {"path": "blob.bin"}))
    assert "binary file (700 bytes)" in out
    assert "ELF" not in out


def test_read_file_huge_file_is_capped_with_a_note(run, tmp_path):
    (tmp_path / "work" / "big.txt").write_text("a" * 150000 + "THE-END")
    out = tool_round(run, ("read_file", {"path": "big.txt"}))
    assert "[truncated: showing the first 100000 of 150007 bytes]" in out
    assert "THE-END" not in out
    assert 100000 <= len(out) < 101000


def test_read_file_directory_says_use_list_files(run, tmp_path):
    (tmp_path / "work" / "adir").mkdir()
    out = tool_round(run, ("read_file", {"path": "adir"}))
    assert "is a directory" in out and "list_files" in out


def test_read_file_empty_file_and_paths_relative_to_cwd(run, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "empty.txt").write_text("")
    (proj / "hello.txt").write_text("hello from proj")
    out = tool_round(run, ("read_file", {"path": "empty.txt"}), ("read_file", {"path": "hello.txt"}),
                     args=("--cwd", proj))
    assert "(empty file)" in out and "hello from proj" in out


# ------------------------------------------------------------------ write_file

def test_write_file_creates_parent_dirs_and_reports_bytes(run, tmp_path):
    out = tool_round(run, ("write_file", {"path": "a/b/c.txt", "content": "h\u00e9llo\n"}))
    target = tmp_path / "work" / "a" / "b" / "c.txt"
    assert target.read_text(encoding="utf-8") == "h\u00e9llo\n"
    assert "wrote 7 bytes" in out      # bytes, not characters
    assert [p.name for p in target.parent.iterdir()] == ["c.txt"]   # no temp file left behind


def test_write_file_is_atomic_and_keeps_the_mode(run, tmp_path):
    target = tmp_path / "work" / "run.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    link = tmp_path / "work" / "hardlink.sh"
    os.link(str(target), str(link))
    out = tool_round(run, ("write_file", {"path": "run.sh", "content": "#!/bin/sh\necho new\n"}))
    assert "wrote 19 bytes" in out
    assert target.read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    # Replaced by rename, not rewritten in place: the old inode still holds the old text.
    assert link.read_text() == "old\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["hardlink.sh", "run.sh"]


def test_write_file_writes_through_a_symlink(run, tmp_path):
    real = tmp_path / "dotfiles" / "bashrc"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "work" / ".bashrc"
    os.symlink(str(real), str(link))
    out = tool_round(run, ("write_file", {"path": ".bashrc", "content": "new\n"}))
    assert "wrote 4 bytes" in out
    assert link.is_symlink() and real.read_text() == "new\n"


def test_write_file_onto_a_directory_is_an_error_result(run, tmp_path):
    (tmp_path / "work" / "d").mkdir()
    out = tool_round(run, ("write_file", {"path": "d", "content": "x"}))
    assert "is a directory" in out
    assert (tmp_path / "work" / "d").is_dir()


# ------------------------------------------------------------------ list_files

def test_list_files_missing_directory_and_a_file(run, tmp_path):
    (tmp_path / "work" / "f.txt").write_text("x")
    out = tool_round(run, ("list_files", {"path": "missing"}), ("list_files", {"path": "f.txt"}))
    assert "no such directory" in out
    assert "is a file, not a directory" in out


def test_list_files_is_capped(run, tmp_path):
    many = tmp_path / "work" / "many"
    many.mkdir()
    for i in range(520):
        (many / ("f%03d" % i)).write_text("")
    out = tool_round(run, ("list_files", {"path": "many"}))
    assert "file f499 0" in out and "f500" not in out
    assert "[... 20 more entries not shown]" in out


def test_list_files_defaults_to_the_working_directory(run, tmp_path):
    (tmp_path / "work" / "only.txt").write_text("12345")
    out = tool_round(run, ("list_files", {}))
    assert "[1] list_files .\nfile only.txt 5" in out


# ------------------------------------------------------------------------ bash

def test_bash_timeout_kills_the_whole_process_group(run, tmp_path):
    cmd = "sleep 60 & echo $! > child.pid; echo started; wait"
    out = tool_round(run, ("bash", {"command": cmd}), env={"GROK_BASH_TIMEOUT": "0.5"})
    assert "started" in out and "[timed out after 0.5s: process group killed]" in out
    pid = int((tmp_path / "work" / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while not pid_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_gone(pid), "the background child of the timed-out command still runs"


def test_bash_stdin_is_empty(run, fake):
    fake.add(tools(("bash", {"command": "read line; echo \"got[$line] rc=$?\""})), answer("ok"))
    r = run("-p", "go", "-y", input="a line grok's own stdin holds\n")
    assert r.returncode == 0, r.stderr
    assert "got[] rc=1" in fake.chat_requests()[1].last_user


def test_bash_runs_in_the_cwd_directory(run, tmp_path):
    proj = tmp_path / "elsewhere"
    proj.mkdir()
    out = tool_round(run, ("bash", {"command": "pwd"}), args=("--cwd", proj))
    assert "\n%s\n" % proj in out


def test_web_search_uses_the_responses_api_and_returns_text_and_sources(run, fake):
    fake.add(responses_reply("It is 62F and cloudy.", urls=["https://weather.example/sf",
                                                           "https://news.example/a"]))
    out = tool_round(run, ("web_search", {"query": "weather san francisco today"}))
    [search] = fake.responses_requests()
    assert search.method == "POST" and search.path == "/v1/responses"
    assert search.json["tools"] == [{"type": "web_search"}]
    assert "weather san francisco today" in json.dumps(search.json["input"])
    assert search.json["model"] == "grok-4.3"
    assert "search_parameters" not in search.json
    assert search.headers["authorization"] == "Bearer " + TEST_KEY
    assert "It is 62F and cloudy." in out
    assert "https://weather.example/sf" in out and "https://news.example/a" in out


def test_web_search_cost_is_counted(run, fake, tmp_path):
    data = tmp_path / "data"
    fake.add(responses_reply("ok", usage={"input_tokens": 10 ** 6, "output_tokens": 0}))
    tool_round(run, ("web_search", {"query": "q"}), env={"GROK_DATA_DIR": data})
    _, recs = session_records(data)
    searches = [rec for rec in recs if rec["type"] == "usage" and rec["kind"] == "web_search"]
    assert [rec["cost_usd"] for rec in searches] == [pytest.approx(1.25)]


def test_web_search_without_a_responses_api_is_unavailable(run, fake):
    fake.add(error(404, {"code": "not_found", "error": "no such route"}), path="/responses")
    out = tool_round(run, ("web_search", {"query": "anything"}))
    assert "web_search is unavailable" in out
    assert len(fake.responses_requests()) == 1


# --------------------------------------------------- contract: invalid replies

def test_unknown_tool_gets_a_corrective_message(run, fake):
    fake.add(tools(("frobnicate", {"x": 1})), answer("sorry, fixed"))
    r = run("-p", "go", "-y")
    assert r.returncode == 0 and r.stdout == "sorry, fixed\n"
    second = fake.chat_requests()[1]
    assert second.messages[-2]["role"] == "assistant"
    fix = second.last_user
    assert "broke the JSON contract" in fix and "unknown tool 'frobnicate'" in fix
    assert "bash" in fix


def test_args_not_an_object_gets_a_corrective_message(run, fake):
    fake.add(reply({"tool_calls": [{"tool": "bash", "args": ["ls"]}], "response": None, "done": False}),
             answer("ok"))
    r = run("-p", "go", "-y")
    assert r.returncode == 0
    assert "tool_calls[0].args must be an object" in fake.chat_requests()[1].last_user


def test_missing_tool_argument_is_an_error_result(run):
    out = tool_round(run, ("bash", {"cmd": "ls"}), ("read_file", {}))
    assert "bash needs a non-empty string 'command' argument" in out
    assert "read_file needs a non-empty string 'path' argument" in out


def test_invalid_json_three_times_fails_with_exit_3_and_no_fourth_request(run, fake):
    fake.add(reply("I think the answer is 4."), reply("{not json"), reply('{"done": true}'),
             answer("never asked for"))
    r = run("-p", "go")
    assert r.returncode == 3
    assert r.stdout == ""
    assert "broke the JSON contract 3 times" in r.stderr
    assert "Traceback" not in r.stderr
    reqs = fake.chat_requests()
    assert len(reqs) == 3 and fake.pending() == 1
    for req in reqs[1:]:
        assert req.last_user.startswith("Your last reply broke the JSON contract")


def test_a_valid_reply_resets_the_strike_count(run, fake):
    fake.add(reply("junk"), reply("junk"), tools(("bash", {"command": "echo hi"})),
             reply("junk"), reply("junk"), answer("made it"))
    r = run("-p", "go", "-y")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "made it\n"
    assert len(fake.chat_requests()) == 6


def test_tolerant_parsing_code_fence_and_prose(run, fake):
    obj = {"tool_calls": [], "response": "fenced answer", "done": True}
    fake.add(reply("Sure! Here it is:\n```json\n%s\n```\nHope that helps." % json.dumps(obj, indent=2)))
    r = run("-p", "go")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "fenced answer\n"
    assert len(fake.chat_requests()) == 1


# ------------------------------------------------ contract: response_format fallback

LLAMA_500 = {"error": {"code": 500, "type": "server_error",
                       "message": "JSON schema conversion failed: response_format json_schema unsupported"}}


@pytest.mark.parametrize("status,body", [
    (400, {"code": "Client specified an invalid argument",
           "error": "Invalid request: response_format type json_schema is not supported"}),
    (500, LLAMA_500),
], ids=["400", "500-llama.cpp"])
def test_json_schema_rejected_falls_back_to_json_object_with_schema_for_the_session(run, fake, status, body):
    fake.add(error(status, body), tools(("bash", {"command": "echo hi"})), answer("fallback works"))
    r = run("-p", "go", "-y")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "fallback works\n"
    reqs = fake.chat_requests()
    assert len(reqs) == 3          # the rejection is not retried as a 5xx would be
    assert reqs[0].json["response_format"]["type"] == "json_schema"
    schema = reqs[0].json["response_format"]["json_schema"]["schema"]
    for req in reqs[1:]:           # the retried request, and the next one: the fallback sticks
        assert req.json["response_format"] == {"type": "json_object", "schema": schema}
    assert reqs[1].json["messages"] == reqs[0].json["messages"]
    assert "response_format" in r.stderr


def test_json_object_with_schema_rejected_too_falls_back_to_plain_json_object(run, fake):
    fake.add(error(400, {"code": "bad", "error": "response_format: json_schema unsupported"}),
             error(400, {"code": "bad", "error": "response_format.schema: unknown field"}),
             answer("plain"))
    r = run("-p", "go")
    assert r.returncode == 0, r.stderr
    fmts = [q.json["response_format"]["type"] for q in fake.chat_requests()]
    assert fmts == ["json_schema", "json_object", "json_object"]
    assert fake.chat_requests()[2].json["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("value,sent", [(None, 0.5), ("0.2", 0.2), ("", None)], ids=["default", "set", "empty"])
def test_temperature_is_sent_as_grok_temperature_says(run, fake, value, sent):
    fake.add(answer("x"))
    r = run("-p", "go", env={"GROK_TEMPERATURE": value})
    assert r.returncode == 0, r.stderr
    body = fake.chat_requests()[0].json
    assert body.get("temperature", "absent") == (sent if sent is not None else "absent")


def test_a_rejected_temperature_is_dropped_for_the_session_with_one_notice(run, fake):
    fake.add(error(400, {"code": "bad", "error": "Argument not supported on this model: temperature"}),
             tools(("list_files", {})), answer("ok"))
    r = run("-p", "go")
    assert r.returncode == 0, r.stderr
    reqs = fake.chat_requests()
    assert [("temperature" in q.json) for q in reqs] == [True, False, False]
    assert reqs[1].json["messages"] == reqs[0].json["messages"]
    assert r.stderr.count("rejected temperature") == 1


def test_a_temperature_that_is_not_a_number_is_a_user_error(run, fake):
    r = run("-p", "go", env={"GROK_TEMPERATURE": "warm"})
    assert r.returncode == 1 and "GROK_TEMPERATURE" in r.stderr
    assert fake.chat_requests() == []


def test_an_unrelated_400_is_not_a_format_fallback(run, fake):
    fake.add(error(400, {"code": "bad", "error": "Model not found: grok-nope"}), answer("x"))
    r = run("-p", "go", "-m", "grok-nope")
    assert r.returncode == 1
    assert "HTTP 400" in r.stderr and "Model not found" in r.stderr
    assert len(fake.chat_requests()) == 1


# ---------------------------------------------------------------- config, key

def test_missing_key_is_one_line_and_exit_1(run, fake):
    r = run("-p", "hi", env={"GROK_API_KEY": None})
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for word in ("GROK_API_KEY", "XAI_API_KEY", "./.env", "~/.grok/.env", "~/.claude/.env"):
        assert word in lines[0]
    assert r.stdout == "" and fake.requests == []


def test_missing_key_in_the_repl_too(run, fake):
    r = run(input="hello\n", env={"GROK_API_KEY": None})
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert fake.requests == []


def test_xai_api_key_is_accepted(run, fake):
    fake.add(answer("ok"))
    r = run("-p", "hi", env={"GROK_API_KEY": None, "XAI_API_KEY": "xai-from-xai-var"})
    assert r.returncode == 0
    assert fake.chat_requests()[0].headers["authorization"] == "Bearer xai-from-xai-var"


def test_key_lookup_order_grok_then_claude_then_dotenv(run, fake, isolated_env):
    home, work = isolated_env.home, isolated_env.work
    (home / ".grok").mkdir()
    (home / ".claude").mkdir()
    (work / ".env").write_text("# project\nOTHER=1\nexport GROK_API_KEY='key-from-dot-env'\n")
    (home / ".grok" / ".env").write_text("XAI_API_KEY=key-from-grok-dir\n")
    (home / ".claude" / ".env").write_text("GROK_API_KEY=\"key-from-claude-dir\"  \n")
    env = {"GROK_API_KEY": None}
    seen = []
    for remove in (home / ".grok" / ".env", home / ".claude" / ".env", work / ".env"):
        fake.add(answer("ok"))
        r = run("-p", "hi", env=env)
        assert r.returncode == 0, r.stderr
        seen.append(fake.chat_requests()[-1].headers["authorization"])
        remove.unlink()
    assert seen == ["Bearer key-from-grok-dir", "Bearer key-from-claude-dir", "Bearer key-from-dot-env"]
    assert "./.env" in r.stderr         # a project's key is named as such


def test_environment_key_beats_dotenv(run, fake, isolated_env):
    (isolated_env.work / ".env").write_text("GROK_API_KEY=from-file\n")
    fake.add(answer("ok"))
    assert run("-p", "hi").returncode == 0
    assert fake.chat_requests()[0].headers["authorization"] == "Bearer " + TEST_KEY


def test_only_key_variables_are_taken_from_dotenv(run, fake, isolated_env):
    (isolated_env.work / ".env").write_text(
        "GROK_MODEL=model-from-dotenv\nCOST_LIMIT=0.000001\nGROK_MAX_TOKENS=7\nGROK_API_KEY=xai-dotenvkey\n")
    fake.add(tools(("bash", {"command": "echo $GROK_MODEL"}), usage={"cost_in_usd_ticks": 10 ** 8}),
             answer("ok"))
    r = run("-p", "hi", "-y", env={"GROK_API_KEY": None})
    assert r.returncode == 0, r.stderr
    first, second = fake.chat_requests()
    assert first.headers["authorization"] == "Bearer xai-dotenvkey"
    assert first.json["model"] == "grok-4.3" and first.json["max_tokens"] == 4000
    assert "model-from-dotenv" not in second.last_user


def test_401_says_the_key_was_rejected_and_never_prints_the_key(run, fake):
    fake.add(error(401, {"code": "Unauthorized",
                         "error": "Incorrect API key provided: %s. Obtain a key at console.x.ai" % TEST_KEY}))
    r = run("-p", "hi")
    assert r.returncode == 1
    assert "API key was rejected" in r.stderr and "401" in r.stderr
    assert TEST_KEY not in r.stdout + r.stderr
    assert TEST_KEY[4:] not in r.stdout + r.stderr
    assert len(fake.chat_requests()) == 1      # not retried


def test_xai_error_body_string_is_shown(run, fake):
    fake.add(error(403, {"code": "The caller does not have permission",
                         "error": "Your team has run out of credits."}))
    r = run("-p", "hi")
    assert r.returncode == 1
    assert "HTTP 403" in r.stderr and "Your team has run out of credits." in r.stderr


def test_bad_base_url_is_a_user_error(run, fake):
    r = run("-p", "hi", env={"GROK_BASE_URL": "api.x.ai/v1"})
    assert r.returncode == 1 and "GROK_BASE_URL must start with http" in r.stderr


def test_bad_number_in_config_is_a_user_error(run, fake):
    r = run("-p", "hi", env={"COST_LIMIT": "ten dollars"})
    assert r.returncode == 1
    assert "COST_LIMIT must be a number" in r.stderr and "Traceback" not in r.stderr


# ----------------------------------------------------------------- cost limit

def test_cost_limit_reached_stops_before_the_next_call(run, fake, tmp_path):
    fake.add(tools(("bash", {"command": "echo ran > ran.txt"}),
                   usage={"prompt_tokens": 100, "completion_tokens": 10, "cost_in_usd_ticks": 2 * 10 ** 8}),
             answer("never"))
    r = run("-p", "go", "-y", env={"COST_LIMIT": "0.01"})
    assert r.returncode == 3
    assert "cost limit reached" in r.stderr and "COST_LIMIT" in r.stderr
    assert len(fake.chat_requests()) == 1 and fake.pending() == 1
    assert (tmp_path / "work" / "ran.txt").exists()     # the round ran; the next call did not


def test_cost_limit_zero_means_no_limit(run, fake):
    fake.add(tools(("bash", {"command": "true"}), usage={"cost_in_usd_ticks": 10 ** 12}), answer("fine"))
    r = run("-p", "go", "-y", env={"COST_LIMIT": "0"})
    assert r.returncode == 0 and r.stdout == "fine\n"


def test_price_table_is_used_without_ticks(run, fake, tmp_path):
    usage = {"prompt_tokens": 1000000, "completion_tokens": 1000000,
             "prompt_tokens_details": {"cached_tokens": 200000}}
    fake.add(tools(("bash", {"command": "true"}), usage=usage), answer("never"))
    data = tmp_path / "data"
    r = run("-p", "go", "-y", env={"COST_LIMIT": "3", "GROK_DATA_DIR": data})
    # 0.8M * 1.25 + 0.2M * 0.20 + 1M * 2.50 = $3.54 > $3: stopped before the second call
    assert r.returncode == 3 and "cost limit reached" in r.stderr
    assert len(fake.chat_requests()) == 1
    _, recs = session_records(data)
    costs = [rec["cost_usd"] for rec in recs if rec["type"] == "usage"]
    assert costs == [pytest.approx(3.54)]


def test_unknown_model_price_unknown_no_crash(run, fake, tmp_path):
    fake.add(answer("local answer", usage={"prompt_tokens": 5000, "completion_tokens": 5000}))
    data = tmp_path / "data"
    r = run("-p", "hi", "-m", "my-local-llama", env={"GROK_DATA_DIR": data, "COST_LIMIT": "0.0001",
                                                     "GROK_PRICES": None})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "local answer\n"
    assert "price unknown" in r.stderr and "my-local-llama" in r.stderr
    assert fake.chat_requests()[0].json["model"] == "my-local-llama"
    _, recs = session_records(data)
    assert [rec["cost_usd"] for rec in recs if rec["type"] == "usage"] == [0]


# --------------------------------------------------------------------- session

def test_session_file_is_private_and_holds_header_messages_usage(run, fake, tmp_path):
    data = tmp_path / "data"
    fake.add(tools(("bash", {"command": "echo hi"}), usage={"prompt_tokens": 10, "completion_tokens": 2,
                                                           "cost_in_usd_ticks": 12345}),
             answer("bye"))
    r = run("-p", "say hi", "-y", env={"GROK_DATA_DIR": data})
    assert r.returncode == 0, r.stderr
    path, recs = session_records(data)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    header = recs[0]
    assert header["type"] == "session" and header["id"] == path.stem
    assert header["model"] == "grok-4.3" and header["cwd"] == str(tmp_path / "work")
    assert header["system"] == fake.chat_requests()[0].messages[0]["content"]
    assert fake.chat_requests()[0].headers["x-grok-conv-id"] == path.stem
    messages = [rec["message"] for rec in recs if rec["type"] == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0]["content"] == "say hi" and messages[2]["content"].startswith("Tool results:")
    usage = [rec for rec in recs if rec["type"] == "usage"]
    assert len(usage) == 2 and usage[0]["usage"]["cost_in_usd_ticks"] == 12345
    assert usage[0]["cost_usd"] == pytest.approx(12345 / 1e10)


def test_default_data_dir_follows_xdg_data_home(run, fake, tmp_path, isolated_env):
    fake.add(answer("a"), answer("b"))
    assert run("-p", "1").returncode == 0
    assert len(list((isolated_env.home / ".local/share/grok-agent/sessions").glob("*.jsonl"))) == 1
    assert run("-p", "2", env={"XDG_DATA_HOME": tmp_path / "xdg"}).returncode == 0
    assert len(list((tmp_path / "xdg/grok-agent/sessions").glob("*.jsonl"))) == 1


def test_session_id_is_unique_per_run(run, fake, tmp_path):
    data = tmp_path / "data"
    fake.add(answer("a"), answer("b"))
    assert run("-p", "1", env={"GROK_DATA_DIR": data}).returncode == 0
    assert run("-p", "2", env={"GROK_DATA_DIR": data}).returncode == 0
    assert len(list((data / "sessions").glob("*.jsonl"))) == 2
    ids = {q.headers["x-grok-conv-id"] for q in fake.chat_requests()}
    assert len(ids) == 2


# ---------------------------------------------------------------- flags, help

def test_version(run):
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == "grok " + grok.__version__


def test_help_lists_flags_and_variables(run):
    r = run("--help")
    assert r.returncode == 0
    for word in ("-p", "--model", "--cwd", "--always-approve", "GROK_API_KEY", "GROK_BASE_URL",
                 "COST_LIMIT", "GROK_SKILLS_DIR", "GROK_DATA_DIR", "exit codes", "grok models"):
        assert word in r.stdout
    # every GROK_ variable the engine reads is named in --help and in the README
    source, readme = GROK.read_text(), (GROK.parent / "README.md").read_text()
    names = set(re.findall(r'"(GROK_[A-Z_]+)"', source))
    assert len(names) > 15
    assert sorted(n for n in names if n not in r.stdout or n not in readme) == []


def test_version_and_help_need_no_key(run):
    assert run("--version", env={"GROK_API_KEY": None}).returncode == 0
    assert run("--help", env={"GROK_API_KEY": None}).returncode == 0


def test_model_flag_is_sent(run, fake):
    fake.add(answer("ok"), answer("ok"))
    assert run("-p", "hi", "-m", "grok-3-mini").returncode == 0
    assert run("-p", "hi", env={"GROK_MODEL": "grok-4.20-reasoning"}).returncode == 0
    assert [q.json["model"] for q in fake.chat_requests()] == ["grok-3-mini", "grok-4.20-reasoning"]


def test_bad_flag_and_missing_cwd_are_user_errors(run, fake, tmp_path):
    r = run("--no-such-flag")
    assert r.returncode == 1 and "unrecognized arguments" in r.stderr
    r = run("-p", "hi", "--cwd", tmp_path / "nope")
    assert r.returncode == 1 and "no such directory" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert fake.requests == []


def test_cwd_is_shown_to_the_model(run, fake, tmp_path):
    fake.add(answer("ok"))
    assert run("-p", "hi", "--cwd", tmp_path).returncode == 0
    assert "- working directory: %s\n" % tmp_path in fake.chat_requests()[0].messages[0]["content"] + "\n"


# ---------------------------------------------------------------------- skills

def test_system_prompt_lists_skills_with_descriptions(run, fake, tmp_path):
    skills = tmp_path / "skills"
    (skills / "deploy").mkdir(parents=True)
    (skills / "notes").mkdir()
    (skills / "notes" / "deeper").mkdir()
    (skills / ".hidden").mkdir()
    (skills / "alpha.md").write_text("---\nname: alpha\ndescription: Use for alpha things.\n---\n# Alpha\n")
    (skills / "beta.md").write_text("# Beta skill\n\nHelps with beta problems.\nMore text.\n")
    (skills / "deploy" / "SKILL.md").write_text("---\ndescription: Ship the app to prod.\n---\nsteps\n")
    (skills / "notes" / "taking.md").write_text("---\nname: note-taking\ndescription: Keep notes.\n---\n")
    (skills / "notes" / "deeper" / "too-deep.md").write_text("---\nname: too-deep\ndescription: no\n---\n")
    (skills / ".hidden" / "SKILL.md").write_text("---\nname: hidden\ndescription: no\n---\n")
    (skills / "README.md").write_text("# About these skills\n")
    (skills / "data.txt").write_text("not a skill")
    fake.add(answer("ok"))
    r = run("-p", "hi", env={"GROK_SKILLS_DIR": skills})
    assert r.returncode == 0, r.stderr
    system = fake.chat_requests()[0].messages[0]["content"]
    assert "SKILLS" in system and "read_file" in system
    lines = [line for line in system.splitlines() if line.startswith("- ") and str(skills) in line]
    assert lines == [
        "- alpha: Use for alpha things. (%s)" % (skills / "alpha.md"),
        "- beta: Helps with beta problems. (%s)" % (skills / "beta.md"),
        "- deploy: Ship the app to prod. (%s)" % (skills / "deploy" / "SKILL.md"),
        "- note-taking: Keep notes. (%s)" % (skills / "notes" / "taking.md"),
    ]
    for absent in ("too-deep", "hidden", "About these", "data.txt"):
        assert absent not in system


def test_no_skills_dir_means_no_skills_section(run, fake, tmp_path):
    fake.add(answer("ok"))
    assert run("-p", "hi", env={"GROK_SKILLS_DIR": tmp_path / "none"}).returncode == 0
    assert "SKILLS" not in fake.chat_requests()[0].messages[0]["content"]


def test_shipped_skills_are_listed_by_default(run, fake):
    fake.add(answer("ok"))
    assert run("-p", "hi").returncode == 0
    system = fake.chat_requests()[0].messages[0]["content"]
    for name in ("code-review", "research", "shell-safety"):
        assert "\n- %s: Use " % name in system


# ------------------------------------------------------------ parser unit tests

CALL = {"tool_calls": [{"tool": "bash", "args": {"command": "ls"}}], "response": None, "done": False}
NAMES = list(grok.TOOLS)


@pytest.mark.parametrize("text", [
    json.dumps(CALL),
    "```json\n%s\n```" % json.dumps(CALL, indent=2),
    "```\n%s\n```" % json.dumps(CALL),
    "Let me look. %s" % json.dumps(CALL),
    "Here {is} my plan: %s -- done {" % json.dumps(CALL),
    "  \n%s\n\nThat is all." % json.dumps(CALL),
])
def test_parse_reply_tolerates_fences_and_prose(text):
    obj = grok.parse_reply(text, NAMES)
    assert obj["tool_calls"] == [{"tool": "bash", "args": {"command": "ls"}}]
    assert obj["response"] is None and obj["done"] is False


@pytest.mark.parametrize("content,problem", [
    (None, "empty"),
    ("   ", "empty"),
    ("no json here", "not a JSON object"),
    ("[1, 2]", "must be a JSON object"),
    ('{"tool_calls": "ls", "response": null}', '"tool_calls" must be an array'),
    ('{"tool_calls": [{"tool": "rm_rf", "args": {}}]}', "unknown tool 'rm_rf'"),
    ('{"tool_calls": [{"args": {}}]}', 'has no "tool" name'),
    ('{"tool_calls": [{"tool": "bash", "args": "ls -la"}]}', "args must be an object"),
    ('{"tool_calls": ["bash"]}', "must be an object"),
    ('{"tool_calls": [], "response": null, "done": true}', "neither tool_calls nor a response"),
    ('{"tool_calls": [], "response": "  ", "done": true}', "neither tool_calls nor a response"),
    ('{"tool_calls": [], "response": {"a": 1}}', '"response" must be a string'),
])
def test_parse_reply_names_the_problem(content, problem):
    with pytest.raises(grok.ContractError) as e:
        grok.parse_reply(content, NAMES)
    assert problem in str(e.value)


def test_parse_reply_cut_off_reply_says_max_tokens():
    with pytest.raises(grok.ContractError) as e:
        grok.parse_reply('{"tool_calls": [], "response": "a long ans', NAMES, finish_reason="length")
    assert "max_tokens" in str(e.value)


def test_parse_reply_normalises_lenient_shapes():
    obj = grok.parse_reply('{"tool_calls": {"name": "read_file", "arguments": "{\\"path\\": \\"a\\"}"}}', NAMES)
    assert obj["tool_calls"] == [{"tool": "read_file", "args": {"path": "a"}}]
    assert obj["done"] is False and obj["response"] is None
    obj = grok.parse_reply('{"response": "hi", "done": "true"}', NAMES)
    assert obj["tool_calls"] == [] and obj["done"] is True
    obj = grok.parse_reply('{"response": 42}', NAMES)
    assert obj["response"] == "42" and obj["done"] is True
    obj = grok.parse_reply('{"tool_calls": [{"tool": "list_files", "args": null}], "response": null}', NAMES)
    assert obj["tool_calls"] == [{"tool": "list_files", "args": {}}]


def test_corrective_message_names_the_problem_and_the_shape():
    text = grok.corrective_message("unknown tool 'x'")
    assert "unknown tool 'x'" in text and '"tool_calls"' in text and '"done"' in text


def test_read_env_file_takes_only_named_keys(tmp_path):
    env = tmp_path / ".env"
    env.write_text("GROK_BASE_URL=http://evil\n# GROK_API_KEY=commented\nexport XAI_API_KEY = 'quoted' \n"
                   "GROK_API_KEY=plain # a comment\n")
    assert grok.read_env_file(str(env), ("GROK_API_KEY", "XAI_API_KEY")) == "plain"
    assert grok.read_env_file(str(env), ("XAI_API_KEY",)) == "quoted"
    assert grok.read_env_file(str(env), ("GROK_BASE_URL_X",)) is None
    assert grok.read_env_file(str(tmp_path / "missing"), ("GROK_API_KEY",)) is None


@pytest.mark.parametrize("model,usage,cost,known", [
    ("grok-4.3", {"prompt_tokens": 10 ** 6, "completion_tokens": 0}, 1.25, True),
    ("grok-4.3", {"prompt_tokens": 10 ** 6, "completion_tokens": 10 ** 6,
                  "prompt_tokens_details": {"cached_tokens": 5 * 10 ** 5},
                  "completion_tokens_details": {"reasoning_tokens": 10 ** 6}}, 0.625 + 0.10 + 5.0, True),
    ("grok-4-1-fast-reasoning", {"prompt_tokens": 10 ** 6}, 1.25, True),
    ("grok-3-mini", {"prompt_tokens": 10 ** 6, "completion_tokens": 10 ** 6}, 0.80, True),
    ("grok-4.20-0309-reasoning", {"completion_tokens": 10 ** 6}, 2.50, True),
    ("anything", {"cost_in_usd_ticks": 5 * 10 ** 9, "prompt_tokens": 10 ** 9}, 0.5, True),
    ("llama-3-8b", {"prompt_tokens": 10 ** 6}, 0.0, False),
    ("grok-4.3", None, 0.0, True),
])
def test_usage_cost(model, usage, cost, known):
    got, got_known = grok.usage_cost(model, usage)
    assert got == pytest.approx(cost) and got_known is known


def test_find_skills_names_skill_md_after_its_folder(tmp_path):
    (tmp_path / "pdf").mkdir()
    (tmp_path / "pdf" / "SKILL.md").write_text("# PDF handling\n\nRead and fill PDF forms.\n")
    [(name, desc, path)] = grok.find_skills(str(tmp_path))
    assert (name, desc) == ("pdf", "Read and fill PDF forms.")
    assert path == str(tmp_path / "pdf" / "SKILL.md")


def test_continue_and_resume_read_only_the_sessions_they_need(tmp_path, monkeypatch):
    # -c reads sessions newest first until one somebody typed into; --resume ID matches file names only.
    folder = tmp_path / "sessions"
    folder.mkdir(mode=0o700)
    for i, (sid, text) in enumerate([("20200101-000000-aaaaaa", "oldest"), ("20200102-000000-bbbbbb", "older"),
                                     ("20200103-000000-cccccc", "typed into"), ("20200104-000000-dddddd", None)]):
        records = [{"type": "session", "version": 1, "id": sid, "system": "S"}]
        records += [{"type": "message", "message": {"role": "user", "content": text}}] if text else []
        (folder / (sid + ".jsonl")).write_text("".join(json.dumps(r) + "\n" for r in records))
        os.utime(folder / (sid + ".jsonl"), (1000 + i, 1000 + i))
    loaded, load = [], grok.Session.load
    monkeypatch.setattr(grok.Session, "load", lambda self: loaded.append(self.id[-6:]) or load(self))
    newest = next(s for s in grok.list_sessions(str(tmp_path)) if s[2])
    assert newest[0] == "20200103-000000-cccccc" and newest[2] == "typed into"
    assert loaded == ["dddddd", "cccccc"]
    assert grok.find_session(str(tmp_path), "bbbbbb") == "20200102-000000-bbbbbb"
    assert loaded == ["dddddd", "cccccc"]
    assert [s[2] for s in grok.list_sessions(str(tmp_path))] == ["", "typed into", "older", "oldest"]
