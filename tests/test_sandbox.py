"""--sandbox: commands really run under bubblewrap and under Landlock on this machine. What each
profile lets a command write, --sandbox-network off, write_file's refusal, a backend that is asked
for and missing (exit 1), and that without --sandbox nothing changes."""
import ctypes
import json
import os
import shutil
import socket
import struct
import subprocess
import sys

import pytest

from conftest import GROK, GROK_DETAILED
from fakeapi import answer, tools
from ptyrun import PROMPT, PtyProcess

DENIED = {"bwrap": "Read-only file system", "landlock": "Permission denied"}      # what a refused write says
REFUSED_TCP = {"bwrap": "ConnectionRefusedError", "landlock": "PermissionError"}  # no route out / TCP cut


def bwrap_problem():
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (.ci/run installs it: apt-get install bubblewrap)"
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], capture_output=True, text=True)
    return probe.returncode and "bwrap cannot run here: " + probe.stderr.strip()


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(444, None, 0, 1) if sys.platform == "linux" else -1


@pytest.fixture(params=["bwrap", "landlock"])
def backend(request):
    if request.param == "bwrap" and bwrap_problem():
        pytest.skip(bwrap_problem())
    if request.param == "landlock" and landlock_abi() < 4:
        pytest.skip("the kernel offers Landlock ABI %d; these tests need 4 (Linux 6.7)" % landlock_abi())
    return request.param


@pytest.fixture
def grok(run, tmp_path):
    """grok(*args, env=..., script=..., preexec_fn=...) -> CompletedProcess, in its own session;
    TMPDIR is tmp_path/tmp, so HOME (tmp_path/home) is outside both the tree and the temp dir."""
    (tmp_path / "tmp").mkdir()

    def start(*args, env=None, script=GROK, preexec_fn=None, input=None):
        overrides = {"TMPDIR": tmp_path / "tmp"}
        overrides.update(env or {})
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run([sys.executable, str(script)] + [str(a) for a in args], env=run.env(**overrides),
                              capture_output=True, text=True, timeout=60, start_new_session=True,
                              preexec_fn=preexec_fn, **stdin)
    return start


def tool_outputs(stdout):
    """Tool results in call order (tools running concurrently report as each finishes)."""
    uses = [e for e in map(json.loads, stdout.splitlines()) if e["type"] == "tool_use"]
    return [e["toolResult"]["output"] for e in sorted(uses, key=lambda e: e["toolCall"]["id"])]


def one_command(grok, fake, command, *flags, env=None):
    """A headless json run with -y in which the model runs `command`; (its output, stderr)."""
    fake.add(tools(("bash", {"command": command})), answer("done"))
    p = grok("-p", "go", "--format", "json", "-y", *flags, env=env)
    assert p.returncode == 0, p.stderr
    (out,) = tool_outputs(p.stdout)
    return out, p.stderr


WRITES = """(echo a > made.txt); echo tree=$?
(echo b > "$HOME/escaped.txt"); echo home=$?
(echo c > "$TMPDIR/t.txt"); echo tmp=$?
(echo d > /dev/null); echo null=$?"""


def test_workspace_writes_in_the_tree_and_the_temp_dir_only(grok, fake, backend, isolated_env, tmp_path):
    out, err = one_command(grok, fake, WRITES, "--sandbox", "workspace", env={"GROK_SANDBOX_BACKEND": backend})
    escaped = isolated_env.home / "escaped.txt"
    assert out == "tree=0\n/bin/bash: line 2: %s: %s\nhome=1\ntmp=0\nnull=0\n" % (escaped, DENIED[backend])
    assert (isolated_env.work / "made.txt").read_text() == "a\n"
    assert (tmp_path / "tmp" / "t.txt").read_text() == "c\n"
    assert not escaped.exists()
    assert err == "sandbox: workspace (%s)\n" % backend


