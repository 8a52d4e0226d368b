"""--sandbox: commands really run under bubblewrap and under Landlock on this machine. What each
profile lets a command write, --sandbox-network off, write_file's refusal, a backend that is asked
for and missing (exit 1), every front end, and that without --sandbox nothing changes."""
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

DENIED = {"bwrap": "Read-only file system", "landlock": "Permission denied"}    # a refused write
REFUSED_TCP = {"bwrap": "ConnectionRefusedError", "landlock": "PermissionError"}
LIBC = ctypes.CDLL(None, use_errno=True)


def bwrap_problem():
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (.ci/run installs it: apt-get install bubblewrap)"
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], capture_output=True, text=True)
    return probe.returncode and "bwrap cannot run here: " + probe.stderr.strip()


def landlock_abi():
    return LIBC.syscall(444, None, 0, 1) if sys.platform == "linux" else -1


@pytest.fixture(params=["bwrap", "landlock"])
def backend(request):
    if request.param == "bwrap" and bwrap_problem():
        pytest.skip(bwrap_problem())
    if request.param == "landlock" and landlock_abi() < 4:
        pytest.skip("the kernel offers Landlock ABI %d; these tests need 4" % landlock_abi())
    return request.param


@pytest.fixture
def grok(run, tmp_path):
    """grok(*args, env=, script=, preexec_fn=, input=) -> CompletedProcess, in its own session.
    TMPDIR is tmp_path/tmp, so HOME (tmp_path/home) is outside the tree and the temp dir."""
    (tmp_path / "tmp").mkdir()

    def start(*args, env=None, script=GROK, preexec_fn=None, input=None):
        env = run.env(**dict({"TMPDIR": tmp_path / "tmp"}, **(env or {})))
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run([sys.executable, str(script)] + [str(a) for a in args], env=env,
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


def boxed(backend, **env):
    return dict(env, GROK_SANDBOX_BACKEND=backend)


WRITES = """(echo a > made.txt); echo tree=$?
(echo b > "$HOME/escaped.txt"); echo home=$?
(echo c > "$TMPDIR/t.txt"); echo tmp=$?
(echo d > /dev/null); echo null=$?"""


def test_workspace_writes_in_the_tree_and_the_temp_dir_only(grok, fake, backend, isolated_env,
                                                            tmp_path):
    out, err = one_command(grok, fake, WRITES, "--sandbox", "workspace", env=boxed(backend))
    escaped = isolated_env.home / "escaped.txt"
    assert out == "tree=0\n/bin/bash: line 2: %s: %s\nhome=1\ntmp=0\nnull=0\n" % (
        escaped, DENIED[backend])
    assert (isolated_env.work / "made.txt").read_text() == "a\n"
    assert (tmp_path / "tmp" / "t.txt").read_text() == "c\n"
    assert not escaped.exists()
    assert err == "sandbox: workspace (%s)\n" % backend


def test_read_only_writes_only_in_a_temp_dir_of_its_own(grok, fake, backend, isolated_env,
                                                        tmp_path):
    shared = tmp_path / "tmp"
    command = WRITES + '\n(echo e > %s/shared.txt); echo shared=$?\necho "$TMPDIR"' % shared
    out, err = one_command(grok, fake, command, "--sandbox", "read-only", env=boxed(backend))
    lines = out.splitlines()
    private = lines[-1]
    assert os.path.dirname(private) == str(shared)
    assert os.path.basename(private).startswith("grok-")
    assert lines[:-1] == [
        "/bin/bash: line 1: made.txt: " + DENIED[backend], "tree=1",
        "/bin/bash: line 2: %s/escaped.txt: %s" % (isolated_env.home, DENIED[backend]), "home=1",
        "tmp=0", "null=0",
        "/bin/bash: line 5: %s/shared.txt: %s" % (shared, DENIED[backend]), "shared=1"]
    assert err == "sandbox: read-only (%s)\n" % backend
    assert list(isolated_env.work.iterdir()) == []
    assert not (isolated_env.home / "escaped.txt").exists()
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
    command = ("%s -c \"import socket; socket.create_connection(('127.0.0.1', %d), 5); "
               "print('connected')\" 2>&1 | tail -1" % (sys.executable, listener.getsockname()[1]))
    out, err = one_command(grok, fake, command, env=boxed(backend, GROK_SANDBOX="workspace"))
    assert out == "connected\n" and connects(listener)
    assert err == "sandbox: workspace (%s)\n" % backend
    flags = ("--sandbox", "workspace", "--sandbox-network", "off")
    out, err = one_command(grok, fake, command, *flags, env=boxed(backend))
    assert out.startswith(REFUSED_TCP[backend] + ": ") and not connects(listener)
    assert err == "sandbox: workspace (%s, no network)\n" % backend
    assert len(fake.chat_requests()) == 4       # grok itself still reached the model over loopback


def test_write_file_outside_the_sandbox_is_refused_whatever_allows_it(grok, fake, isolated_env,
                                                                      tmp_path):
    outside = isolated_env.home / "x.txt"
    fake.add(tools(("write_file", {"path": str(outside), "content": "x"}),
                   ("write_file", {"path": "in.txt", "content": "y"})), answer("done"))
    p = grok("-p", "go", "--format", "json", "--allow", "/**", "--sandbox", "workspace",
             env=boxed("landlock"))
    assert p.returncode == 0, p.stderr
    assert tool_outputs(p.stdout) == [
        "error: the sandbox allows writes only in %s, %s, /dev/shm" % (tmp_path / "tmp",
                                                                       isolated_env.work),
        "wrote 1 bytes to %s" % (isolated_env.work / "in.txt")]
    assert not outside.exists() and (isolated_env.work / "in.txt").read_text() == "y"
    fake.add(tools(("write_file", {"path": "in.txt", "content": "z"})), answer("done"))
    p = grok("-p", "go", "--format", "json", "-y", "--sandbox", "read-only", env=boxed("landlock"))
    (out,) = tool_outputs(p.stdout)
    assert out.startswith("error: the sandbox allows writes only in %s/grok-" % (tmp_path / "tmp"))
    assert (isolated_env.work / "in.txt").read_text() == "y"


# A seccomp filter (classic BPF) that answers ENOSYS to landlock_create_ruleset (444), as an old
# kernel does: load the syscall number; 444: return ERRNO(ENOSYS); else allow. Built before fork.
FILTER = [(0x20, 0, 0, 0), (0x15, 0, 1, 444), (0x06, 0, 0, 0x50000 | 38), (0x06, 0, 0, 0x7fff0000)]
PROGRAM = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *op) for op in FILTER))
FPROG = struct.pack("=HxxxxxxQ", len(FILTER), ctypes.addressof(PROGRAM))
PRCTL = LIBC.prctl


