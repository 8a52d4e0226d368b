"""What the bash original (grok, grok-detailed) did and grok.py keeps: prompts, skills, the exit
summary, /q and /?, Esc, its session files, done with tool calls, the licence."""
import json
import re
import sys
import termios

from conftest import GROK, GROK_DETAILED, ROOT
from fakeapi import answer, hang, tools
from ptyrun import PROMPT, PtyProcess


def system_prompt(fake, n=0):
    return fake.chat_requests()[n].messages[0]["content"]


def test_both_prompts_carry_the_originals_guidance(run, fake):
    fake.add(answer("ok"), answer("ok"))
    assert run("-p", "hi").returncode == 0
    assert run(input="hi\n", script=GROK_DETAILED).returncode == 0
    for quick in (system_prompt(fake, 0), system_prompt(fake, 1)):
        assert "use web_search for facts, news and current events (put the year in the query)" in quick
        assert "Tools first" in quick and "no markdown" in quick
    detailed = system_prompt(fake, 1)
    assert "goal and exit_conditions (set both in your first reply" in detailed
    assert "95+ = verified with a tool, 80-94 = high certainty, below 80 = uncertain" in detailed
    assert "done true only when every exit condition is met" in detailed


def test_done_true_with_tool_calls_runs_them_and_ends_the_turn_with_the_response(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "echo made > f.txt"}), response="Created f.txt.", done=True))
    r = run("-p", "make f.txt", "-y")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Created f.txt."
    assert (isolated_env.work / "f.txt").read_text() == "made\n"
    assert len(fake.chat_requests()) == 1                   # no second, paid request
    assert "done true with tool calls runs them and then ends the turn" in system_prompt(fake)
    # the next turn's history: the reply, its tool results, then the response as a closing reply
    fake.add(tools(("bash", {"command": "true"}), response="first", done=True), answer("second"))
    r = run(input="one\ntwo\n", env={"GROK_ALWAYS_APPROVE": "1"})
    history = fake.chat_requests()[-1].messages
    assert [m["role"] for m in history[1:]] == ["user", "assistant", "user", "assistant", "user"]
    assert history[3]["content"].startswith("Tool results")
    assert json.loads(history[4]["content"])["response"] == "first"


def test_the_skill_creation_skill_is_shipped_for_our_tools(run, fake):
    text = (ROOT / "skills" / "skill-creation.md").read_text()
    assert text.startswith("---\nname: skill-creation\ndescription: ")
    assert "write_file" in text and "read_file" in text and "~/.local/bin" not in text
    fake.add(answer("ok"))
    run("-p", "hi")
    assert "- skill-creation: Use when the user asks for a new skill" in system_prompt(fake)


def test_detailed_shows_a_skill_line_when_a_skill_is_read(run, fake, tmp_path):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "deploy.md").write_text("---\nname: deploy\ndescription: Ship it.\n---\nsteps\n")
    (skills / "evil.md").write_text("---\nname: ev\x1b[31mil\ndescription: x\n---\n")
    fake.add(tools(*[("read_file", {"path": str(path)}) for path in
                     (skills / "deploy.md", skills / "evil.md", tmp_path / "other.md")]), answer("done"))
    r = run(input="deploy\n", script=GROK_DETAILED, env={"GROK_SKILLS_DIR": skills})
    assert r.returncode == 0, r.stderr
    assert re.findall(r"Skill: (\S+)", r.stdout) == ["deploy", "ev\\x1b[31mil"]       # escapes made visible


def test_a_skill_added_during_a_session_is_told_in_a_note_with_the_prompt_unchanged(run, fake, tmp_path):
    skills = tmp_path / "skills"
    skills.mkdir()
    new = skills / "notes.md"
    fake.add(tools(("write_file", {"path": str(new), "content": "---\nname: notes\ndescription: Take notes.\n---\n"})),
             answer("written"), answer("seen"), answer("again"))
    r = run(input="write a skill\nnext\nthird\n", env={"GROK_SKILLS_DIR": skills, "GROK_ALWAYS_APPROVE": "1"})
    assert r.returncode == 0, r.stderr
    first, second, third = fake.chat_requests()[0], fake.chat_requests()[2], fake.chat_requests()[3]
    assert "notes" not in system_prompt(fake) and second.messages[0] == first.messages[0]
    note = second.messages[-2]["content"]
    assert note.startswith("[skills] ") and "- notes: Take notes. (%s)" % new in note
    assert second.messages[-1]["content"] == "next"
    assert third.messages[-2]["role"] == "assistant"        # no second note while nothing changed


