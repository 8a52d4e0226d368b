"""Real clients of xAI's `grok` CLI, unchanged: grok spawned the way pi-grok-build spawns it (its exact argv,
stdin a pipe it never closes or a socket, a SIGKILL to abort), and the output formats of xAI's CLI 1.0."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import GROK
from fakeapi import answer, reply, tools
from test_acp import Acp

UUID = "0f8fad5b-d9cb-469f-a165-70867728950e"
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 170,
         "prompt_tokens_details": {"cached_tokens": 100}, "completion_tokens_details": {"reasoning_tokens": 7}}


def pi_argv(prompt, **o):
    """buildGrokArgs() of pi-grok-build (src/grok-runner.ts @ f8a948f) with its provider's defaults (always
    approve, no subagents, no plan, one turn); options by their flag, in its order (flags: a true value)."""
    o = dict({"--model": "grok-build", "--always-approve": 1, "--max-turns": "1", "--no-subagents": 1,
              "--no-plan": 1}, **o)
    args = ["-p", prompt, "--output-format", "streaming-json"]
    for flag in ("--model", "--session-id", "--resume", "--continue", "--cwd", "--always-approve", "--effort",
                 "--max-turns", "--reasoning-effort", "--check", "--verbatim", "--disable-web-search",
                 "--no-subagents", "--no-plan", "--no-memory", "--experimental-memory", "--permission-mode",
                 "--rules", "--system-prompt-override", "--tools", "--disallowed-tools", "--allow", "--deny",
                 "--sandbox", "--restore-code", "--oauth", "--prompt-file", "--prompt-json"):
        value = o.get(flag)
        if isinstance(value, list):
            args += [a for rule in value for a in (flag, rule)]
        elif isinstance(value, str):
            args += [flag, value]
        elif value:
            args.append(flag)
    return args


def spawn(run, args, stdin=subprocess.DEVNULL, env=None, cwd=None):
    return subprocess.Popen([sys.executable, str(GROK)] + list(args), stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=run.env(**(env or {})), cwd=cwd, start_new_session=True)


def finish(proc, timeout=30):
    """(exit code, stdout, stderr) once grok ends by itself; its stdin stays as it is (communicate() closes it)."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("grok did not finish in %ds; stderr: %r" % (timeout, proc.stderr.read()[-2000:]))
    return proc.returncode, proc.stdout.read().decode(), proc.stderr.read().decode()


def events(out):
    return [json.loads(line) for line in out.splitlines()]


def group_gone(pgid, timeout=15):
    """Awaits the end of every process in the group (zombies count as ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                alive.append(pid)
        if not alive:
            return True
        time.sleep(0.05)
    with_suppress_kill(pgid)
    return False


def with_suppress_kill(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def wait_for_file(path, proc, timeout=20):
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    return int(path.read_text().split()[0])


# ------------------------------------------------------------------ pi-grok-build's JSONL mode

@pytest.mark.parametrize("stdin", ["pipe left open", "socket"])
def test_every_flag_pi_can_send_is_accepted_and_stdin_is_never_read(run, fake, isolated_env, tmp_path, stdin):
    """pi's full argv: the honoured flags reach the request, the others are named once on stderr; stdin (a
    pipe the parent never closes, or a socket as Node's "pipe") is not read and does not hold the run up."""
    (tmp_path / "prompt.txt").write_text("FROM-THE-FILE")
    fake.add(answer("PI-OK", reasoning="thinking...", usage=USAGE))
    flags = {"--session-id": UUID, "--cwd": str(tmp_path), "--effort": "high", "--reasoning-effort": "xhigh",
             "--check": 1, "--verbatim": 1, "--disable-web-search": 1, "--no-memory": 1, "--experimental-memory": 1,
             "--permission-mode": "acceptEdits", "--rules": "Never delete files.",
             "--system-prompt-override": "You are a careful reviewer.",
             "--tools": "run_terminal_cmd,read_file,list_dir,grep", "--disallowed-tools": "read_file",
             "--allow": ["Bash(npm*)"], "--deny": ["Bash(rm*)"], "--restore-code": 1, "--oauth": 1,
             "--prompt-file": str(tmp_path / "prompt.txt"), "--prompt-json": '[{"type": "text", "text": "FROM-JSON"}]'}
    argv = pi_argv("hello from pi", **flags)
    if stdin == "socket":
        ours, theirs = socket.socketpair()
        proc = spawn(run, argv, stdin=theirs)
        theirs.close()
    else:
        proc = spawn(run, argv, stdin=subprocess.PIPE)
    try:
        code, out, err = finish(proc)
    finally:
        ours.close() if stdin == "socket" else proc.stdin.close()
    assert code == 0, err
    got = events(out)
    assert "".join(e["data"] for e in got if e["type"] == "text") == "PI-OK"
    assert got[-1]["type"] == "end" and got[-1]["sessionId"] == UUID and got[-1]["stopReason"] == "end_turn"
    assert err.count("not supported here") == 1
    for name in ("--check", "--experimental-memory", "--restore-code", "--oauth", "--permission-mode acceptEdits",
                 "tool grep"):
        assert name in err
    req = fake.chat_requests()[0].json
    assert req["model"] == "grok-4.3" and req["reasoning_effort"] == "xhigh"       # the last effort given
    assert req["messages"][-1]["content"] == "hello from pi\n\nFROM-THE-FILE\n\nFROM-JSON"
    system = req["messages"][0]["content"]
    assert system.startswith("You are a careful reviewer.") and system.endswith("Never delete files.")
    assert "RUNTIME" not in system and "Tools first" not in system       # the override replaces those
    offered = [s["properties"]["tool"]["enum"][0] for s in
               req["response_format"]["json_schema"]["schema"]["properties"]["tool_calls"]["items"]["anyOf"]]
    assert offered == ["bash", "list_files"]
    assert (isolated_env.home / ".local/share/grok-agent/sessions" / (UUID + ".jsonl")).exists()