def test_read_only_writes_only_in_a_temp_dir_of_its_own(grok, fake, backend, isolated_env, tmp_path):
    shared = tmp_path / "tmp"
    command = WRITES + '\n(echo e > %s/shared.txt); echo shared=$?\necho "$TMPDIR"' % shared
    out, err = one_command(grok, fake, command, "--sandbox", "read-only", env={"GROK_SANDBOX_BACKEND": backend})
    lines = out.splitlines()
    private = lines[-1]
    assert os.path.dirname(private) == str(shared) and os.path.basename(private).startswith("grok-")
    assert lines[:-1] == [
        "/bin/bash: line 1: made.txt: " + DENIED[backend], "tree=1",
        "/bin/bash: line 2: %s/escaped.txt: %s" % (isolated_env.home, DENIED[backend]), "home=1",
        "tmp=0", "null=0",
        "/bin/bash: line 5: %s/shared.txt: %s" % (shared, DENIED[backend]), "shared=1"]
    assert err == "sandbox: read-only (%s)\n" % backend
    assert list(isolated_env.work.iterdir()) == [] and not (isolated_env.home / "escaped.txt").exists()
    assert list(shared.iterdir()) == []         # the private temp dir is gone with the run


@pytest.fixture
def listener():
    """A loopback TCP server that nobody but the command under test would connect to."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.setblocking(False)
    yield server
    server.close()


def connects(server):
    try:
        server.accept()[0].close()
        return True
    except BlockingIOError:
        return False


def test_network_off_cuts_the_commands_tcp_but_not_grok_s_own(grok, fake, backend, listener):
    command = ("%s -c \"import socket; socket.create_connection(('127.0.0.1', %d), 5); print('connected')\" 2>&1 "
               "| tail -1" % (sys.executable, listener.getsockname()[1]))
    env = {"GROK_SANDBOX_BACKEND": backend}
    out, _ = one_command(grok, fake, command, "--sandbox", "workspace", env=env)
    assert out == "connected\n" and connects(listener)
    out, err = one_command(grok, fake, command, "--sandbox", "workspace", "--sandbox-network", "off", env=env)
    assert out.startswith(REFUSED_TCP[backend] + ": ") and not connects(listener)
    assert err == "sandbox: workspace (%s, no network)\n" % backend
    assert len(fake.chat_requests()) == 4       # grok itself still reached the model over loopback TCP


def test_write_file_outside_the_sandbox_is_refused_whatever_allows_it(grok, fake, isolated_env, tmp_path):
    outside = isolated_env.home / "x.txt"
    fake.add(tools(("write_file", {"path": str(outside), "content": "x"}), ("write_file", {"path": "in.txt",
                                                                                         "content": "y"})),
             answer("done"))
    p = grok("-p", "go", "--format", "json", "--allow", "**", "--sandbox", "workspace",
             env={"GROK_SANDBOX_BACKEND": "landlock"})
    assert p.returncode == 0, p.stderr
    assert tool_outputs(p.stdout) == [
        "error: the sandbox allows writes only in %s, %s, /dev/shm" % (tmp_path / "tmp", isolated_env.work),
        "wrote 1 bytes to %s" % (isolated_env.work / "in.txt")]
    assert not outside.exists() and (isolated_env.work / "in.txt").read_text() == "y"
    fake.add(tools(("write_file", {"path": "in.txt", "content": "z"})), answer("done"))
    p = grok("-p", "go", "--format", "json", "-y", "--sandbox", "read-only", env={"GROK_SANDBOX_BACKEND": "landlock"})
    (out,) = tool_outputs(p.stdout)
    assert out.startswith("error: the sandbox allows writes only in %s/grok-" % (tmp_path / "tmp"))
    assert (isolated_env.work / "in.txt").read_text() == "y"


def no_landlock():
    """A preexec_fn: a seccomp filter that answers ENOSYS to landlock_create_ruleset (444), as an old kernel does."""
    libc = ctypes.CDLL(None, use_errno=True)
    code = [(0x20, 0, 0, 0), (0x15, 0, 1, 444), (0x06, 0, 0, 0x00050000 | 38), (0x06, 0, 0, 0x7fff0000)]
    program = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *op) for op in code))
    fprog = struct.pack("=HxxxxxxQ", len(code), ctypes.addressof(program))
    assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, fprog, 0, 0) == 0     # NO_NEW_PRIVS; SECCOMP


def without_bwrap(tmp_path, fake_bwrap=None):
    """PATH with the commands grok's tests need but no bwrap, or a bwrap script that fails as under Docker."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if fake_bwrap:
        (bin_dir / "bwrap").write_text("#!/bin/sh\necho '%s' >&2\nexit 1\n" % fake_bwrap)
        (bin_dir / "bwrap").chmod(0o755)
    return str(bin_dir)


