"""The interactive `grok` REPL: on a real terminal (PtyProcess) and with piped stdin."""
import json
import re
import subprocess
import sys
import time

import pytest

from conftest import GROK, TEST_KEY
from fakeapi import answer, error, tools
from ptyrun import PROMPT, PtyProcess


@pytest.fixture
def term(run, tmp_path):
    """term(*args, env=None) -> a started PtyProcess running grok with the fake's environment;
    GROK_DATA_DIR is tmp/data and TERM a plain xterm."""
    started = []

    def start(*args, env=None, cwd=None):
        overrides = {"GROK_DATA_DIR": tmp_path / "data", "TERM": "xterm"}
        overrides.update(env or {})
        p = PtyProcess([sys.executable, str(GROK)] + list(args), run.env(**overrides),
                       cwd or tmp_path / "work")
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


def piped(run, text, *args, env=None, timeout=30):
    """grok with `text` on a pipe as stdin and no controlling terminal (as under cron or CI)."""
    return subprocess.run([sys.executable, str(GROK)] + [str(a) for a in args], input=text,
                          env=run.env(**(env or {})), capture_output=True, text=True, errors="replace",
                          timeout=timeout, start_new_session=True)


# ------------------------------------------------------------------ terminal

def test_prompt_tool_line_in_gray_then_the_answer(term, fake):
    fake.add(tools(("bash", {"command": "ls -la"})), answer("Three files."))
    p = term("-y", env={"NO_COLOR": None})
    p.expect(r"/help for commands")
    p.expect(PROMPT)
    p.send("what is here?\n")
    p.expect(r"Three files\.")
    p.expect(PROMPT)
    out = p.output
    gray = "\x1b[90m[bash] ls -la\x1b[0m"
    assert gray in out
    assert out.index("what is here?") < out.index(gray) < out.index("Three files.")
    # the layout: the tool line, a blank line, the answer, a blank line, the prompt
    shown = re.sub(r"\r\.\.\.( \d+s)?\r", "", p.plain_output).replace("\r\n", "\n")  # the erased waiting line
    assert "[bash] ls -la\n\nThree files.\n\n> " in shown
    p.sendeof()
    assert p.wait() == 0
    assert fake.chat_requests()[0].last_user == "what is here?"


def test_no_color_means_no_escape_codes_in_the_tool_line(term, fake):
    fake.add(tools(("bash", {"command": "true"})), answer("ok"))
    p = term("-y", env={"NO_COLOR": "1"})
    p.expect(r"> ")
    p.send("go\n")
    p.expect(r"\[bash\] true\r\n")
    p.expect(r"ok")
    p.expect(r"> ")
    assert "\x1b[90m" not in p.output
    p.sendeof()
    assert p.wait() == 0


def test_help_clear_and_exit(term, fake):
    fake.add(answer("first answer"), answer("second answer"))
    p = term()
    p.expect(r"> ")
    p.send("/help\n")
    for cmd in ("/clear", "/help", "/exit"):
        p.expect(cmd)
    p.expect(r"> ")
    p.send("remember the number 7\n")
    p.expect(r"first answer")
    p.expect(r"> ")
    p.send("/clear\n")
    p.expect(r"conversation cleared")
    p.expect(r"> ")
    p.send("what was the number?\n")
    p.expect(r"second answer")
    p.expect(r"> ")
    p.send("/exit\n")
    assert p.wait() == 0
    first, second = fake.chat_requests()
    assert [m["role"] for m in second.messages] == ["system", "user"]
    assert second.messages[0] == first.messages[0]
    assert second.last_user == "what was the number?"
    assert "remember" not in json.dumps(second.json)


def test_unknown_command_is_not_sent_to_the_model(term, fake):
    p = term()
    p.expect(r"> ")
    p.send("/frobnicate\n")
    p.expect(r"unknown command /frobnicate")
    p.expect(r"> ")
    p.sendeof()
    assert p.wait() == 0
    assert fake.requests == []


def test_ctrl_d_exits_cleanly(term):
    p = term()
    p.expect(r"> ")
    p.sendeof()
    assert p.wait() == 0
    assert "Traceback" not in p.output


def test_ctrl_c_at_the_prompt_gives_a_new_prompt(term, fake):
    fake.add(answer("still here"))
    p = term()
    p.expect(r"> ")
    p.send("half a thought")
    p.expect(r"thought")
    # CPython's readline notices SIGINT only while it waits in select(); let it get there.
    time.sleep(0.2)
    p.sendintr()
    p.expect(PROMPT)
    p.send("hello\n")
    p.expect(r"still here")
    p.expect(PROMPT)
    assert p.isalive()
    p.sendeof()
    assert p.wait() == 0
    assert [q.last_user for q in fake.chat_requests()] == ["hello"]
    assert "Traceback" not in p.output