def test_session_id_makes_a_new_session_with_that_uuid_and_only_that(run, fake, isolated_env):
    fake.add(answer("one"), answer("two"))
    r = run("-p", "hi", "-s", "not-a-uuid", "--output-format", "streaming-json")
    assert r.returncode == 1 and "--session-id must be a UUID" in r.stderr and fake.chat_requests() == []
    assert events(r.stdout) == [{"type": "error", "message": "--session-id must be a UUID (got 'not-a-uuid')"}]
    r = run("-p", "hi", "--session-id", UUID, "--output-format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["sessionId"] == UUID, r.stderr
    r = run("-p", "again", "--session-id", UUID)
    assert r.returncode == 1 and "session %s is already in use" % UUID in r.stderr
    r = run("-p", "again", "--session-id", UUID, "--resume", UUID)
    assert r.returncode == 1 and "not allowed with" in r.stderr
    r = run("-p", "and again", "-r", UUID, "--output-format", "plain")
    assert (r.returncode, r.stdout) == (0, "two\n"), r.stderr
    assert [m["content"] for m in fake.chat_requests()[1].messages[1:]] == [
        "hi", json.dumps({"tool_calls": [], "response": "one", "done": True}), "and again"]


# ------------------------------------------------------------------ stdin

def test_stdin_the_parent_keeps_open_never_holds_up_a_run(run, fake, tmp_path):
    """Our own formats read piped text below the prompt; a pipe the parent holds open is read only
    once it has data, within a second, so `-p` goes on; a pipeline's slow writer is waited for."""
    fake.add(answer("silent"), answer("spoke"), answer("piped"))
    proc = spawn(run, ["-p", "question"], stdin=subprocess.PIPE)
    try:
        code, out, err = finish(proc)       # stdin stays open, silent
    finally:
        proc.stdin.close()
    assert (code, out) == (0, "silent\n"), err
    proc = spawn(run, ["-p", "question", "--format", "json"], stdin=subprocess.PIPE)
    proc.stdin.write(b"some context")
    proc.stdin.close()
    code, out, err = finish(proc)
    assert code == 0 and [e["text"] for e in events(out) if e["type"] == "text"] == ["spoke"], err
    slow = subprocess.run(["sh", "-c", '(sleep 1.5; echo late data) | "$0" "$1" -p question', sys.executable,
                           str(GROK)], env=run.env(), capture_output=True, text=True, timeout=60,
                          start_new_session=True)
    assert (slow.returncode, slow.stdout) == (0, "piped\n"), slow.stderr
    asked = [r.last_user for r in fake.chat_requests()]
    assert asked == ["question", "question\n\nsome context", "question\n\nlate data\n"]


# ------------------------------------------------------------------ tools die with grok

COMMAND = "echo $$ > pid; (sleep 60; echo LEFT > bg-left) & sleep 60; echo LEFT > left"


def test_sigkill_of_headless_grok_kills_its_commands(run, fake, isolated_env):
    """pi-grok-build aborts with SIGKILL: the command and its background child die with grok."""
    fake.add(tools(("bash", {"command": COMMAND})), answer("never"))
    proc = spawn(run, pi_argv("go"))
    try:
        pgid = wait_for_file(isolated_env.work / "pid", proc)
        proc.kill()
        proc.wait()
        assert group_gone(pgid), "the command outlived grok"
    finally:
        proc.kill()
        proc.communicate()
    assert not (isolated_env.work / "left").exists() and not (isolated_env.work / "bg-left").exists()


def test_sigkill_of_acp_grok_kills_its_commands(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": COMMAND})), answer("never"))
    client = Acp(run, "agent", "--no-leader", "--always-approve", "stdio")
    try:
        client.init()
        sid = client.new(isolated_env.work)
        client.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        pgid = wait_for_file(isolated_env.work / "pid", client.proc)
        client.proc.kill()
        client.proc.wait()
        assert group_gone(pgid), "the command outlived grok"
    finally:
        client.kill()


def test_background_commands_end_with_the_chat(run, fake, isolated_env):
    """A command left in the background ends when grok does, also when grok ends normally."""
    fake.add(tools(("bash", {"command": "sleep 60 >/dev/null 2>&1 & echo $! > pid"})), answer("done"))
    r = run("-y", input="start it\n")
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    pid = int((isolated_env.work / "pid").read_text())
    assert group_gone(os.getpgid(pid) if os.path.exists("/proc/%d" % pid) else pid)


# ------------------------------------------------------------------ xAI's CLI 1.0 output formats

def test_streaming_json_has_xai_clis_tool_call_usage_and_end_events(run, fake, isolated_env):
    """The event shapes xAI's CLI 1.0.41 prints (captured from it against a loopback server)."""
    (isolated_env.work / "f.txt").write_text("file content\n")
    fake.add(tools(("bash", {"command": "echo hello-tool"}), ("read_file", {"path": "f.txt"}),
                   reasoning="Let me look.", usage=USAGE),
             answer("Done: hello-tool", usage=USAGE))
    r = run(*pi_argv("run it"))
    assert r.returncode == 0, r.stderr
    got = events(r.stdout)
    seen = [e["type"] for i, e in enumerate(got) if e["type"] != "text" or got[i - 1]["type"] != "text"]
    assert seen == ["thought", "tool_call", "tool_call", "tool_call_update", "tool_call_update", "usage", "text",
                    "usage", "end"]
    assert got[1] == {"type": "tool_call", "toolCallId": "call_1_1", "title": "bash: echo hello-tool",
                      "kind": "execute", "status": "in_progress", "toolName": "bash",
                      "rawInput": {"command": "echo hello-tool"}, "content": [], "locations": []}
    assert got[2]["locations"] == [{"path": str(isolated_env.work / "f.txt")}] and got[2]["kind"] == "read"
    updates = {e["toolCallId"]: e for e in got[3:5]}
    assert updates["call_1_1"] == {"type": "tool_call_update", "toolCallId": "call_1_1", "status": "completed",
                                   "content": [{"type": "content", "content": {"type": "text",
                                                                               "text": "hello-tool\n"}}],
                                   "rawOutput": None, "locations": []}
    spend = {"input_tokens": 20, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0,
             "output_tokens": 30, "reasoning_tokens": 7, "total_tokens": 170}
    assert got[5] == {"type": "usage", "usage": spend}
    end = got[-1]
    assert list(end) == ["type", "stopReason", "sessionId", "requestId", "usage", "num_turns", "modelUsage",
                         "total_cost_usd", "total_cost_usd_ticks"]
    assert end["usage"] == {k: 2 * v for k, v in spend.items()} and end["num_turns"] == 2
    assert end["modelUsage"]["grok-4.3"]["modelCalls"] == 2
    assert end["total_cost_usd_ticks"] == round(end["total_cost_usd"] * 1e10) > 0


def test_output_format_json_is_one_object_and_plain_is_the_text(run, fake):
    fake.add(answer("The answer is 42.", reasoning="Hmm.", usage=USAGE), answer("plain answer"))
    r = run("-p", "q", "--output-format", "json", env={"GROK_PRICES": None})       # no price: no cost fields
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert r.stdout.startswith('{\n  "text": "The answer is 42.",\n')       # indented, as xAI's CLI prints it
    assert list(obj) == ["text", "stopReason", "sessionId", "requestId", "thought", "usage", "num_turns",
                         "modelUsage"]
    assert obj["thought"] == "Hmm." and obj["stopReason"] == "end_turn" and obj["requestId"] == "chatcmpl-1"
    assert obj["modelUsage"] == {"grok-4.3": {"inputTokens": 20, "outputTokens": 30, "cacheReadInputTokens": 100,
                                              "cacheCreationInputTokens": 0, "modelCalls": 1}}
    r = run("-p", "q", "--output-format", "plain")
    assert (r.returncode, r.stdout) == (0, "plain answer\n")
    r = run("-p", "q", "--output-format", "json", "--bogus")
    assert r.returncode == 1 and json.loads(r.stdout)["type"] == "error" and "--bogus" in r.stdout


# ------------------------------------------------------------------ permissions and tools

def test_deny_wins_over_allow_and_always_approve(run, fake, isolated_env):
    fake.add(tools(("bash", {"command": "echo fine; rm -f keep.txt"}), ("write_file", {"path": "out/x.md",
                                                                                       "content": "x"})),
             answer("stopped"))
    (isolated_env.work / "keep.txt").write_text("keep")
    r = run("-p", "go", "-y", "--deny", "Bash(rm*)", "--deny", "Write(out/**)", "--allow", "Bash",
            "--output-format", "streaming-json")
    assert r.returncode == 0, r.stderr
    failed = [e for e in events(r.stdout) if e["type"] == "tool_call_update"]
    assert [e["status"] for e in failed] == ["failed", "failed"]
    assert (isolated_env.work / "keep.txt").exists() and not (isolated_env.work / "out").exists()
    fake.add(tools(("bash", {"command": "npm test"})), answer("ran"))
    r = run("-p", "go", "--allow", "Bash(npm:*)")
    assert r.returncode == 0 and "ran" in r.stdout, r.stderr
