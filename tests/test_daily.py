"""Daily use of quick grok: pastes and continued lines, the waiting indicator, piped text with
-p, `grok "question"`, /model, resuming by a piece of the id, failed tools, a cancelled answer."""
import json
import time

import pytest

from conftest import GROK, GROK_DETAILED
from fakeapi import answer, tools
from ptyrun import PROMPT
from test_repl import piped, term  # noqa: F401  (term is a fixture)


def sessions(tmp_path):
    d = tmp_path / "data" / "sessions"
    return sorted(d.glob("*.jsonl")) if d.exists() else []


def answered_then_quit(p, answer_pattern):
    """The answer shows, then the prompt; Ctrl-D ends the chat with exit code 0."""
    p.expect(answer_pattern)
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0


def test_a_paste_of_several_lines_is_one_message_with_its_indentation(term, fake):
    fake.add(answer("one answer"))
    p = term()
    p.expect(PROMPT)
    p.send("why this?\nTraceback (most recent call last):\n  File \"x.py\", line 1\n    boom()\n")
    answered_then_quit(p, r"one answer")
    [req] = fake.chat_requests()
    assert req.last_user == 'why this?\nTraceback (most recent call last):\n  File "x.py", line 1\n    boom()'


def test_a_bracketed_paste_is_one_message_however_slowly_it_arrives(term, fake):
    # The terminal is asked to bracket pastes; then a paste that arrives in slow pieces is still one message.
    fake.add(answer("one answer"))
    p = term()
    p.expect(PROMPT)
    assert "\x1b[?2004h" in p.output
    p.send("\x1b[200~first line\n  second")
    time.sleep(0.2)             # far slower than lines typed together: only the brackets keep them one message
    p.send(" half\nthird line\x1b[201~")
    time.sleep(0.1)
    p.send("\r")
    answered_then_quit(p, r"one answer")
    assert [q.last_user for q in fake.chat_requests()] == ["first line\n  second half\nthird line"]


def test_a_trailing_backslash_continues_the_message(term, fake):
    fake.add(answer("joined"))
    p = term()
    p.expect(PROMPT)
    p.send("first line \\\n")
    p.expect(r"\.\.\. ")
    time.sleep(0.1)
    p.send("  second line\n")
    answered_then_quit(p, r"joined")
    assert [q.last_user for q in fake.chat_requests()] == ["first line \n  second line"]
    assert "\\" not in fake.chat_requests()[0].last_user


def test_help_says_how_to_write_several_lines(run):
    r = piped(run, "/help\n")
    assert "End a line with \\ to go on" in r.stdout and "pasted together are one message" in r.stdout


def test_quick_grok_shows_it_is_waiting_on_a_terminal_only(term, run, fake):
    fake.add(answer("late answer", delay=1.3))
    p = term()
    p.expect(PROMPT)
    p.send("slow?\n")
    p.expect(r"\r\.\.\. 1s", plain=True)
    p.expect(r"\r\x1b\[K\r?\n")                  # the waiting line is erased ...
    p.expect(r"late answer", plain=True)        # ... before the answer
    p.expect(PROMPT)
    p.sendeof()
    assert p.wait() == 0
    fake.add(answer("piped answer"))
    r = piped(run, "hi\n")
    assert r.stdout == "\npiped answer\n\n" and "..." not in r.stderr


def test_piped_text_is_added_to_the_prompt(run, fake):
    fake.add(answer("summary"))
    r = run("-p", "summarise this", input="line one\nline two\n")
    assert r.returncode == 0, r.stderr
    assert fake.chat_requests()[0].last_user == "summarise this\n\nline one\nline two\n"
    assert "cut" not in r.stderr


def test_long_piped_text_is_cut_with_a_notice(run, fake):
    fake.add(answer("summary"))
    r = run("-p", "summarise", input="x" * 150000)
    assert r.returncode == 0, r.stderr
    assert fake.chat_requests()[0].last_user == "summarise\n\n" + "x" * 100000
    assert "the piped input was cut to its first 100000 bytes" in r.stderr


def test_dash_p_dash_still_reads_the_prompt_from_stdin(run, fake):
    fake.add(answer("ok"))
    r = run("-p", "-", input="the whole prompt\n")
    assert r.returncode == 0 and fake.chat_requests()[0].last_user == "the whole prompt\n"


