"""grok-detailed: the debugging view, its REPL commands, sessions, compaction, cost limit, Ctrl-C.

Most tests pipe stdin into the real script; the ones about the terminal (status line before
the prompt, colours, Ctrl-C) run it on a pseudo-terminal."""
import json
import os
import re
import shutil
import sys
from pathlib import Path


from conftest import GROK, GROK_DETAILED
from fakeapi import answer, hang, reply, tools
from ptyrun import PtyProcess

SGR = re.compile(r"\x1b\[[0-9;]*m")
CURSOR = re.compile(r"\x1b\[\d*[AJ]")


def detailed(task="Answer", tool_calls=(), response=None, done=None, **fields):
    """A full detailed-contract reply (fields override the defaults)."""
    body = {"thinking": "Nothing to think about.", "task": task, "goal": "Help the user",
            "exit_conditions": ["answer given"],
            "progress": {"completed": [], "current": task, "remaining": []},
            "blockers": None, "confidence": 90,
            "tool_calls": [{"tool": n, "args": a} for n, a in tool_calls],
            "response": response, "done": (not tool_calls) if done is None else done}
    body.update(fields)
    return body


def usage(prompt=100, completion=20, cached=0, ticks=None):
    u = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
         "prompt_tokens_details": {"cached_tokens": cached}}
    if ticks is not None:
        u["cost_in_usd_ticks"] = ticks
    return u


def session_files(home):
    return sorted((home / ".local/share/grok-agent/sessions").glob("*.jsonl"))


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def contents(request):
    return "\n".join(str(m.get("content")) for m in request.messages)


def rd(run, *args, **kw):
    return run(*args, script=GROK_DETAILED, **kw)


# ------------------------------------------------------------------ the request and the display

def test_request_asks_for_the_detailed_schema_as_structured_output(run, fake):
    fake.add(reply(detailed(response="hi")))
    r = rd(run, input="hello\n")
    assert r.returncode == 0, r.stderr
    req = fake.chat_requests()[0].json
    fmt = req["response_format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    for name in ("thinking", "task", "goal", "exit_conditions", "progress", "blockers", "confidence",
                 "tool_calls", "response", "done"):
        assert name in schema["properties"] and name in schema["required"], name
    assert set(schema["properties"]["progress"]["properties"]) == {"completed", "current", "remaining"}
    assert req["max_tokens"] == 8000
    assert "exit_conditions" in req["messages"][0]["content"]


def test_every_field_of_a_scripted_reply_is_shown(run, fake):
    first = detailed(task="List files", goal="Tell the user what is here",
                     exit_conditions=["listing shown", "user answered"],
                     progress={"completed": ["read the request"], "current": "listing",
                               "remaining": ["summarise"]},
                     thinking="Run ls before answering.", blockers="no sudo here", confidence=55,
                     tool_calls=[("bash", {"command": "echo line-one; echo line-two"})])
    final = detailed(task="Summarise", goal="Tell the user what is here", response="Two lines were printed.",
                     progress={"completed": ["read the request", "listing"], "current": "summarise",
                               "remaining": []},
                     thinking="The output is in.", confidence=92)
    fake.add(reply(first, usage=usage(1200, 80, cached=1024)), reply(final, usage=usage(1400, 40, cached=512)))
    r = rd(run, "-y", input="what is here?\n")
    out = r.stdout
    assert r.returncode == 0, r.stderr
    assert re.search(r"\[1\] List files · 1/3 .* \d\d:\d\d:\d\d", out)
    assert "confidence 55%" in out
    assert out.count("Tell the user what is here") == 1           # the goal only when set or changed
    assert re.search(r"exit\s+• listing shown\s+• user answered", out)
    assert re.search(r"progress\s+✓ read the request\s+▸ listing\s+○ summarise", out)
    assert re.search(r"thinking\s+Run ls before answering\.", out)
    assert re.search(r"blockers\s+no sudo here", out)
    assert "┌ [1] bash echo line-one; echo line-two" in out
    assert "│ line-one" in out and "│ line-two" in out
    assert re.search(r"└ \[1\] bash ✓ \d+\.\d\ds", out)
    assert re.search(r"↳ in 1,200 \(1,024 cached\) · out 80 · \$0\.\d{4} · \d+\.\ds", out)
    assert re.search(r"\[2\] Summarise · 2/3", out)
    assert out.count("blockers") == 1                              # absent blockers are not shown
    assert re.search(r"╭─ answer ─+ \d\d:\d\d:\d\d · \d+\.\ds · confidence 92% ─+\n│ Two lines were printed\.\n╰─+\n",
                     out)
    # Piped stdin has no prompt: the status line follows the turn.
    sid = session_files(Path(os.environ["HOME"]))[0].stem
    # At 80 columns: the id's last part (what /resume takes); no room is left for the cwd.
    assert re.search("\n" + re.escape(sid.rsplit("-", 1)[1]) +
                     r" · grok-4\.3 · \$0\.\d{4}/\$10\.00 · context \d+\.\d% · tools 1 · cached 512\n", out)
    assert all(len(line) <= 80 for line in out.splitlines()), "wider than the 80-column default"
    assert "\x1b" not in out + r.stderr