def test_history_is_persisted_across_runs(term, fake, tmp_path):
    fake.add(answer("one"), answer("two"))
    p = term()
    p.expect(r"> ")
    p.send("the first question\n")
    p.expect(r"one")
    p.expect(r"> ")
    p.sendeof()
    assert p.wait() == 0
    history = tmp_path / "data" / "history"
    assert "the first question" in history.read_text()
    assert oct(history.stat().st_mode & 0o777) == oct(0o600)

    p = term()
    p.expect(r"> ")
    p.send("\x1b[A")            # Up: recall the last line of the previous run
    p.expect(r"the first question")
    p.send("\n")
    p.expect(r"two")
    p.expect(r"> ")
    p.sendeof()
    assert p.wait() == 0
    assert [q.last_user for q in fake.chat_requests()] == ["the first question"] * 2


def test_line_editing_works(term, fake):
    fake.add(answer("ok"))
    p = term()
    p.expect(r"> ")
    p.send("helo\x1b[Dl\x01say \n")     # Left, insert "l", Ctrl-A, insert "say "
    p.expect(r"ok")
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    assert fake.chat_requests()[0].last_user == "say hello"


# ----------------------------------------------------------------- approvals

APPROVE = r"run it\? \[y\]es / \[N\]o / \[a\]lways: "


def test_approval_yes_runs_the_command(term, fake, tmp_path):
    fake.add(tools(("bash", {"command": "echo ran > ran.txt"})), answer("done it"))
    p = term()
    p.expect(r"> ")
    p.send("make the file\n")
    p.expect(r"bash\s+echo ran > ran.txt")
    p.expect(APPROVE)
    assert fake.pending() == 1          # nothing runs before the answer
    assert not (tmp_path / "work" / "ran.txt").exists()
    p.send("y\n")
    p.expect(r"done it")
    p.expect(r"> ")
    p.sendeof()
    assert p.wait() == 0
    assert (tmp_path / "work" / "ran.txt").read_text() == "ran\n"
    assert "[1] bash echo ran > ran.txt\n(no output)" in fake.chat_requests()[1].last_user


def test_approval_no_denies_and_tells_the_model(term, fake, tmp_path):
    fake.add(tools(("bash", {"command": "echo ran > ran.txt"}),
                   ("write_file", {"path": "w.txt", "content": "abc"})),
             answer("understood"))
    p = term()
    p.expect(r"> ")
    p.send("make the files\n")
    p.expect(APPROVE)
    p.send("n\n")
    p.expect(r"write_file .*/w\.txt\s+\(3\s+bytes,\s+a\s+new\s+file\)")     # wrapped at any space
    p.expect(APPROVE)
    p.send("no\n")
    p.expect(r"understood")
    p.expect(r"> ")
    p.sendeof()
    assert p.wait() == 0
    assert not (tmp_path / "work" / "ran.txt").exists()
    assert not (tmp_path / "work" / "w.txt").exists()
    results = fake.chat_requests()[1].last_user
    assert results.count("\ndenied: the user did not allow this") == 2  # result bodies, not the self-correction note


def test_approval_always_stops_asking_for_the_rest_of_the_session(term, fake, tmp_path):
    fake.add(tools(("bash", {"command": "echo 1 >> log.txt"})),
             tools(("bash", {"command": "echo 2 >> log.txt"})), answer("turn one"),
             tools(("bash", {"command": "echo 3 >> log.txt"})), answer("turn two"))
    p = term()
    p.expect(r"> ")
    p.send("go\n")
    p.expect(APPROVE)
    p.send("a\n")
    p.expect(r"turn one")
    p.expect(r"> ")
    p.send("again\n")
    p.expect(r"turn two")
    p.expect(r"> ")
    p.sendeof()
    assert p.wait() == 0
    assert len([1 for line in p.plain_output.splitlines() if "run it?" in line]) == 1
    assert (tmp_path / "work" / "log.txt").read_text() == "1\n2\n3\n"