def test_detailed_prints_the_session_path_and_summary_at_exit(run, fake, isolated_env):
    fake.add(tools(("list_files", {})), answer("here"))
    r = run(input="look\n", script=GROK_DETAILED)
    assert r.returncode == 0, r.stderr
    [path] = (isolated_env.home / ".local/share/grok-agent/sessions").glob("*.jsonl")
    tail = r.stdout.splitlines()[-2:]
    assert tail[0] == "Session saved: ~/%s" % path.relative_to(isolated_env.home)
    assert re.fullmatch(r"Session %s · \$0\.\d{4} · 1 tool" % re.escape(path.stem), tail[1])


def test_q_quits_and_question_mark_shows_help(run, fake):
    r = run(input="/?\n/q\nnever sent\n")
    assert r.returncode == 0
    assert "quit (also /q, Ctrl-D)" in r.stdout and "unknown command" not in r.stderr
    r = run(input="/?\n/q\nnever sent\n", script=GROK_DETAILED)
    assert r.returncode == 0 and "/cd DIR" in r.stdout and "unknown command" not in r.stderr
    assert fake.chat_requests() == []


def canonical(fd):
    return termios.tcgetattr(fd)[3] & (termios.ICANON | termios.ECHO) == termios.ICANON | termios.ECHO


def test_esc_cancels_a_turn_and_typed_ahead_lines_are_kept(run, fake, isolated_env, tmp_path):
    fake.add(hang(20), tools(("bash", {"command": "echo approved"})), answer("ran"), answer("typed ahead"))
    env = run.env(GROK_DATA_DIR=tmp_path / "data", TERM="xterm")
    with PtyProcess([sys.executable, str(GROK)], env, isolated_env.work) as p:
        p.expect(PROMPT)
        p.send("wait\n")
        assert fake.wait_for_requests(1)
        p.send("\x1b")
        p.expect(r"\(cancelled\)")
        p.expect(PROMPT)
        p.send("run it\n")
        p.expect(r"run it\? \[y\]es")
        assert canonical(p.fd)         # asking the person: the terminal edits lines and echoes again
        p.send("y\n")                   # the approval is read from the terminal, not by the Esc watcher
        p.expect(r"\[bash\] echo approved")
        p.send("next line\n")           # typed while the model is asked again: kept for the prompt
        p.expect(r"ran")
        p.expect(r"typed ahead")
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
        assert canonical(p.fd)         # the terminal is left as it was found
    sent = fake.chat_requests()
    assert [r.last_user for r in sent[1:]] == ["run it", sent[2].last_user, "next line"]
    assert "approved" in sent[2].last_user
    assert "[interrupted by the user]" in json.dumps(sent[1].messages)


def test_the_originals_session_files_are_listed_and_resumed_into_a_new_file(run, fake, isolated_env):
    sdir = isolated_env.home / ".local/share/grok-agent/sessions"
    sdir.mkdir(parents=True)
    old = sdir / "a1b2c3d4.json"
    old.write_text(json.dumps({"session_id": "a1b2c3d4", "working_dir": str(isolated_env.work),
                               "saved": "2025-01-02T03:04:05Z", "messages": [
        {"role": "system", "content": "You are Grok Agent"},
        {"role": "user", "content": "name a \x1b[31mcolour\n---\n[INTERNAL - DO NOT MENTION TO USER]\nSkills"},
        {"role": "assistant", "content": '{"response": "blue", "done": true}'},
        {"role": "assistant", "content": "blue"}]}))
    before = old.read_bytes()
    fake.add(answer("green"))
    r = run(input="/sessions\n/resume a1b2\nanother\n", script=GROK_DETAILED)
    assert r.returncode == 0, r.stderr
    assert re.search(r"a1b2c3d4 .* \[bash grok\] name a \\x1b\[31mcolour\n", r.stdout)
    assert "\x1b" not in r.stdout and "INTERNAL" not in r.stdout
    assert "a session of the bash grok, continued as session" in r.stderr
    messages = fake.chat_requests()[0].messages
    assert "You are Grok Agent" not in messages[0]["content"]
    assert [m["content"] for m in messages[2:]] == ['{"response": "blue", "done": true}', "blue", "another"]
    assert old.read_bytes() == before
    [new] = [f for f in sdir.glob("*.jsonl") if "blue" in f.read_text()]       # and the one opened at start
    assert oct(new.stat().st_mode & 0o777) == "0o600" and "Session saved: ~/%s" % new.relative_to(isolated_env.home) in r.stdout


def test_mit_licence_and_a_readme_table_for_users_of_the_original():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    readme = (ROOT / "README.md").read_text()
    assert "2,164" not in readme
    section = readme.split("## Coming from the bash grok\n", 1)[1].split("\n## ", 1)[0]
    assert "| the bash grok | grok.py |" in section
    for behaviour in ("done: true", "Esc", "temperature 0.5", "Skill: NAME", "sessions", "skill-creation"):
        assert behaviour in section