def test_a_reply_missing_optional_fields_still_renders(run, fake):
    odd = {"tool_calls": [], "response": "still here", "done": True, "confidence": "85%",
           "progress": "half way", "exit_conditions": "one condition", "blockers": ["disk full"],
           "thinking": {"not": "a string"}, "goal": None}
    fake.add(answer("plain answer"), reply(odd))
    r = rd(run, input="one\ntwo\n")
    assert r.returncode == 0, r.stderr
    assert "[1] (no task)" in r.stdout and "plain answer" in r.stdout
    assert "still here" in r.stdout and "confidence 85%" in r.stdout
    assert "one condition" in r.stdout and "disk full" in r.stdout and "half way" in r.stdout
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_terminal_escapes_from_the_model_are_not_passed_through(run, fake):
    fake.add(reply(detailed(task="x\x1b[2Jy", response="a\x1b]0;pwned\x07b")))
    r = rd(run, input="hi\n")
    assert "\x1b" not in r.stdout and "x\\x1b[2Jy" in r.stdout


def test_help_and_tools_list_the_commands_and_tools(run, fake):
    r = rd(run, input="/help\n/tools\n/sessions\n/nope\n")
    assert r.returncode == 0, r.stderr
    for command in ("/clear", "/exit", "/help", "/cd DIR", "/sessions", "/resume ID", "/compact", "/cost", "/tools"):
        assert command in r.stdout
    for tool in ("bash", "web_search", "read_file", "write_file", "list_files", "ask_user"):
        assert re.search(r"^  %s\s+\{" % tool, r.stdout, re.M), tool
    assert "[asks first]" in r.stdout
    assert "no saved sessions in" in r.stdout                            # nothing said yet: no file either
    assert "unknown command /nope" in r.stderr
    assert fake.chat_requests() == []


# ------------------------------------------------------------------ /cd, /sessions, /resume

def test_cd_changes_where_bash_runs_and_the_model_is_told(run, fake, isolated_env):
    sub = isolated_env.work / "sub"
    sub.mkdir()
    (sub / "AGENTS.md").write_text("Always answer in haiku.\n")
    fake.add(tools(("bash", {"command": "pwd"})), answer("done"))
    r = rd(run, "-y", input="/cd nowhere\n/cd sub\nwhere am I?\n")
    assert r.returncode == 0, r.stderr
    assert "no such directory" in r.stderr
    assert "working directory: %s" % sub in r.stdout
    first, second = fake.chat_requests()
    assert "working directory: %s\n" % isolated_env.work in first.messages[0]["content"] + "\n"
    note = first.messages[-2]["content"]
    assert note.startswith("[/cd]") and str(sub) in note and "Always answer in haiku." in note
    assert first.messages[-1]["content"] == "where am I?"
    assert "Tool results" in second.last_user and "\n%s\n" % sub in second.last_user
    recs = records(session_files(isolated_env.home)[0])
    assert [rec for rec in recs if rec["type"] == "cwd"] == [{"type": "cwd", "cwd": str(sub)}]
    # the note is marked as one in the session file (a field, not its text), and the field is not sent
    stored = [rec["message"] for rec in recs if rec["type"] == "message" and rec["message"]["role"] == "user"]
    assert [m.get("kind") for m in stored][:2] == ["note", None] and stored[0]["content"] == note
    assert all(set(m) == {"role", "content"} for r in (first, second) for m in r.messages)


