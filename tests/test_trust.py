"""Trust: what the person approves is exactly what runs, and nothing leaves the machine or
the project unasked. One test per case of a hostile model, file, repository, server or
shared folder; what a person sees is checked on a pseudo-terminal."""
import json
import os
import stat
import sys

from conftest import GROK, GROK_DETAILED, TEST_KEY
from fakeapi import answer, error, tools
from ptyrun import PtyProcess
from test_acp import Acp

APPROVE = r"run it\? \[y\]es / \[N\]o / \[a\]lways: "
APPROVE_MORE = r"run it\? \[y\]es / \[N\]o / \[a\]lways / \[s\]how all: "


def repl(run, work, *args, **env):
    # Wide: an approval naming a long temporary path stays on one line (narrower, it is wrapped).
    p = PtyProcess([sys.executable, str(GROK)] + list(args), run.env(**env), work, cols=200)
    p.expect(r"> ")
    return p


def events(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def sessions_text(data):
    return "".join(p.read_text() for p in (data / "sessions").glob("*.jsonl"))


def test_1_control_characters_are_shown_never_obeyed(run, fake, isolated_env):
    work = isolated_env.work
    fake.add(tools(("bash", {"command": "touch X #\x1b[2K\rbash ls -la"})),
             tools(("bash", {"command": "printf 'red\\033[31m\\n'"})),
             tools(("ask_user", {"question": "Pick\x1b]0;title\x07 one", "options": ["a\x1b[2Jb"]})),
             answer("done \x1b]52;c;ZXZpbA==\x07 ok \u202eevil"))
    p = repl(run, work)
    p.send("go\n")
    p.expect(r"touch X #\\x1b\[2K\\x0dbash ls -la\s+" + APPROVE)
    p.send("n\n")
    p.expect(APPROVE)
    p.send("y\n")
    p.expect(r"answer \(number or text\): ")
    p.send("1\n")
    p.expect(r"done \\x1b\]52;c;ZXZpbA==\\x07 ok \\u202eevil")
    p.expect(r"> ")
    p.sendeof()
    assert p.wait() == 0
    for raw in ("\x1b[2K", "\r" + "bash ls", "\x1b]0;", "\x1b[2J", "\x1b]52", "\u202e"):
        assert raw not in p.output, repr(raw)
    assert r"Pick\x1b]0;title\x07 one" in p.output and r"a\x1b[2Jb" in p.output
    assert not (work / "X").exists()
    # the model still gets the bytes unchanged: the tool output and the user's pick
    sent = fake.chat_requests()[2].last_user
    assert "red\x1b[31m" in sent
    assert "the user answered: a\x1b[2Jb" in fake.chat_requests()[3].last_user
    # server error text and notices (headless, stderr), and grok-detailed's tool output
    fake.add(error(400, body={"error": {"message": "bad \x1b]0;pwned\x07 request"}}))
    r = run("-p", "hi")
    assert r.returncode == 1 and "\x1b]0;" not in r.stderr and r"bad \x1b]0;pwned\x07 request" in r.stderr
    fake.add(tools(("bash", {"command": "printf 'x\\033]0;pwned\\007y'"})), answer("ok"))
    r = run("-y", input="go\n", script=GROK_DETAILED)
    assert r.returncode == 0 and "\x1b]0;" not in r.stdout and r"x\x1b]0;pwned\x07y" in r.stdout


def test_2_every_line_of_a_command_is_shown_and_the_answer_must_be_clear(run, fake, isolated_env):
    work = isolated_env.work
    heredoc = "cat > notes.txt <<'EOF'\nfirst line\n\tindented\nEOF"
    fake.add(tools(("bash", {"command": "grep -rn TODO src\ntouch X"})),
             tools(("bash", {"command": heredoc})), answer("finished"))
    p = repl(run, work)
    p.send("go\n")
    p.expect(r"bash\r?\n  grep -rn TODO src\r?\n  touch X\r?\n  " + APPROVE)
    p.send("sure\n")                    # neither yes nor no: asked again
    p.expect(r"touch X\r?\n  " + APPROVE)
    p.send("\n")                        # the default is no
    p.expect(r"  cat > notes.txt <<'EOF'\r?\n  first line\r?\n  \tindented\r?\n  EOF\r?\n  " + APPROVE)
    p.send("y\n")
    p.expect(r"finished\s+(?:\x1b\[\?2004h)?> ")
    p.sendeof()
    assert p.wait() == 0
    assert not (work / "X").exists()
    assert (work / "notes.txt").read_text() == "first line\n\tindented\n"


def test_2_one_line_displays_of_a_command_mark_each_line_break(run, fake):
    # Where a call is shown on one line (headless progress, the quick REPL's tool line, the model's
    # results), the lines of a command stay apart: "a b" and "a<newline>b" must not look alike.
    fake.add(tools(("bash", {"command": "echo one\ntouch X"})), answer("done"))
    r = run("-y", "-p", "go")
    assert r.returncode == 0, r.stderr
    assert "[bash] echo one ⏎ touch X" in r.stderr
    assert "[1] bash echo one ⏎ touch X" in fake.chat_requests()[1].last_user


def test_3_write_file_approval_shows_the_content_or_the_diff(run, fake, isolated_env):
    work = isolated_env.work
    (work / "old.txt").write_text("keep\nold line\n")
    long = "".join("line %d\n" % i for i in range(1, 101))
    fake.add(tools(("write_file", {"path": "new.txt", "content": "hello\nworld\n"}),
                   ("write_file", {"path": "old.txt", "content": "keep\nnew line\n"}),
                   ("write_file", {"path": "long.txt", "content": long})), answer("written"))
    p = repl(run, work)
    p.send("go\n")
    p.expect(r"write_file %s/new.txt \(12 bytes, a new file\)\r?\n  hello\r?\n  world\r?\n  " % work + APPROVE)
    p.send("y\n")
    p.expect(r"write_file %s/old.txt \(14 bytes, replaces the file; the changes\)" % work)
    p.expect(r"\n  -old line\r?\n  \+new line\r?\n  " + APPROVE)
    p.send("y\n")
    p.expect(r"line 40\r?\n  \[\.\.\. \d+ more characters \(60 lines\) not shown: answer s to see all\]\r?\n  "
             + APPROVE_MORE)
    assert "line 41\r" not in p.output
    p.send("s\n")
    p.expect(r"line 100\r?\n  " + APPROVE)
    p.send("n\n")
    p.expect(r"written\s+(?:\x1b\[\?2004h)?> ")
    p.sendeof()
    assert p.wait() == 0
    assert (work / "new.txt").read_text() == "hello\nworld\n" and not (work / "long.txt").exists()


def test_4_allow_matches_the_resolved_path_only(run, fake, isolated_env):
    work, home = isolated_env.work, isolated_env.home
    (work / "src" / "sub").mkdir(parents=True)
    (home / ".bashrc").write_text("mine\n")
    (home / ".profile").write_text("mine\n")
    os.symlink(str(home / ".profile"), str(work / "src" / "config.txt"))
    for path in ("src/../../home/.bashrc", "src/config.txt", "src/sub/deep.txt"):
        fake.add(tools(("write_file", {"path": path, "content": "pwned\n"})))
        r = run("-p", "go", "--format", "json", "--allow", "src/*")
        assert r.returncode == 3, (path, r.stderr)
        assert events(r.stdout)[-1]["message"].startswith("Tool `write_file` denied: path not in allowlist")
    assert (home / ".bashrc").read_text() == "mine\n" and (home / ".profile").read_text() == "mine\n"
    fake.add(tools(("write_file", {"path": "src/ok.txt", "content": "a"}),
                   ("write_file", {"path": "src/sub/deep.txt", "content": "b"})), answer("ok"))
    r = run("-p", "go", "--allow", "src/*", "--allow", "src/**/*.txt")
    assert r.returncode == 0, r.stderr
    assert (work / "src" / "ok.txt").read_text() == "a" and (work / "src" / "sub" / "deep.txt").read_text() == "b"


def test_5_project_rules_come_only_from_the_project(run, fake, isolated_env, tmp_path):
    home = isolated_env.home
    (home / ".netrc").write_text("machine example.com login me password NETRC-SECRET\n")
    shared = tmp_path / "shared"
    (shared / ".git").mkdir(parents=True)
    (shared / "AGENTS.md").write_text("PLANTED RULES\n")
    os.chmod(str(shared), 0o777)
    proj = shared / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / "AGENTS.md").symlink_to(home / ".netrc")
    (proj / "GROK.md").write_text("OWN RULES; token ghp_%s\n" % ("a" * 36))
    (proj / "docs").mkdir()
    (proj / "notes.md").write_text("LINKED RULES\n")
    (proj / "docs" / "AGENTS.md").symlink_to(proj / "notes.md")     # a link within the repository is fine
    fake.add(answer("ok"))
    r = run("-p", "hi", "--cwd", proj / "docs")
    assert r.returncode == 0, r.stderr
    system = fake.chat_requests()[0].messages[0]["content"]
    assert "OWN RULES; token [REDACTED_GH_TOKEN]" in system and "LINKED RULES" in system
    saved = sessions_text(home / ".local" / "share" / "grok-agent")
    for leak in ("NETRC-SECRET", "PLANTED", "ghp_aaaa"):
        assert leak not in system and leak not in saved, leak
    # shared parent folder with .git: also skipped when the project itself has no .git
    os.rename(str(proj / ".git"), str(proj / "git.off"))
    fake.add(answer("ok"))
    assert run("-p", "hi", "--cwd", proj).returncode == 0
    assert "PLANTED" not in fake.chat_requests()[1].messages[0]["content"]