def test_a_call_without_command_is_not_put_to_the_user(term, fake, tmp_path):
    fake.add(tools(("bash", {"cmd": "ls"}), ("write_file", {"path": "w.txt", "content": "h\u00e9llo"})),
             answer("fixed my call"))
    p = term()
    p.expect(r"> ")
    p.send("go\n")
    p.expect(r"write_file .*/w\.txt\s+\(6\s+bytes,\s+a\s+new\s+file\)")     # bytes, not characters
    p.expect(APPROVE)
    p.send("y\n")
    p.expect(r"fixed my call")
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    assert p.plain_output.count("run it?") == 1        # only the write was asked about
    results = fake.chat_requests()[1].last_user
    assert "bash needs a non-empty string 'command' argument" in results
    assert (tmp_path / "work" / "w.txt").read_text(encoding="utf-8") == "h\u00e9llo"


def test_ctrl_c_at_the_approval_question_cancels_the_turn_only(term, fake, tmp_path):
    fake.add(tools(("bash", {"command": "echo ran > ran.txt"})), answer("next answer"))
    p = term()
    p.expect(r"> ")
    p.send("go\n")
    p.expect(APPROVE)
    time.sleep(0.2)
    p.sendintr()
    p.expect(r"\^C\r\n\(cancelled\)", plain=True)
    p.expect(PROMPT)
    p.send("next\n")
    p.expect(r"next answer")
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    assert not (tmp_path / "work" / "ran.txt").exists()
    assert fake.chat_requests()[1].last_user == "next"


def test_always_approve_flag_never_asks(term, fake, tmp_path):
    fake.add(tools(("write_file", {"path": "x.txt", "content": "hi"})), answer("written"))
    p = term("--always-approve")
    p.expect(r"> ")
    p.send("write\n")
    p.expect(r"written")
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    assert "run it?" not in p.output
    assert (tmp_path / "work" / "x.txt").read_text() == "hi"


def test_network_failure_does_not_end_the_repl(term, fake):
    fake.add(error(401, {"code": "Unauthorized", "error": "Incorrect API key provided: " + TEST_KEY}),
             answer("back again"))
    p = term()
    p.expect(r"> ")
    p.send("first\n")
    p.expect(r"API key was rejected")
    p.expect(r"> ")
    p.send("second\n")
    p.expect(r"back again")
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    assert TEST_KEY not in p.output


# --------------------------------------------------------------- piped stdin

def test_piped_stdin_answers_every_line_and_exits_0_at_eof(run, fake):
    fake.add(answer("Paris."), answer("About 2.1 million."))
    r = piped(run, "capital of france?\n\nits population?\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Paris.", "About", "2.1", "million."]
    assert "> " not in r.stdout            # no prompt or banner without a terminal
    first, second = fake.chat_requests()
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "user"]
    assert second.messages[1]["content"] == "capital of france?"
    assert second.last_user == "its population?"


def test_piped_stdin_without_trailing_newline_and_empty_input(run, fake):
    fake.add(answer("yes"))
    r = piped(run, "last line without newline")
    assert r.returncode == 0 and r.stdout.strip() == "yes"
    assert fake.chat_requests()[0].last_user == "last line without newline"
    r = piped(run, "")
    assert r.returncode == 0 and r.stdout == ""
    assert len(fake.chat_requests()) == 1


def test_bash_does_not_consume_the_repl_input(run, fake):
    fake.add(tools(("bash", {"command": "cat; echo cat-done"})), answer("first"), answer("second"))
    r = piped(run, "run cat\nthe second line\n", "-y")
    assert r.returncode == 0, r.stderr
    reqs = fake.chat_requests()
    assert len(reqs) == 3
    assert "cat-done" in reqs[1].last_user and "the second line" not in reqs[1].last_user
    assert reqs[2].last_user == "the second line"


def test_approval_without_a_terminal_is_a_denial_the_model_is_told(run, fake, tmp_path):
    fake.add(tools(("bash", {"command": "echo ran > ran.txt"})), answer("I could not run it."))
    r = piped(run, "make the file\n")
    assert r.returncode == 0, r.stderr
    assert "I could not run it." in r.stdout
    assert "no terminal to ask for approval" in r.stderr and "--always-approve" in r.stderr
    assert not (tmp_path / "work" / "ran.txt").exists()
    assert "denied" in fake.chat_requests()[1].last_user


def test_an_api_error_ends_the_turn_not_the_repl(run, fake):
    fake.add(error(400, {"code": "bad", "error": "context too long"}), answer("recovered"))
    r = piped(run, "first\nsecond\n")
    assert r.returncode == 1            # the REPL went on, and the exit code says a turn failed
    assert "HTTP 400" in r.stderr and "context too long" in r.stderr
    assert r.stdout.strip() == "recovered"