def test_a_question_on_the_command_line_starts_the_chat(run, fake, tmp_path):
    fake.add(answer("It is 4."), answer("And 6."))
    r = piped(run, "and 3+3?\n", "what", "is 2+2?", env={"GROK_DATA_DIR": tmp_path / "data"})
    assert r.returncode == 0, r.stderr
    assert [q.last_user for q in fake.chat_requests()] == ["what is 2+2?", "and 3+3?"]
    assert r.stdout.split() == ["It", "is", "4.", "And", "6."]


def test_format_json_without_p_is_an_error(run):
    r = run("--format", "json")
    assert r.returncode == 1 and "--format json needs -p" in r.stderr


@pytest.mark.parametrize("script", [GROK, GROK_DETAILED])
def test_resume_and_continue_together_are_an_error_in_both_scripts(run, fake, script):
    r = run("--resume", "abc", "-c", script=script)
    assert r.returncode == 1 and "argument -c/--continue: not allowed with argument -r/--resume" in r.stderr
    assert fake.chat_requests() == []


def test_model_command_switches_the_model_for_the_next_request(run, fake):
    fake.add(answer("a"), answer("b"))
    r = piped(run, "one\n/model\n/model grok-4.20\ntwo\n")
    assert r.returncode == 0, r.stderr
    assert "model: grok-4.3 (known: " in r.stdout and "model: grok-4.20 (known: " in r.stdout
    assert [q.json["model"] for q in fake.chat_requests()] == ["grok-4.3", "grok-4.20"]


def test_resume_takes_the_random_suffix_and_continue_names_the_session(run, fake, tmp_path):
    env = {"GROK_DATA_DIR": tmp_path / "data"}
    fake.add(answer("first"), answer("second"), answer("third"))
    assert piped(run, "remember 7\n", env=env).returncode == 0
    [path] = sessions(tmp_path)
    sid = path.name[:-len(".jsonl")]
    r = piped(run, "what number?\n", "--resume", sid.rsplit("-", 1)[1], env=env)
    assert r.returncode == 0, r.stderr
    assert fake.chat_requests()[1].messages[1]["content"] == "remember 7"
    r = piped(run, "again?\n", "-c", env=env)
    assert r.returncode == 0 and "continuing session %s" % sid in r.stderr


def test_no_session_file_until_something_is_said(run, tmp_path):
    r = piped(run, "/help\n", env={"GROK_DATA_DIR": tmp_path / "data"})
    assert r.returncode == 0
    assert sessions(tmp_path) == []


def test_failed_and_denied_tools_are_marked(run, fake, tmp_path):
    fake.add(tools(("read_file", {"path": "missing.txt"}), ("bash", {"command": "rm -rf x"})), answer("done"))
    r = piped(run, "go\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "[read_file] missing.txt" in out
    assert "✗ [read_file] missing.txt: " in out and "✗ [bash] rm -rf x: denied" in out


def test_ctrl_c_mid_answer_keeps_what_was_shown(term, fake):
    long = "Once upon a time " + "there was a very long story " * 40
    fake.add(answer(long, chunk_size=8, chunk_delay=0.05), answer("next"))
    p = term()
    p.expect(PROMPT)
    p.send("tell a story\n")
    p.expect(r"Once upon a time there")
    p.sendintr()
    p.expect(r"\(cancelled\)")
    p.expect(PROMPT)
    p.send("go on\n")
    answered_then_quit(p, r"next")
    said = json.loads(fake.chat_requests()[1].messages[2]["content"])["response"]
    assert said.startswith("Once upon a time there") and said.endswith("\n\n[interrupted by the user]")
    assert len(said) < len(long)


def test_a_notice_after_a_streamed_answer_does_not_show_the_answer_again(term, fake):
    # With no prices for the server, "price unknown" is told after the reply has streamed.
    fake.add(answer("said once"))
    p = term(env={"GROK_PRICES": None})
    p.expect(PROMPT)
    p.send("hello\n")
    answered_then_quit(p, r"price unknown")
    assert p.plain_output.count("said once") == 1