def no_landlock():
    """A preexec_fn: grok runs under that filter (38: NO_NEW_PRIVS, 22: SECCOMP, 2: a filter)."""
    if PRCTL(38, 1, 0, 0, 0) or PRCTL(22, 2, FPROG, 0, 0):
        raise OSError("seccomp refused the filter")


def without_bwrap(tmp_path, fake_bwrap=None):
    """A PATH with no bwrap, or with a bwrap script that fails as it does under Docker."""
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


def test_a_bwrap_that_fails_here_is_passed_over_for_landlock_and_named_when_forced(grok, fake,
                                                                                   tmp_path):
    path = without_bwrap(tmp_path, "bwrap: No permissions to create new namespace")
    p = grok("-p", "go", "--sandbox", "read-only", env=boxed("bwrap", PATH=path))
    why = "bubblewrap fails here: bwrap: No permissions to create new namespace"
    assert (p.returncode, p.stderr) == (1, "grok: --sandbox read-only: none works here: %s\n" % why)
    fake.add(answer("fine"))
    p = grok("-p", "go", "--sandbox", "read-only", env={"PATH": path})
    assert (p.returncode, p.stdout, p.stderr) == (0, "fine\n", "sandbox: read-only (landlock)\n")


USE = ("use workspace or read-only (or off, the default; --sandbox-network off needs one of the "
       "first two)")


@pytest.mark.parametrize("args, env, message", [
    ((), {"GROK_SANDBOX": "strictest"}, "--sandbox/GROK_SANDBOX 'strictest': " + USE),
    (("--sandbox-network", "off"), {}, "--sandbox/GROK_SANDBOX 'off': " + USE),
    (("--sandbox", "workspace"), {"GROK_SANDBOX_BACKEND": "docker"},
     "GROK_SANDBOX_BACKEND must be bwrap or landlock, not 'docker'")])
def test_bad_sandbox_settings_are_user_errors(grok, fake, args, env, message):
    p = grok("-p", "go", *args, env=env)
    assert (p.returncode, p.stderr) == (1, "grok: %s\n" % message)
    assert fake.chat_requests() == []


def test_without_sandbox_nothing_changes_and_an_ordinary_command_runs_the_same_in_it(
        grok, fake, backend, isolated_env):
    command = ("mkdir -p d && echo hi > d/f && mv d/f d/g && cat d/g && ls d && rm -r d && "
               "echo $TMPDIR && %s -c 'import multiprocessing as m; "
               "print(m.Semaphore(3).get_value())'" % sys.executable)
    plain, err = one_command(grok, fake, command)
    assert (plain, err) == ("hi\ng\n%s\n3\n" % (isolated_env.work.parent / "tmp"), "")
    inside, err = one_command(grok, fake, command, "--sandbox", "workspace", env=boxed(backend))
    assert inside == plain and err == "sandbox: workspace (%s)\n" % backend
    first = [r for r in fake.chat_requests() if r.last_user == "go"]
    assert first[0].json == first[1].json       # the model is told nothing different
    env = {"GROK_SANDBOX": "read-only"}
    out, err = one_command(grok, fake, WRITES, "--sandbox", "off", env=env)
    assert out == "tree=0\nhome=0\ntmp=0\nnull=0\n" and err == ""     # off: anywhere, as before
    assert (isolated_env.home / "escaped.txt").read_text() == "b\n"