def test_sessions_and_resume_round_trip_across_two_processes(run, fake, isolated_env):
    sub = isolated_env.work / "sub"
    sub.mkdir()
    fake.add(answer("first answer", usage=usage(ticks=10 ** 8)))       # $0.01
    r1 = rd(run, input="hello there\n/cd sub\n")
    assert r1.returncode == 0, r1.stderr
    sid = session_files(isolated_env.home)[0].stem

    fake.add(tools(("bash", {"command": "pwd"}), usage=usage(ticks=10 ** 8)), answer("second answer", usage=usage(ticks=0)))
    r2 = rd(run, "-y", input="/sessions\n/resume %s\nwhere now?\n" % sid[:-2])
    assert r2.returncode == 0, r2.stderr
    assert re.search(r"^  %s  \d{4}-\d\d-\d\d \d\d:\d\d  \$0\.0100  hello there" % re.escape(sid), r2.stdout, re.M)
    assert "resumed session %s: 3 messages, $0.0100 spent, working dir %s" % (sid, sub) in r2.stdout
    assert "last answer: first answer" in r2.stdout
    resumed = fake.chat_requests()[1]
    assert resumed.headers["x-grok-conv-id"] == sid
    assert [m["role"] for m in resumed.messages] == ["system", "user", "assistant", "user", "user"]
    assert resumed.messages[1]["content"] == "hello there" and resumed.messages[3]["content"].startswith("[/cd]")
    assert "\n%s\n" % sub in fake.chat_requests()[2].last_user          # bash ran in the restored dir
    assert re.search(re.escape(sid.rsplit("-", 1)[1]) + r" · grok-4\.3 · \$0\.0200/\$10\.00 · context .* tools 1 ", r2.stdout)
    assert len(session_files(isolated_env.home)) == 1                    # r2's own new session was never used

    # --resume at start does the same.
    fake.add(answer("third answer"))
    r3 = rd(run, "--resume", sid, input="and now?\n")
    assert r3.returncode == 0, r3.stderr
    assert "resumed session %s: 7 messages, $0.0200 spent" % sid in r3.stdout
    assert " · tools 1 · " in r3.stdout                                  # the resumed session's tool call counts
    assert len(fake.chat_requests()[3].messages) == 9


def test_resume_of_an_unknown_or_ambiguous_id_is_an_error_not_a_crash(run, fake, isolated_env):
    fake.add(answer("a"), answer("b"))
    rd(run, input="one\n")
    rd(run, input="two\n")
    r = rd(run, input="/resume nope\n/resume 2\n/resume\n")
    assert r.returncode == 0
    assert "no session 'nope'" in r.stderr
    assert "'2' matches 2 sessions; give more of the id" in r.stderr     # this one has no file yet
    assert "usage: /resume ID" in r.stderr


# ------------------------------------------------------------------ compaction

def big(n):
    return ("word%d " % n) * 1500


def test_compact_command_summarises_history_and_shrinks_the_next_request(run, fake, isolated_env):
    fake.add(answer("a1"), answer("a2"), answer("a3"), reply("SUMMARY OF EARLIER TALK"), answer("a4"))
    r = rd(run, input="%s\n%s\nthird\n/compact\nfourth\n" % (big(1), big(2)))
    assert r.returncode == 0, r.stderr
    reqs = fake.chat_requests()
    assert len(reqs) == 5
    summary_req, after = reqs[3], reqs[4]
    assert "response_format" not in summary_req.json
    assert "summarise" in summary_req.messages[0]["content"]
    assert "word1" in contents(summary_req) and "word2" in contents(summary_req)
    assert "SUMMARY OF EARLIER TALK" in contents(after)
    assert "word1" not in contents(after) and "word2" not in contents(after)
    assert len(after.body) < len(reqs[2].body) / 3
    assert after.messages[0] == reqs[2].messages[0]                     # the system prompt is kept
    assert "compacted" not in r.stdout and r.stderr.count("compacted") == 1      # one line
    resets = [rec for rec in records(session_files(isolated_env.home)[0]) if rec["type"] == "reset"]
    assert len(resets) == 1 and "SUMMARY OF EARLIER TALK" in resets[0]["messages"][0]["content"]