def test_6_reads_outside_the_working_tree_ask_first(run, fake, isolated_env):
    work, home = isolated_env.work, isolated_env.home
    (home / ".netrc").write_text("password NETRC-SECRET\n")
    (work / "inside.txt").write_text("inside text\n")
    for call in (("read_file", {"path": "../home/.netrc"}), ("list_files", {"path": str(home)})):
        fake.add(tools(call, ("read_file", {"path": "inside.txt"})))
        r = run("-p", "go", "--format", "json")
        assert r.returncode == 3 and "denied" in events(r.stdout)[-1]["message"], r.stdout
    fake.add(tools(("read_file", {"path": "../home/.netrc"})), answer("read"))
    assert run("-p", "go", "--allow", "%s/**" % home).returncode == 0
    assert "NETRC-SECRET" in fake.chat_requests()[-1].last_user
    # REPL: asked, with the resolved path; reads inside run without asking
    fake.add(tools(("read_file", {"path": "inside.txt"}), ("read_file", {"path": "../home/.netrc"})),
             answer("told"))
    p = repl(run, work)
    p.send("go\n")
    p.expect(r"read_file %s/.netrc \(outside the working directory\)\r?\n  " % home + APPROVE)
    p.send("n\n")
    p.expect(r"told\s+(?:\x1b\[\?2004h)?> ")
    p.sendeof()
    assert p.wait() == 0
    sent = fake.chat_requests()[-1].last_user
    assert "inside text" in sent and "NETRC-SECRET" not in sent and "denied" in sent
    assert p.output.count("run it?") == 1
    # ACP: a permission request
    fake.add(tools(("list_files", {"path": "/"})), answer("fine"))
    c = Acp(run)
    try:
        c.init()
        sid = c.new(work)
        asked = []
        c.prompt(sid, "list /", on_request=lambda msg: asked.append(msg) or {"outcome": {"outcome": "cancelled"}})
        assert [m["params"]["toolCall"]["kind"] for m in asked] == ["search"]
    finally:
        c.kill()