def test_the_approval_prompt_says_which_sandbox_runs_the_command(run, fake, isolated_env):
    command = "echo a > made.txt; echo b > $HOME/escaped.txt"
    fake.add(tools(("bash", {"command": command})), answer("all done"))
    env = run.env(GROK_SANDBOX_BACKEND="landlock", TERM="xterm", TMPDIR=isolated_env.work)
    argv = [sys.executable, str(GROK), "--sandbox", "workspace"]
    with PtyProcess(argv, env, str(isolated_env.work)) as p:
        p.expect("sandbox: workspace \\(landlock\\)", plain=True)
        p.expect(PROMPT)
        p.send("make the files\r")
        p.expect(r"bash \(sandbox: workspace \(landlock\)\)\s+echo a > made.txt; echo b > "
                 r"\$HOME/escaped.txt\s+run it\? \[y\]es / \[N\]o / \[a\]lways: ", plain=True)
        p.send("y\r")
        p.expect("all done", plain=True)
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0
    assert "escaped.txt: Permission denied" in fake.chat_requests()[1].last_user
    assert (isolated_env.work / "made.txt").exists()
    assert not (isolated_env.home / "escaped.txt").exists()


def test_grok_detaileds_status_line_names_the_sandbox(run, isolated_env):
    env = run.env(GROK_SANDBOX_BACKEND="landlock", TERM="xterm", TMPDIR=isolated_env.work)
    argv = [sys.executable, str(GROK_DETAILED), "--sandbox", "workspace"]
    with PtyProcess(argv, env, str(isolated_env.work), cols=140) as p:
        p.expect(r"\d{8}-\d{6}-\w+ . grok-4.3 . .* . sandbox: workspace \(landlock\)", plain=True)
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0


def test_grok_detailed_and_its_agent_mode_run_commands_in_the_sandbox(grok, fake, backend,
                                                                      isolated_env):
    fake.add(tools(("bash", {"command": WRITES})), answer("written"))
    p = grok("-y", "--sandbox", "workspace", script=GROK_DETAILED, input="go\n", env=boxed(backend))
    assert p.returncode == 0, p.stderr
    assert p.stderr == "sandbox: workspace (%s)\n" % backend
    assert "home=1" in fake.chat_requests()[1].last_user
    fake.add(answer("# Goal\nWrite the files."), answer("# Plan\n1. write"),
             answer("# Execution prompt\nWrite."), tools(("bash", {"command": WRITES})),
             answer("Wrote what I could."), answer("Review: done.\n\nVERDICT: complete"),
             answer("# Report\nDone."))
    p = grok("--agent", "Write the files", "-y", "--sandbox", "workspace", script=GROK_DETAILED,
             env=boxed(backend))
    assert p.returncode == 0, p.stderr
    assert p.stderr == "sandbox: workspace (%s)\n" % backend
    results = [m for m in (r.last_user for r in fake.chat_requests()[2:])
               if m.startswith("Tool results")]
    assert len(results) == 1 and "tree=0" in results[0] and "home=1" in results[0]
    assert not (isolated_env.home / "escaped.txt").exists()


def test_acp_sessions_run_commands_in_the_sandbox(run, fake, backend, isolated_env):
    fake.add(tools(("bash", {"command": WRITES})), answer("done"))
    argv = [sys.executable, str(GROK), "agent", "-y", "--sandbox", "workspace", "stdio"]
    pipe = subprocess.PIPE
    proc = subprocess.Popen(argv, stdin=pipe, stdout=pipe, stderr=pipe, text=True,
                            env=run.env(**boxed(backend, TMPDIR=isolated_env.work)),
                            start_new_session=True)

    def call(i, method, params):
        """The messages up to the answer to this request."""
        message = {"jsonrpc": "2.0", "id": i, "method": method, "params": params}
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        seen = [json.loads(proc.stdout.readline())]
        while seen[-1].get("id") != i:
            seen.append(json.loads(proc.stdout.readline()))
        return seen

    try:
        call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = call(2, "session/new", {"cwd": str(isolated_env.work), "mcpServers": []})
        prompt = [{"type": "text", "text": "write"}]
        sid = new[-1]["result"]["sessionId"]
        seen = call(3, "session/prompt", {"sessionId": sid, "prompt": prompt})
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    done = [m["params"]["update"] for m in seen if m.get("method") == "session/update"
            and m["params"]["update"].get("status") == "completed"]
    assert "home=1" in done[0]["content"][-1]["content"]["text"]
    assert "sandbox: workspace (%s)" % backend in proc.stderr.read()
    assert not (isolated_env.home / "escaped.txt").exists()
