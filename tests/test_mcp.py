"""MCP servers: their tools offered to the model and run through the engine's approval, from each
source (~/.grok/config.toml, --mcp-config, a project's .mcp.json once approved, ACP session/new),
against the real MCP server of the `mcp` package and, for the faults, tests/fakemcp.py."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GROK, GROK_DETAILED, TEST_KEY
from fakeapi import answer, tools
from ptyrun import PROMPT, PtyProcess

FAKE = str(Path(__file__).resolve().parent / "fakemcp.py")
REAL_SERVER = '''
from mcp.server.mcpserver import MCPServer

app = MCPServer("demo")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    app.run()
'''


@pytest.fixture
def real(tmp_path):
    """The command of a real stdio MCP server (the `mcp` package's MCPServer): one tool, add."""
    script = tmp_path / "real_server.py"
    script.write_text(REAL_SERVER)
    return {"command": sys.executable, "args": [str(script)]}


def mcp_json(path, **servers):
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def fake_server(tmp_path, *args, env=None):
    return {
        "command": sys.executable,
        "args": [FAKE] + list(args),
        "env": dict({"FAKEMCP_LOG": str(tmp_path / "fakemcp.log")}, **(env or {})),
    }


def received(tmp_path):
    """What the fake MCP server was sent, message by message."""
    return [json.loads(line) for line in (tmp_path / "fakemcp.log").read_text().splitlines()]


def events(result):
    return [json.loads(line) for line in result.stdout.splitlines()]


def tool_use(result):
    return next(e for e in events(result) if e["type"] == "tool_use")


def schema_tools(request):
    """{tool name: its args schema} as a chat request's response_format offers them."""
    calls = request.json["response_format"]["json_schema"]["schema"]["properties"]["tool_calls"][
        "items"
    ]["anyOf"]
    return {c["properties"]["tool"]["enum"][0]: c["properties"]["args"] for c in calls}


def test_mcp_config_real_server_tool_runs_headless_when_allowed(run, fake, tmp_path, real):
    config = mcp_json(tmp_path / "servers.json", demo=real)
    fake.add(tools(("mcp__demo__add", {"a": 2, "b": 40})), answer("42"))
    r = run(
        "-p", "add 2 and 40", "--mcp-config", config, "--format", "json", "--allow", "mcp__demo__*"
    )
    assert r.returncode == 0, r.stderr
    assert "MCP server demo: 1 tool\n" in r.stderr
    use = tool_use(r)
    assert use["toolCall"] == {
        "server": "demo",
        "id": "call_1_1",
        "name": "mcp__demo__add",
        "args": {"a": 2, "b": 40},
    }
    assert use["toolResult"]["success"] is True and use["toolResult"]["output"] == "42"
    first, second = fake.chat_requests()
    args = schema_tools(first)["mcp__demo__add"]
    assert args["type"] == "object" and args["required"] == ["a", "b"]
    assert args["properties"]["a"]["type"] == "integer"
    system = first.messages[0]["content"]
    assert (
        '- mcp__demo__add {"a": "...", "b": "..."}: (MCP server demo) Add two integers.' in system
    )
    assert second.last_user.startswith('Tool results:\n\n[1] mcp__demo__add {"a": 2, "b": 40}\n42')


def test_headless_denies_an_mcp_tool_that_no_allow_pattern_matches(run, fake, tmp_path, real):
    config = mcp_json(tmp_path / "servers.json", demo=real)
    fake.add(tools(("mcp__demo__add", {"a": 1, "b": 1})), answer("never"))
    r = run("-p", "add", "--mcp-config", config, "--allow", "mcp__other__*")
    assert r.returncode == 3
    assert 'Tool `mcp__demo__add` denied: MCP tool not in allowlist: {"a": 1, "b": 1}' in r.stderr
    assert len(fake.chat_requests()) == 1


def imports(run, *args):
    """The modules a run imports (python -X importtime)."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", str(GROK)] + list(args),
        env=run.env(),
        capture_output=True,
        text=True,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    return {
        line.split("|")[-1].strip()
        for line in r.stderr.splitlines()
        if line.startswith("import time:")
    }


def test_config_toml_servers_start_and_their_tool_runs_and_without_them_nothing_is_imported(
    run, fake, tmp_path, real, isolated_env
):
    grok_dir = isolated_env.home / ".grok"
    grok_dir.mkdir()
    (grok_dir / "config.toml").write_text('model = "grok-4.3"\n')
    fake.add(answer("hi"))
    assert not {"tomllib", "hashlib", "subprocess"} & imports(run, "-p", "hi")
    (grok_dir / "config.toml").write_text(
        '[mcp_servers.demo]\ncommand = %s\nargs = %s\n\n'
        '[mcp_servers.off]\ncommand = "nope"\nenabled = false\n\n'
        '[mcp_servers.remote]\nurl = "https://mcp.example.com/mcp"\n'
        % (json.dumps(real["command"]), json.dumps(real["args"]))
    )
    fake.add(tools(("mcp__demo__add", {"a": 20, "b": 22})), answer("42"))
    r = run("-p", "add", "-y", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert tool_use(r)["toolResult"]["output"] == "42"
    assert "config.toml: MCP server remote skipped: only stdio servers" in r.stderr
    assert "MCP server off" not in r.stderr
    assert sorted(n for n in schema_tools(fake.chat_requests()[1]) if n.startswith("mcp__")) == [
        "mcp__demo__add"
    ]


def test_project_mcp_json_headless_only_with_y(run, fake, real, isolated_env):
    mcp_json(isolated_env.work / ".mcp.json", proj=real)
    fake.add(answer("no tools"), answer("with tools"))
    r = run("-p", "hi")
    assert r.returncode == 0
    assert ".mcp.json (its MCP servers) is not used: pass -y to use it" in r.stderr
    assert "mcp__proj__add" not in schema_tools(fake.chat_requests()[0])
    r = run("-p", "hi", "-y")
    assert r.returncode == 0 and "MCP server proj: 1 tool" in r.stderr
    assert "mcp__proj__add" in schema_tools(fake.chat_requests()[1])


def test_a_nested_too_deep_mcp_json_or_config_is_not_used_and_not_an_internal_error(
    run, fake, isolated_env, tmp_path
):
    deep = "[" * 100000 + "]" * 100000
    (isolated_env.work / ".mcp.json").write_text(deep)
    fake.add(answer("went on"))
    r = run("-p", "hi", "-y")
    assert (r.returncode, r.stdout) == (0, "went on\n"), r.stderr
    assert ".mcp.json is not used: maximum recursion depth exceeded" in r.stderr
    (tmp_path / "deep.json").write_text(deep)
    r = run("-p", "hi", "--mcp-config", tmp_path / "deep.json")
    assert r.returncode == 1
    assert "--mcp-config %s: maximum recursion" % (tmp_path / "deep.json") in r.stderr
    (isolated_env.home / ".grok").mkdir(exist_ok=True)
    (isolated_env.home / ".grok" / "config.toml").write_text("mcp_servers = " + deep)
    fake.add(answer("went on"))
    r = run("-p", "hi")
    assert (r.returncode, r.stdout) == (0, "went on\n"), r.stderr
    assert "config.toml: [mcp_servers] skipped: maximum recursion depth exceeded" in r.stderr


def repl(run, tmp_path, *args, script=GROK):
    return PtyProcess(
        [sys.executable, str(script)] + list(args),
        run.env(GROK_DATA_DIR=tmp_path / "data", TERM="xterm"),
        tmp_path / "work",
    )


def test_project_mcp_json_is_asked_for_once_in_the_repl_and_remembered_for_its_content(
    run, fake, tmp_path, real, isolated_env
):
    mcp_json(isolated_env.work / ".mcp.json", proj=real)
    fake.add(tools(("mcp__proj__add", {"a": 3, "b": 4})), answer("seven"))
    with repl(run, tmp_path) as p:
        p.expect(
            r"starts MCP servers, as you:\s+proj: \S+python\S* \S+real_server.py\s+"
            r"use them\? \[y/N\] "
        )
        p.send("y\n")
        p.expect(PROMPT)
        p.send("add\n")
        p.expect(
            r"run it\? \[y\]es"
        )  # the call is approved like bash, showing server, tool, arguments
        assert "MCP server proj, tool add" in p.output and '"a": 3' in p.output
        p.send("y\n")
        p.expect("seven")
        p.expect(PROMPT)
        p.send("/mcp\n")
        p.expect(r"proj: 1 tool\s+mcp__proj__add: \(MCP server proj\) Add two integers.")
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    assert fake.chat_requests()[1].last_user.endswith("\n7")
    with repl(run, tmp_path, script=GROK_DETAILED) as p:  # the same content: not asked again
        p.expect(PROMPT)
        assert "use them?" not in p.output and "MCP server proj: 1 tool" in p.output
        p.send("/mcp\n")
        p.expect(r"mcp__proj__add")
        p.expect(PROMPT)
        p.send("/tools\n")
        p.expect(
            r"mcp__proj__add +\{\"a\": \"...\", \"b\": \"...\"\}: "
            r"\(MCP server proj\) Add two integers. \[asks first\]"
        )
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    mcp_json(isolated_env.work / ".mcp.json", proj=real, other=real)  # changed: asked again
    with repl(run, tmp_path) as p:
        p.expect(r"use them\? \[y/N\] ")
        p.send("n\n")
        p.expect(PROMPT)
        p.send("/mcp\n")
        p.expect("no MCP servers")
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0


def test_server_gets_a_short_safe_environment_never_our_key_and_results_are_scrubbed(
    run, fake, tmp_path
):
    config = mcp_json(tmp_path / "servers.json", f=fake_server(tmp_path, env={"GIVEN": "yes"}))
    fake.add(
        tools(("mcp__f__env", {}), ("mcp__f__echo", {"text": "token ghp_" + "a" * 36})),
        answer("ok"),
    )
    r = run(
        "-p",
        "env",
        "--mcp-config",
        config,
        "-y",
        "--format",
        "json",
        env={"SECRET_OF_OURS": "s3cret", "XAI_API_KEY": TEST_KEY},
    )
    assert r.returncode == 0, r.stderr
    uses = sorted((e for e in events(r) if e["type"] == "tool_use"), key=lambda e: e["toolCall"]["id"])
    env = json.loads(uses[0]["toolResult"]["output"])      # (events come as calls finish)
    assert env["GIVEN"] == "yes" and env["PATH"] and env["HOME"]
    assert not {"GROK_API_KEY", "XAI_API_KEY", "SECRET_OF_OURS", "GROK_BASE_URL"} & set(env)
    assert uses[1]["toolResult"]["output"] == "token [REDACTED_GH_TOKEN]"
    assert TEST_KEY not in r.stdout + r.stderr


def faulty(run, fake, tmp_path, tool, *server_args, env=None):
    """One call of the fake server's `tool`, then an answer; the tool_use event and the run."""
    config = mcp_json(tmp_path / "servers.json", f=fake_server(tmp_path, *server_args))
    fake.add(tools(("mcp__f__" + tool, {})), answer("went on"))
    r = run("-p", "go", "--mcp-config", config, "-y", "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    return (tool_use(r)["toolResult"] if tool else None), r


def test_a_server_hanging_at_initialize_fails_at_its_startup_timeout_and_the_run_goes_on(
    run, fake, tmp_path
):
    _, r = faulty(run, fake, tmp_path, "", "hang", env={"MCP_TIMEOUT": "300"})
    assert (
        "MCP server f: failed: no answer to initialize within 0.3s (its stderr: fakemcp: started)"
        in r.stderr
    )
    assert [e["text"] for e in events(r) if e["type"] == "text"] == ["went on"]
    assert not [n for n in schema_tools(fake.chat_requests()[0]) if n.startswith("mcp__")]


@pytest.mark.parametrize("mode, why", [
    ("die", "the server closed its output (its stderr: fakemcp: started "
            "| fatal: the fake exploded)"),
    ("garbage", "the server wrote what is not a JSON-RPC message of "
                "at most 16 MB: b'this is not json\\n' (its stderr: fakemcp: started)"),
])
def test_a_server_dying_or_answering_garbage_is_a_failed_tool_with_its_stderr(
        run, fake, tmp_path, mode, why):
    result, _ = faulty(run, fake, tmp_path, mode)
    assert result["success"] is False
    assert result["output"] == "error: MCP server f: " + why


def test_a_10_mb_result_is_capped_as_bash_output_is(run, fake, tmp_path):
    result, _ = faulty(run, fake, tmp_path, "big")
    assert result["success"] is True
    out = result["output"]
    assert (
        out
        == "x" * 30000
        + "\n[... %d characters omitted: output truncated ...]\n" % ((10 << 20) - 35000)
        + "x" * 5000
    )


def test_a_call_never_answered_fails_at_the_tool_timeout_and_is_cancelled(run, fake, tmp_path):
    result, _ = faulty(run, fake, tmp_path, "silent", env={"MCP_TOOL_TIMEOUT": "300"})
    assert result["success"] is False
    assert result["output"] == (
        "error: MCP server f: no answer to tools/call within 0.3s " "(its stderr: fakemcp: started)"
    )
    cancelled = [m for m in received(tmp_path) if m.get("method") == "notifications/cancelled"]
    call_id = next(m["id"] for m in received(tmp_path) if m.get("method") == "tools/call")
    assert cancelled == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call_id, "reason": "no answer to tools/call within 0.3s"},
        }
    ]