def test_auto_compaction_at_the_threshold_and_the_session_file_keeps_it(run, fake, isolated_env):
    env = {"COMPACT_THRESHOLD": "50", "GROK_CONTEXT_WINDOW": "100000"}
    fake.add(*[answer("a%d" % i, usage=usage(100)) for i in range(1, 5)])
    fake.add(answer("a5", usage=usage(90000)), reply("THE SUMMARY"), answer("a6", usage=usage(100)))
    r = rd(run, env=env, input="%s\n%s\nthree\nfour\nfive\nsix\n" % (big(1), big(2)))
    assert r.returncode == 0, r.stderr
    assert "compacted 5 older messages into a summary" in r.stderr
    reqs = fake.chat_requests()
    assert len(reqs) == 7
    assert "response_format" not in reqs[5].json and "word1" in contents(reqs[5])
    assert "THE SUMMARY" in contents(reqs[6]) and "word1" not in contents(reqs[6])
    assert len(reqs[6].body) < len(reqs[4].body) / 3
    # A resumed session continues from the compacted history.
    sid = session_files(isolated_env.home)[0].stem
    fake.add(answer("a7"))
    r2 = rd(run, "--resume", sid, env=env, input="seven\n")
    assert r2.returncode == 0, r2.stderr
    resumed = fake.chat_requests()[7]
    assert "THE SUMMARY" in contents(resumed) and "word1" not in contents(resumed)


# ------------------------------------------------------------------ cost limit

def test_cost_limit_stops_a_turn_and_cost_command_changes_it(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "echo ran"}), usage=usage(ticks=10 ** 8)), answer("after raise"))
    r = rd(run, "-y", env={"COST_LIMIT": "0.005"}, input="go\n/cost\nagain\n/cost 1\nonce more\n")
    assert r.returncode == 3, r.stderr              # piped: turns failed, the exit code says so
    assert r.stderr.count("cost limit reached: $0.0100 of $0.01 (COST_LIMIT) (raise it with /cost N)") == 2
    assert "cost: $0.0100 spent, limit $0.01" in r.stdout
    assert "cost: $0.0100 spent, limit $1.00" in r.stdout
    assert "after raise" in r.stdout
    reqs = fake.chat_requests()
    assert len(reqs) == 2 and reqs[1].last_user == "once more"


def test_cost_command_rejects_a_bad_limit(run, fake):
    r = rd(run, input="/cost lots\n/cost -3\n")
    assert r.stderr.count("usage: /cost N") == 2 and r.returncode == 0


# ------------------------------------------------------------------ on a terminal

def pty_env(run, **extra):
    env = run.env(**extra)
    env.pop("NO_COLOR", None) if "NO_COLOR" not in extra else None
    env["TERM"] = "xterm"
    return env