def test_format_fallback_sticks_for_the_next_turn(run, fake):
    fake.add(error(400, {"code": "bad", "error": "response_format json_schema not supported"}),
             answer("a"), answer("b"))
    r = piped(run, "one\ntwo\n")
    assert r.returncode == 0, r.stderr
    types = [q.json["response_format"]["type"] for q in fake.chat_requests()]
    assert types == ["json_schema", "json_object", "json_object"]
    assert "schema" in fake.chat_requests()[2].json["response_format"]


def test_slash_commands_work_when_piped(run, fake):
    fake.add(answer("a"), answer("b"))
    r = piped(run, "/help\nq1\n/clear\nq2\n/exit\nnever sent\n")
    assert r.returncode == 0
    assert "/clear" in r.stdout and "conversation cleared" in r.stdout
    reqs = fake.chat_requests()
    assert len(reqs) == 2 and [m["role"] for m in reqs[1].messages] == ["system", "user"]


def test_session_is_written_as_the_conversation_goes(run, fake, tmp_path):
    data = tmp_path / "data"
    fake.add(answer("first reply"))
    proc = subprocess.Popen([sys.executable, str(GROK)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=run.env(GROK_DATA_DIR=data), start_new_session=True)
    try:
        proc.stdin.write(b"hello there\n")
        proc.stdin.flush()
        assert fake.wait_for_requests(1)
        deadline = time.monotonic() + 10
        records = []
        while time.monotonic() < deadline:
            files = list((data / "sessions").glob("*.jsonl")) if (data / "sessions").is_dir() else []
            if files:
                records = [json.loads(x) for x in files[0].read_text().splitlines() if x.endswith("}")]
                kinds = [r.get("type") for r in records]
                if "usage" in kinds and kinds.count("message") >= 2:     # either may be written first
                    break
            time.sleep(0.05)
        assert proc.poll() is None          # still running: written during the session
        assert [r["type"] for r in records[:2]] == ["session", "message"]
        assert sorted(r["type"] for r in records[2:]) == ["message", "usage"]
        messages = [r["message"] for r in records if r["type"] == "message"]
        assert messages[0] == {"role": "user", "content": "hello there"}
        assert json.loads(messages[1]["content"])["response"] == "first reply"
    finally:
        out, err = proc.communicate(b"", timeout=20)
    assert proc.returncode == 0, err
    assert b"first reply" in out


def test_undecodable_input_bytes_do_not_crash_the_repl(run, fake):
    fake.add(answer("got it"), answer("again"))
    r = subprocess.run([sys.executable, str(GROK)], input=b"caf\xe9 latin-1\nsecond\n",
                       env=run.env(), capture_output=True, timeout=30, start_new_session=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [b"got", b"it", b"again"]
    assert [q.last_user for q in fake.chat_requests()] == ["caf\ufffd latin-1", "second"]


def test_network_failure_ends_the_turn_not_the_repl(run, fake):
    import socket
    with socket.socket() as s:          # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = piped(run, "one\ntwo\n", env={"GROK_BASE_URL": "http://127.0.0.1:%d/v1" % port,
                                      "GROK_MAX_RETRIES": "1"})
    assert r.returncode == 2
    assert r.stderr.count("connection refused") >= 2     # both turns tried, each failed
    assert "Traceback" not in r.stderr


def test_ask_user_numbered_options_on_the_terminal(term, fake):
    fake.add(tools(("ask_user", {"question": "Which colour?", "options": ["red", "green", "blue"]})),
             tools(("ask_user", {"question": "Any name?", "options": ["Ann", "Bob"]})),
             answer("noted"))
    p = term()
    p.expect(r"> ")
    p.send("pick\n")
    p.expect(r"Which colour\?")
    p.expect(r"1\) red\s+2\) green\s+3\) blue\s+answer \(number or text\): ")
    p.send("2\n")
    p.expect(r"Any name\?")
    p.expect(r"answer \(number or text\): ")
    p.send("Carol\n")
    p.expect(r"noted")
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    reqs = fake.chat_requests()
    assert "the user answered: green" in reqs[1].last_user
    assert "the user answered: Carol" in reqs[2].last_user


def test_ask_user_without_a_terminal_says_nobody_can_answer(run, fake):
    fake.add(tools(("ask_user", {"question": "Which?", "options": ["a", "b"]})), answer("I chose a"))
    r = piped(run, "choose\n")
    assert r.returncode == 0, r.stderr
    assert "no user available" in fake.chat_requests()[1].last_user