def test_handshake_pings_pages_errors_and_a_changed_tool_list(run, fake, tmp_path):
    config = mcp_json(tmp_path / "servers.json", f=fake_server(tmp_path))
    fake.add(
        tools(("mcp__f__ping", {})),
        tools(("mcp__f__echo", {"text": "bad", "fail": True})),
        tools(("mcp__f__echo", {"text": "with an image"})),
        tools(("mcp__f__grow", {})),
        tools(("mcp__f__extra", {})),
        answer("done"),
    )
    r = run("-p", "go", "--mcp-config", config, "-y", "--format", "json")
    assert r.returncode == 0, r.stderr
    sent = received(tmp_path)
    assert (
        sent[0]["method"] == "initialize" and sent[0]["params"]["protocolVersion"] == "2025-11-25"
    )
    assert sent[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert {"jsonrpc": "2.0", "id": "p1", "result": {}} in sent
    assert {
        "jsonrpc": "2.0",
        "id": "r1",
        "error": {"code": -32601, "message": "roots/list"},
    } in sent
    outputs = [
        (e["toolResult"]["success"], e["toolResult"]["output"])
        for e in events(r)
        if e["type"] == "tool_use"
    ]
    assert outputs == [
        (True, "pong: {}"),
        (False, "bad"),
        (True, "with an image\n[image content]"),
        (True, "grown"),
        (True, "extra ran"),
    ]
    offered = [
        sorted(n for n in schema_tools(q) if n.startswith("mcp__")) for q in fake.chat_requests()
    ]
    assert (
        "mcp__f__silent" in offered[0] and "mcp__f__extra" not in offered[3]
    )  # both pages of tools/list
    assert "mcp__f__extra" in offered[4]


def test_a_nameless_tool_or_a_page_without_a_list_is_skipped_without_a_traceback(
    run, fake, tmp_path
):
    config = mcp_json(tmp_path / "servers.json", f=fake_server(tmp_path, "odd-list"))
    fake.add(answer("done"))
    r = run("-p", "go", "--mcp-config", config, "-y")
    assert (r.returncode, r.stdout) == (0, "done\n"), r.stderr
    assert "MCP server f: 1 tool\n" in r.stderr and "Traceback" not in r.stderr
    assert [n for n in schema_tools(fake.chat_requests()[0]) if n.startswith("mcp__")] == [
        "mcp__f__echo"
    ]


def test_bad_mcp_config_file_is_a_user_error(run, tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    r = run("-p", "x", "--mcp-config", tmp_path / "bad.json")
    assert (
        r.returncode == 1
        and "grok: --mcp-config %s: Expecting property name" % (tmp_path / "bad.json") in r.stderr
    )
    r = run("-p", "x", "--mcp-config", tmp_path / "missing.json")
    assert r.returncode == 1 and "missing.json: No such file or directory" in r.stderr
    assert "Traceback" not in r.stderr


def zed_stdio_server(name, spec, env):
    """The stdio MCP server of spec as Zed's ACP SDK passes it in session/new."""
    from acp.schema import EnvVariable, McpServerStdio

    variables = [EnvVariable(name=k, value=v) for k, v in env.items()]
    return McpServerStdio(name=name, command=spec["command"], args=spec["args"], env=variables)


def test_acp_session_new_passes_a_stdio_server_with_zeds_sdk(run, fake, tmp_path, real):
    import acp
    from acp.schema import AllowedOutcome, RequestPermissionResponse

    class Client:
        def __init__(self):
            self.updates, self.asked = [], []

        async def request_permission(self, session_id, tool_call, options, **kw):
            self.asked.append(tool_call)
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id="allow_once")
            )

        async def session_update(self, session_id, update, **kw):
            self.updates.append(update)

    fake.add(tools(("mcp__demo__add", {"a": 40, "b": 2})), answer("forty-two"))
    client = Client()

    async def main():
        async with acp.spawn_agent_process(
            client, "setsid", sys.executable, str(GROK), "--acp", env=run.env(), cwd=str(tmp_path)
        ) as (conn, proc):
            await conn.initialize(protocol_version=1)
            server = zed_stdio_server("demo", real, {"X": "1"})
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[server])
            done = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("add")])
            return done.stop_reason

    assert asyncio.run(asyncio.wait_for(main(), 60)) == "end_turn"
    assert [c.title for c in client.asked] == ['mcp__demo__add: {"a": 40, "b": 2}']
    finished = [u for u in client.updates if getattr(u, "status", None) == "completed"]
    assert [u.content[0].content.text for u in finished] == ["42"]
    assert fake.chat_requests()[1].last_user.endswith("\n42")