NO_BWRAP = "bubblewrap is not installed (apt-get install bubblewrap)"
NO_LANDLOCK = "the kernel has no Landlock (Linux 5.13+, landlock in the lsm= boot parameter)"


@pytest.mark.parametrize("forced, why", [
    ("bwrap", NO_BWRAP), ("landlock", NO_LANDLOCK), ("", NO_BWRAP + "; " + NO_LANDLOCK)])
def test_a_backend_asked_for_and_missing_is_exit_1_naming_it(grok, fake, tmp_path, forced, why):
    fake.add(tools(("bash", {"command": "touch ran"})), answer("done"))
    p = grok("-p", "go", "-y", "--sandbox", "workspace", preexec_fn=no_landlock,
             env={"GROK_SANDBOX_BACKEND": forced, "PATH": without_bwrap(tmp_path)})
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == "grok: --sandbox workspace: none works here: %s\n" % why
    assert fake.chat_requests() == [] and not (tmp_path / "work" / "ran").exists()


def test_a_bwrap_that_fails_here_is_passed_over_for_landlock_and_named_when_forced(grok, fake, tmp_path):
    path = without_bwrap(tmp_path, "bwrap: No permissions to create new namespace")
    p = grok("-p", "go", "--sandbox", "read-only", env={"GROK_SANDBOX_BACKEND": "bwrap", "PATH": path})
    assert (p.returncode, p.stderr) == (1, "grok: --sandbox read-only: none works here: bubblewrap fails here: "
                                           "bwrap: No permissions to create new namespace\n")
    fake.add(answer("fine"))
    p = grok("-p", "go", "--sandbox", "read-only", env={"PATH": path})
    assert (p.returncode, p.stdout, p.stderr) == (0, "fine\n", "sandbox: read-only (landlock)\n")


@pytest.mark.parametrize("args, env, message", [
    ((), {"GROK_SANDBOX": "strictest"}, "--sandbox/GROK_SANDBOX 'strictest': use workspace or read-only (or off, "
                                        "the default; --sandbox-network off needs one of the first two)"),
    (("--sandbox-network", "off"), {}, "--sandbox/GROK_SANDBOX 'off': use workspace or read-only (or off, "
                                       "the default; --sandbox-network off needs one of the first two)"),
    (("--sandbox", "workspace"), {"GROK_SANDBOX_BACKEND": "docker"},
     "GROK_SANDBOX_BACKEND must be bwrap or landlock, not 'docker'")])
def test_bad_sandbox_settings_are_user_errors(grok, fake, args, env, message):
    p = grok("-p", "go", *args, env=env)
    assert (p.returncode, p.stderr) == (1, "grok: %s\n" % message)
    assert fake.chat_requests() == []


def test_without_sandbox_nothing_changes_and_with_it_an_ordinary_command_runs_the_same(grok, fake, backend,
                                                                                        isolated_env):
    command = ("mkdir -p d && echo hi > d/f && mv d/f d/g && cat d/g && ls d && rm -r d && echo $TMPDIR && "
               "%s -c 'import multiprocessing as m; print(m.Semaphore(3).get_value())'" % sys.executable)
    plain, err = one_command(grok, fake, command)
    assert (plain, err) == ("hi\ng\n%s\n3\n" % (isolated_env.work.parent / "tmp"), "")
    boxed, err = one_command(grok, fake, command, "--sandbox", "workspace", env={"GROK_SANDBOX_BACKEND": backend})
    assert boxed == plain and err == "sandbox: workspace (%s)\n" % backend
    first = [r for r in fake.chat_requests() if r.last_user == "go"]
    assert first[0].json == first[1].json       # the model is told nothing different
    out, err = one_command(grok, fake, WRITES)
    assert out == "tree=0\nhome=0\ntmp=0\nnull=0\n" and err == ""        # off: writes anywhere, as before
    assert (isolated_env.home / "escaped.txt").read_text() == "b\n"