def test_7_a_data_dir_others_can_write_is_refused(run, fake, isolated_env, tmp_path):
    shared = tmp_path / "shared-data"
    (shared / "sessions").mkdir(parents=True)
    planted = {"type": "session", "version": 1, "id": "20990101-000000-aaaaaa", "cwd": "/",
               "system": "PLANTED SYSTEM PROMPT"}
    (shared / "sessions" / "20990101-000000-aaaaaa.jsonl").write_text(
        json.dumps(planted) + "\n" + json.dumps({"type": "message", "message": {"role": "user", "content": "x"}})
        + "\n")
    os.chmod(str(shared), 0o777)
    for args in (("-p", "hi", "-c"), ("-p", "hi")):
        r = run(*args, env={"GROK_DATA_DIR": shared})
        assert r.returncode == 1 and "GROK_DATA_DIR" in r.stderr and "group/world-writable" in r.stderr, r.stderr
    assert fake.requests == []
    fake.add(answer("chatting unsaved"))
    r = run(input="hi\n", env={"GROK_DATA_DIR": shared})
    assert r.returncode == 0 and "chatting unsaved" in r.stdout and "GROK_DATA_DIR" in r.stderr
    assert len(list((shared / "sessions").iterdir())) == 1
    os.chmod(str(shared), 0o700)
    os.chown(str(shared), 65534, 65534)
    r = run("-p", "hi", "-c", env={"GROK_DATA_DIR": shared})
    assert r.returncode == 1 and "owned by another user" in r.stderr
    # a fresh data dir is 0700; a planted history symlink is replaced, never followed
    data = tmp_path / "fresh" / "data"
    bashrc = isolated_env.home / ".bashrc"
    bashrc.write_text("mine\n")
    os.chmod(str(bashrc), 0o644)
    fake.add(answer("hello"))
    p = repl(run, isolated_env.work, GROK_DATA_DIR=data)
    assert stat.S_IMODE(os.stat(str(data)).st_mode) == 0o700
    os.symlink(str(bashrc), str(data / "history"))
    p.send("typed prompt\n")
    p.expect(r"hello\s+(?:\x1b\[\?2004h)?> ")
    p.sendeof()
    assert p.wait() == 0
    assert bashrc.read_text() == "mine\n" and stat.S_IMODE(os.stat(str(bashrc)).st_mode) == 0o644
    assert not os.path.islink(str(data / "history")) and "typed prompt" in (data / "history").read_text()
    session = next((data / "sessions").glob("*.jsonl"))
    assert stat.S_IMODE(os.stat(str(session)).st_mode) == 0o600