def test_acp_session_cancel_during_an_mcp_call_tells_the_server(run, fake, tmp_path):
    import acp

    class Client:
        def __init__(self):
            self.running = asyncio.Event()

        async def session_update(self, session_id, update, **kw):
            if getattr(update, "status", None) == "in_progress":
                self.running.set()

    fake.add(tools(("mcp__f__silent", {})))
    client, spec = Client(), fake_server(tmp_path)

    async def main():
        async with acp.spawn_agent_process(
            client,
            "setsid",
            sys.executable,
            str(GROK),
            "--acp",
            "-y",
            env=run.env(),
            cwd=str(tmp_path),
        ) as (conn, proc):
            await conn.initialize(protocol_version=1)
            server = zed_stdio_server("f", spec, spec["env"])
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[server])
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[acp.text_block("wait")])
            )
            await client.running.wait()
            while not any(m.get("method") == "tools/call" for m in received(tmp_path)):
                await asyncio.sleep(0.01)       # until the call has reached the server
            await conn.cancel(session_id=session.session_id)
            stop_reason = (await prompt).stop_reason
            while not any(m.get("method") == "notifications/cancelled" for m in received(tmp_path)):
                await asyncio.sleep(0.01)       # until the server has read it
            return stop_reason

    assert asyncio.run(asyncio.wait_for(main(), 60)) == "cancelled"
    call_id = next(m["id"] for m in received(tmp_path) if m.get("method") == "tools/call")
    assert {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": call_id, "reason": "cancelled by the user"},
    } in received(tmp_path)


def test_an_approval_planted_in_a_data_dir_others_can_write_is_not_taken(
    run, fake, tmp_path, real, isolated_env
):
    import hashlib

    path = mcp_json(isolated_env.work / ".mcp.json", proj=real)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    mark = "%s %s\n" % (hashlib.sha256(path.read_bytes()).hexdigest(), os.path.realpath(str(path)))
    (data / "mcp-approved").write_text(mark)
    data.chmod(0o777)       # anybody could have written that mark
    with repl(run, tmp_path) as p:
        p.expect(r"use them\? \[y/N\] ")
        p.send("n\n")
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    assert (data / "mcp-approved").read_text() == mark