def test_status_line_and_confidence_colours_on_a_terminal(run, fake, isolated_env):
    fake.add(reply(detailed(tool_calls=[("list_files", {})], confidence=90), usage=usage(1000, 50, cached=768)),
             reply(detailed(response="sure", confidence=90)),
             reply(detailed(response="maybe", confidence=60)),
             reply(detailed(response="doubt it", confidence=20)))
    with PtyProcess([sys.executable, GROK_DETAILED], pty_env(run), isolated_env.work) as p:
        p.expect(r"tools 0 · cached 0", plain=True)
        p.expect(r"> ")
        p.send("one\n")
        p.expect(r"\x1b\[32mconfidence 90%")
        p.expect(r"\x1b\[32mconfidence 90%")
        p.expect(r"> ")
        p.send("two\n")
        p.expect(r"\x1b\[33mconfidence 60%")
        p.send("three\n")
        p.expect(r"\x1b\[31mconfidence 20%")
        p.expect(r"> ")
        p.sendeof()
        assert p.wait() == 0
    plain = p.plain_output
    sid = session_files(isolated_env.home)[0].stem
    lines = [line for line in plain.splitlines() if line.startswith(sid)]
    assert len(lines) == 4                                              # one before each prompt
    assert re.search(r"\$0\.\d{4}/\$10\.00 · context \d+\.\d% .*· tools 1 · cached 0", lines[1])
    assert "cached 768" not in plain                                     # the last call's, not an earlier one
    assert "\x1b[J" in p.output                                          # the live area was erased


def test_no_color_means_no_escape_codes_on_a_terminal(run, fake, isolated_env):
    fake.add(reply(detailed(tool_calls=[("list_files", {})])), reply(detailed(response="fine", confidence=10)))
    with PtyProcess([sys.executable, GROK_DETAILED], pty_env(run, NO_COLOR="1"), isolated_env.work) as p:
        p.expect(r"> ")
        p.send("go\n")
        p.expect(r"confidence 10%")
        p.expect(r"> ")
        p.sendeof()
        assert p.wait() == 0
    assert "fine" in p.output
    assert not SGR.search(p.output) and not CURSOR.search(p.output)