def test_the_approval_prompt_says_which_sandbox_runs_the_command(run, fake, tmp_path, isolated_env):
    fake.add(tools(("bash", {"command": "echo a > made.txt; echo b > $HOME/escaped.txt"})), answer("all done"))
    env = run.env(GROK_SANDBOX_BACKEND="landlock", TERM="xterm", TMPDIR=tmp_path / "work")
    with PtyProcess([sys.executable, str(GROK), "--sandbox", "workspace"], env, str(isolated_env.work)) as p:
        p.expect("sandbox: workspace \\(landlock\\)", plain=True)
        p.expect(PROMPT)
        p.send("make the files\r")
        p.expect(r"bash \(sandbox: workspace \(landlock\)\)\s+echo a > made.txt; echo b > \$HOME/escaped.txt\s+"
                 r"run it\? \[y\]es / \[N\]o / \[a\]lways: ", plain=True)
        p.send("y\r")
        p.expect("all done", plain=True)
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    assert "escaped.txt: Permission denied" in fake.chat_requests()[1].last_user
    assert (isolated_env.work / "made.txt").exists() and not (isolated_env.home / "escaped.txt").exists()


def test_grok_detailed_and_its_agent_mode_run_commands_in_the_sandbox(grok, fake, backend, isolated_env):
    fake.add(tools(("bash", {"command": WRITES})), answer("written"))
    p = grok("-y", "--sandbox", "workspace", script=GROK_DETAILED, input="go\n", env={"GROK_SANDBOX_BACKEND": backend})
    assert p.returncode == 0, p.stderr
    assert p.stderr == "sandbox: workspace (%s)\n" % backend
    assert "home=1" in fake.chat_requests()[1].last_user and not (isolated_env.home / "escaped.txt").exists()
    plan = [answer("# Goal\nWrite the files."), answer("# Plan\n1. write"), answer("# Execution prompt\nWrite."),
            tools(("bash", {"command": WRITES})), answer("Wrote what I could."),
            answer("Review: done.\n\nVERDICT: complete"), answer("# Report\nDone.")]
    fake.add(*plan)
    p = grok("--agent", "Write the files", "-y", "--sandbox", "workspace", script=GROK_DETAILED,
             env={"GROK_SANDBOX_BACKEND": backend})
    assert p.returncode == 0, p.stderr
    assert p.stderr == "sandbox: workspace (%s)\n" % backend
    results = [r.last_user for r in fake.chat_requests()[2:] if r.last_user.startswith("Tool results")]
    assert len(results) == 1 and "tree=0" in results[0] and "home=1" in results[0]
    assert not (isolated_env.home / "escaped.txt").exists()


def test_acp_sessions_run_commands_in_the_sandbox(run, fake, backend, isolated_env, tmp_path):
    fake.add(tools(("bash", {"command": WRITES})), answer("done"))
    env = run.env(GROK_SANDBOX_BACKEND=backend, TMPDIR=tmp_path / "work")
    proc = subprocess.Popen([sys.executable, str(GROK), "agent", "--always-approve", "--sandbox", "workspace",
                             "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True, text=True)
    try:
        def call(i, method, params):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
            proc.stdin.flush()
            seen = []
            while True:
                seen.append(json.loads(proc.stdout.readline()))
                if seen[-1].get("id") == i:
                    return seen
        call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        sid = call(2, "session/new", {"cwd": str(isolated_env.work), "mcpServers": []})[-1]["result"]["sessionId"]
        seen = call(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "write"}]})
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    done = [m["params"]["update"] for m in seen if m.get("method") == "session/update"
            and m["params"]["update"].get("status") == "completed"]
    assert "home=1" in done[0]["content"][-1]["content"]["text"]
    assert "sandbox: workspace (%s)" % backend in proc.stderr.read()
    assert not (isolated_env.home / "escaped.txt").exists()