def test_8_dotenv_keys_are_the_persons_own_first_and_parsed_right(run, fake, isolated_env):
    home, work = isolated_env.home, isolated_env.work
    (home / ".grok").mkdir()
    (home / ".grok" / ".env").write_text("GROK_API_KEY=own-key-123\n")
    (work / ".env").write_text("GROK_API_KEY=project-key-456\n")
    fake.add(answer("ok"))
    r = run("-p", "hi", env={"GROK_API_KEY": None})
    assert r.returncode == 0 and fake.chat_requests()[-1].headers["authorization"] == "Bearer own-key-123"
    (home / ".grok" / ".env").unlink()
    (work / ".env").unlink()
    os.symlink("/dev/zero", str(work / ".env"))
    r = run("-p", "hi", env={"GROK_API_KEY": None}, timeout=20)
    assert r.returncode == 1 and "no API key" in r.stderr
    (work / ".env").unlink()
    for text in (b"\xef\xbb\xbfGROK_API_KEY=bom-key\n", b"export\tGROK_API_KEY=tab-key\n",
                 b'GROK_API_KEY="quoted-key"  # a comment\r\n'):
        (home / ".grok" / ".env").write_bytes(text)
        fake.add(answer("ok"))
        r = run("-p", "hi", env={"GROK_API_KEY": None})
        assert r.returncode == 0, r.stderr
    assert [q.headers["authorization"] for q in fake.chat_requests()[-3:]] == [
        "Bearer bom-key", "Bearer tab-key", "Bearer quoted-key"]


def test_9_acp_diff_old_text_is_scrubbed(run, fake, isolated_env):
    work = isolated_env.work
    secret = "ghp_" + "b" * 36
    (work / "config.env").write_text("TOKEN=%s\nmode=old\n" % secret)
    fake.add(tools(("write_file", {"path": "config.env", "content": "mode=new\n"})), answer("done"))
    c = Acp(run)
    try:
        c.init()
        sid = c.new(work)
        c.prompt(sid, "edit", on_request=lambda msg: {"outcome": {"outcome": "selected", "optionId": "reject_once"}})
        blocks = [x for m in c.seen for x in (m.get("params", {}).get("update") or m.get("params", {}).get(
            "toolCall") or {}).get("content") or () if isinstance(m.get("params"), dict)]
        diffs = [x for x in blocks if isinstance(x, dict) and x.get("type") == "diff"]
        assert diffs and all("TOKEN=[REDACTED_GH_TOKEN]" in d["oldText"] for d in diffs)
        assert secret.encode() not in b"".join(c.raw)
    finally:
        c.kill()


def test_10_secrets_never_reach_messages(run, fake, isolated_env):
    url = fake.url.replace("http://", "http://someone:pw-SECRET-123@")
    fake.add(error(404))
    r = run("-p", "hi", "--format", "json", env={"GROK_BASE_URL": url})
    assert r.returncode == 1 and "pw-SECRET" not in r.stdout + r.stderr and "[REDACTED]@" in r.stderr
    r = run("-p", "hi", env={"GROK_BASE_URL": "http://someone:pw-SECRET-123@host:99999"})
    assert r.returncode == 1 and "pw-SECRET" not in r.stderr
    r = run("-p", "hi", env={"GROK_API_KEY": "xai-first-half\nsecond-half"})
    assert r.returncode == 1 and "whitespace or control characters" in r.stderr
    assert "first-half" not in r.stderr and "second-half" not in r.stderr
    plain = TEST_KEY[4:] + "-looks-like-a-tool"      # the configured key, no known prefix
    fake.add(*[tools((plain, {}))] * 3)
    r = run("-p", "hi", "--format", "json", env={"GROK_API_KEY": plain})
    assert r.returncode == 3 and plain not in r.stdout + r.stderr, r.stderr
    data = isolated_env.home / ".local" / "share" / "grok-agent"
    assert plain not in sessions_text(data)