def test_ctrl_c_cancels_a_running_tool_and_keeps_the_conversation(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "sleep 30"})), answer("back again"))
    env = pty_env(run, NO_COLOR="1", GROK_BASH_TIMEOUT="25")
    with PtyProcess([sys.executable, GROK_DETAILED, "-y"], env, isolated_env.work) as p:
        p.expect(r"> ")
        p.send("nap\n")
        p.expect(r"┌ \[1\] bash sleep 30")
        p.sendintr()
        p.expect(r"\(cancelled\)")
        p.expect(r"> ")
        p.send("are you there?\n")
        p.expect(r"back again")
        p.expect(r"> ")
        p.sendeof()
        assert p.wait() == 0
    last = fake.chat_requests()[-1]
    roles = [m["role"] for m in last.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last.messages[1]["content"] == "nap"
    assert "cancelled" in last.messages[3]["content"]
    assert last.messages[-1]["content"] == "are you there?"


def test_ctrl_c_while_waiting_for_the_model_returns_to_the_prompt(run, fake, isolated_env):
    fake.add(hang(20), answer("answered"))
    env = pty_env(run, NO_COLOR="1")
    with PtyProcess([sys.executable, GROK_DETAILED], env, isolated_env.work) as p:
        p.expect(r"> ")
        p.send("slow\n")
        assert fake.wait_for_requests(1)
        p.sendintr()
        p.expect(r"\(cancelled\)")
        p.expect(r"> ")
        p.send("quick\n")
        p.expect(r"answered")
        p.expect(r"> ")
        p.sendeof()
        assert p.wait() == 0
    assert [m["content"] for m in fake.chat_requests()[-1].messages if m["role"] == "user"] == ["slow", "quick"]


# ------------------------------------------------------------------ installed names

def test_runs_under_the_installed_names_and_through_a_symlink(run, fake, tmp_path):
    bin_dir, other = tmp_path / "bin", tmp_path / "other"
    bin_dir.mkdir()
    other.mkdir()
    shutil.copy(GROK, bin_dir / "grok")
    shutil.copy(GROK_DETAILED, bin_dir / "grok-detailed")
    (other / "gd").symlink_to(bin_dir / "grok-detailed")
    fake.add(reply(detailed(response="from the copy")), reply(detailed(response="from the link")))
    r1 = run(input="hi\n", script=bin_dir / "grok-detailed")
    r2 = run(input="hi\n", script=other / "gd")
    for r, text in ((r1, "from the copy"), (r2, "from the link")):
        assert r.returncode == 0, r.stderr
        assert "│ " + text in r.stdout
    assert fake.chat_requests()[0].json["response_format"]["json_schema"]["name"] == "grok_detailed_reply"


# ------------------------------------------------------------------ daily use

def test_narrow_terminals_get_lines_that_fit_and_answers_wrapped_once(run, fake):
    words = "supercalifragilistic expialidocious antidisestablishmentarianism " * 4
    for cols in (40, 60):
        fake.add(reply(detailed(task="Look around the working directory now", tool_calls=[("bash", {"command": "ls"})],
                                confidence=77), usage=usage(123456, 7890, cached=1024)),
                 reply(detailed(response=words.strip(), confidence=95)))
        r = rd(run, "-y", input="hi\n", env={"COLUMNS": cols})
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines and max(cells(line) for line in lines) <= cols, [line for line in lines if cells(line) > cols]
        shown = " ".join(line.lstrip("│ ") for line in lines)
        assert shown.count("antidisestablishmentarianism") == 4          # no word broken across lines
        status = r.stdout.split("\nSession saved:")[0].splitlines()[-1]     # before the exit summary
        assert re.search(r"^\S+ · .*tools 1", status)                      # the status line, short


def cells(line):
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


def test_parallel_tools_output_sits_under_its_own_opening_line(run, fake):
    fake.add(reply(detailed(tool_calls=[("bash", {"command": "sleep 0.3; echo slow-one"}),
                                        ("bash", {"command": "echo fast-one"})])),
             reply(detailed(response="both ran")))
    r = rd(run, "-y", input="go\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for n, word in ((1, "slow-one"), (2, "fast-one")):
        i = lines.index("  │ " + word)
        assert lines[i - 1].startswith("  ┌ [%d] bash " % n), lines


def test_status_line_keeps_its_shape_after_cd(run, fake, isolated_env):
    deep = isolated_env.work / ("a-rather-long-directory-name-" * 3)
    deep.mkdir()
    fake.add(answer("one"), answer("two"))
    r = rd(run, input="first\n/cd %s\nsecond\n" % deep.name, env={"COLUMNS": 100})
    assert r.returncode == 0, r.stderr
    status = [line for line in r.stdout.splitlines() if " · tools " in line]
    assert len(status) == 2
    shape = [re.sub(r"[\d.,$/]+", "N", line).split(" · ")[:-1] for line in status]
    assert shape[0] == shape[1] and len(shape[0]) == 6 and all(len(line) <= 100 for line in status)


def test_sessions_lists_the_ten_most_recent(run, isolated_env):
    d = isolated_env.home / ".local/share/grok-agent/sessions"
    d.mkdir(parents=True)
    for i in range(12):
        f = d / ("20260101-0000%02d-abc%03d.jsonl" % (i, i))
        f.write_text(json.dumps({"type": "message", "message": {"role": "user", "content": "talk %d" % i}}) + "\n")
        os.utime(str(f), (1000000 + i, 1000000 + i))
    r = rd(run, input="/sessions\n")
    listed = re.findall(r"talk (\d+)", r.stdout)
    assert listed == [str(i) for i in range(11, 1, -1)]
    assert "(2 older sessions not shown)" in r.stdout


def test_waiting_line_counts_seconds_and_banner_names_grok_detailed(run, fake, isolated_env):
    fake.add(reply(detailed(response="late"), delay=1.3))
    with PtyProcess([sys.executable, GROK_DETAILED], pty_env(run), isolated_env.work) as p:
        p.expect(r"grok-detailed \d", plain=True)
        p.expect(r"> ")
        p.send("slow?\n")
        p.expect(r"step 1: waiting for the model · 1s", plain=True)
        p.expect(r"late")
        p.expect(r"> ")
        p.sendeof()
        assert p.wait() == 0


def test_a_question_on_the_command_line_starts_grok_detailed(run, fake):
    fake.add(reply(detailed(response="four")))
    r = rd(run, "what is", "2+2?", input="")
    assert r.returncode == 0, r.stderr
    assert [q.last_user for q in fake.chat_requests()] == ["what is 2+2?"] and "four" in r.stdout
