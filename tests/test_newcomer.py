"""What a newcomer meets on the first day: the README's commands on a fresh machine, notices that
fit the terminal, the session id, a local server set up in the person's own .env, a wrong URL."""

import re
import subprocess
import sys
import textwrap
import threading

from conftest import GROK, GROK_DETAILED, ROOT, TEST_KEY
from fakeapi import answer, error, models, raw, reply, tools
from ptyrun import PROMPT, PtyProcess

# Two tests whose REPL answers a tool call that needs approval, which is asked on /dev/tty.
ASKS_APPROVAL = (
    "tests/test_original.py::test_detailed_shows_a_skill_line_when_a_skill_is_read",
    "tests/test_secrets.py::test_key_never_appears_anywhere",
)


def test_the_suite_typed_into_a_terminal_never_asks_on_it(run):
    """The suite run from a terminal (a pty here): no child reaches it, nothing waits for a key."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + list(ASKS_APPROVAL)
    with PtyProcess(argv, run.env(), ROOT, cols=200) as p:
        m = p.expect(r"run it\? \[y\]es|\d+ (?:passed|failed)[^\n]*", timeout=120, plain=True)
        assert m.group(0).startswith("2 passed"), p.plain_output[-3000:]
        assert p.wait(60) == 0


def test_without_a_key_a_terminal_asks_for_it_and_saves_it_privately(run, fake, isolated_env):
    """The README's first command on a fresh machine: no key anywhere, so grok asks (not echoed),
    offers to save it to ~/.grok/.env (0600), and the chat goes on with it."""
    fake.add(answer("hello there"))
    with PtyProcess(
        [sys.executable, str(GROK)], run.env(GROK_API_KEY=None), isolated_env.work
    ) as p:
        p.expect(r"API key \(hidden; empty to quit\): ", plain=True)
        p.send(TEST_KEY + "\n")
        p.expect(r"save it to ~/\.grok/\.env \(0600\)\? \[Y/n\] ", plain=True)
        p.send("\n")
        p.expect(PROMPT)
        p.send("hi\n")
        p.expect("hello there")
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    assert TEST_KEY not in p.output  # never echoed
    saved = isolated_env.home / ".grok" / ".env"
    assert saved.read_text().split() == ["GROK_API_KEY=" + TEST_KEY]
    assert saved.stat().st_mode & 0o777 == 0o600
    assert fake.requests[0].headers["authorization"] == "Bearer " + TEST_KEY


def test_a_local_server_set_in_the_persons_own_env_file_is_used_and_a_projects_is_not(
    run, fake, isolated_env
):
    (isolated_env.home / ".grok").mkdir()
    (isolated_env.home / ".grok" / ".env").write_text(
        "GROK_BASE_URL=%s\nGROK_MODEL=smol\n" % fake.url
    )
    (isolated_env.work / ".env").write_text(
        "GROK_BASE_URL=http://127.0.0.1:9/v1\nGROK_MODEL=theirs\n"
    )
    fake.add(answer("from the local server"))
    r = run("-p", "hi", env={"GROK_BASE_URL": None, "GROK_MODEL": None})
    assert r.returncode == 0 and r.stdout == "from the local server\n", r.stderr
    assert fake.requests[0].json["model"] == "smol"


def test_a_server_without_prices_is_told_once_and_never_on_the_answers_line(run, fake):
    """`grok -p ... 2>&1 | grep -v 'price unknown'` keeps the answer; the next run says nothing."""
    fake.add(answer("It is for Grok."), answer("again"))
    env = run.env(GROK_PRICES=None)
    first, second = (
        subprocess.run(
            [sys.executable, str(GROK), "-p", "hi"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
        )
        for _ in range(2)
    )
    lines = first.stdout.splitlines()
    assert lines[0] == "It is for Grok." and lines[1].startswith(
        "price unknown for model grok-4.3 at "
    )
    assert len(lines) == 2 and second.stdout == "again\n"


def lines_of(p):
    """What the person saw, line by line (a waiting line redrawn with \\r counts as its own)."""
    return [line for line in re.split(r"\r\n|\r|\n", p.plain_output) if line.strip()]


def test_at_40_columns_quick_grok_fits_and_tells_its_session_id(run, fake, isolated_env):
    command = "echo one two three four five six seven eight nine ten eleven twelve thirteen"
    fake.add(tools(("bash", {"command": command})), answer("done"))
    with PtyProcess(
        [sys.executable, str(GROK)], run.env(GROK_PRICES=None), isolated_env.work, cols=40
    ) as p:
        p.expect(PROMPT)
        p.send("go\n")
        p.expect(r"\[a\]lways: ")
        p.send("n\n")
        p.expect("done")
        p.expect(PROMPT)
        p.send("/sessions\n")
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    sid = next((isolated_env.home / ".local/share/grok-agent/sessions").glob("*.jsonl")).stem
    seen = lines_of(p)
    assert max(map(len, seen)) <= 40, "\n".join(seen)
    assert "✗ [bash] echo one two three four five" in seen and "  denied, not run" in seen
    assert any(line.startswith("* " + sid) for line in seen)  # /sessions
    assert seen[-2:] == ["session %s (grok" % sid, "  --resume %s)" % sid]  # at the end
    assert "retry" not in p.plain_output  # words meant for the model


def test_an_ambiguous_session_prefix_lists_the_sessions_it_matches(run, fake, isolated_env):
    fake.add(answer("a"), answer("b"))
    assert run("-p", "one").returncode == run("-p", "two").returncode == 0
    ids = sorted(
        p.stem for p in (isolated_env.home / ".local/share/grok-agent/sessions").glob("*.jsonl")
    )
    r = run("-p", "three", "--resume", "20")
    assert (
        r.returncode == 1
        and ids[0] in r.stderr
        and ids[1] in r.stderr
        and "matches 2 sessions" in r.stderr
    )


def test_at_60_columns_grok_detailed_fits_its_banner_and_notices(run, fake, isolated_env):
    fake.add(answer("fine"))
    with PtyProcess(
        [sys.executable, str(GROK_DETAILED)], run.env(GROK_PRICES=None), isolated_env.work, cols=60
    ) as p:
        p.expect(PROMPT)
        p.send("hi\n")
        p.expect("price unknown")
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    seen = lines_of(p)
    assert max(map(len, seen)) <= 60, "\n".join(line for line in seen if len(line) > 60)


def test_grok_detailed_shows_what_an_invalid_reply_said_and_why_a_call_is_malformed(run, fake):
    fake.add(
        reply("I think the answer is 42, but let me phrase it as prose."),
        tools(("bash", {"cmd": "ls"})),
        answer("done"),
    )
    r = run("-y", input="go\n", script=GROK_DETAILED)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "invalid I think the answer is 42, but let me phrase it as prose." in out
    assert (
        '[1] bash {"cmd": "ls"}' in out
        and "bash needs a non-empty string 'command' argument" in out
    )


def test_headless_says_why_a_malformed_call_failed(run, fake):
    fake.add(tools(("bash", {"cmd": "ls"})), answer("done"))
    r = run("-p", "go", "-y")
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert r.stderr.splitlines() == [
        '[bash] {"cmd": "ls"}',
        "✗ [bash] error: bash needs a non-empty string 'command' argument",
    ]


PAGE = (
    b"<!doctype html><html><head><title>Welcome to nginx!</title>"
    b"<style>body{width:35em}</style></head><body><h1>Welcome to nginx!</h1>"
    b"<p>If you see this page, the web server works.</p></body></html>"
)


def test_a_web_server_in_place_of_the_api_is_named_with_the_url_and_what_came_back(run, fake):
    for status in (200, 404):
        fake.add(raw(status, PAGE, headers={"Content-Type": "text/html"}))
        r = run("-p", "hi")
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith(
            "grok: POST %s/chat/completions did not answer with JSON (HTTP %d, "
            "text/html): 'Welcome to nginx! Welcome to nginx! If you see" % (fake.url, status)
        )
        assert "<" not in r.stderr and "GROK_BASE_URL" in r.stderr


def test_the_full_chat_completions_url_as_base_url_says_what_to_set(run, fake):
    r = run("-p", "hi", env={"GROK_BASE_URL": fake.url + "/chat/completions"})
    assert r.returncode == 1 and not fake.requests
    assert (
        r.stderr == "grok: GROK_BASE_URL is the API's base (such as %s), not /chat/completions: "
        "grok adds that\n" % fake.url
    )


def test_a_mistyped_flag_gets_a_did_you_mean_from_the_flags_there_are(run, fake):
    r = run("--modle", "grok-4.3", "-p", "hi")
    assert r.returncode == 1 and r.stderr.endswith(
        "grok: unrecognized arguments: --modle; did you mean --model?\n"
    )
    r = run("--agnet", "goal", script=GROK_DETAILED)
    assert r.returncode == 1 and r.stderr.endswith("did you mean --agent?\n")
    r = run("--frobnicate", "-p", "hi")
    assert r.returncode == 1 and r.stderr.endswith("grok: unrecognized arguments: --frobnicate\n")
    assert not fake.requests


def test_model_is_checked_against_the_servers_list_and_used_anyway(run, fake):
    fake.add(models("smol-135m", "qwen-0.5b"), models("smol-135m", "qwen-0.5b"), path="/models")
    fake.add(answer("as you wish"))
    r = run(input="/model grok-9\n/model qwen-0.5b\nhi\n")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "grok-9 is not among the server's models; using it anyway\n"
    assert "model: grok-9 (known: smol-135m, qwen-0.5b)" in r.stdout
    assert fake.chat_requests()[0].json["model"] == "qwen-0.5b"


def test_a_paste_that_arrives_while_a_turn_runs_is_one_message(run, fake, isolated_env):
    hold = threading.Event()
    fake.add(
        answer("The first answer streams slowly until the paste is in.", hold=hold, stream=True),
        answer("one answer for the paste"),
    )
    with PtyProcess([sys.executable, str(GROK)], run.env(), isolated_env.work) as p:
        p.expect(PROMPT)
        p.send("first\n")
        p.expect("The first answer")
        p.send("line one\nline two\nline three\n")
        hold.set()
        p.expect("one answer for the paste")
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    assert [q.last_user for q in fake.chat_requests()] == [
        "first",
        "line one\nline two\nline three",
    ]


def test_the_readmes_recipe_for_a_new_tool_works_as_written(run, fake, tmp_path):
    recipe = (
        (ROOT / "README.md")
        .read_text()
        .split("### Adding a tool in three steps")[1]
        .split("\n## ")[0]
    )
    function = textwrap.dedent(recipe.split("```python\n")[1].split("```")[0])
    entry = re.search(r'`("calc": Tool\(.*?\),)`', recipe).group(1)
    source = GROK.read_text().replace(
        "\nTOOLS = {\n", "\n%s\n\nTOOLS = {\n    %s\n" % (function, entry), 1
    )
    (tmp_path / "grok.py").write_text(source)
    fake.add(tools(("calc", {"expression": "6*7"})), answer("42"))
    r = run("-p", "what is 6*7?", script=tmp_path / "grok.py")
    assert r.returncode == 0 and r.stdout == "42\n", r.stderr
    assert (
        "calc {\"expression\": \"...\"}: evaluate arithmetic"
        in fake.chat_requests()[0].messages[0]["content"]
    )
    assert "[calc] 6*7" in r.stderr and "42" in fake.chat_requests()[1].last_user


LOCAL = {"GROK_CONTEXT_WINDOW": None, "GROK_PRICES": None}
OVERFLOW = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9568,
        "n_ctx": 8192,
    }
}


def test_an_overflow_after_one_long_answer_compacts_down_to_the_question(run, fake):
    fake.add(
        answer("long " * 1500),
        error(400, OVERFLOW),
        reply("SUMMARY: a long answer was given."),
        answer("fits now"),
    )
    r = run(input="tell me everything\nand now?\n", env=LOCAL)
    assert r.returncode == 0 and r.stdout.split()[-2:] == ["fits", "now"], r.stderr
    last = fake.chat_requests()[-1].messages
    assert len(last) == 2 and last[1]["content"].startswith("[Summary of the earlier conversation")
    assert last[1]["content"].endswith("[The request being worked on, verbatim]\nand now?")


def test_an_overflow_that_cannot_be_helped_quotes_the_servers_count(run, fake):
    fake.add(error(400, OVERFLOW))
    r = run("-p", "word " * 9000, env=LOCAL)
    assert r.returncode == 1
    assert r.stderr.endswith(
        "grok: 9568 tokens (the server's count) do not fit the server's context window "
        "(8192 tokens), even compacted as far as it goes: shorten the request, or give "
        "the server a larger window\n"
    )
