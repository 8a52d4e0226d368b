"""Secrets: the API key never appears in anything a run produces, credentials in tool output
are scrubbed before they are stored, sent or printed, and .env files give up only the key."""
import json
import stat
import sys
from pathlib import Path

import pytest

from conftest import load_grok, GROK
from fakeapi import answer, error, tools

# A key with no known prefix: only the configured-key rule can catch it.
PLAIN_KEY = "plainsecretvalue0123456789QRST"

SECRETS = {
    "xai": "xai-" + "A1b2C3d4E5" * 8,
    "openai": "sk-proj-" + "Zz09_-" * 6,
    "github": "ghp_" + "a1B2" * 9,
    "github_pat": "github_pat_11ABCDEFG0" + "x" * 40,
    "slack": "xoxb-123456789012-abcdefABCDEF",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
    "private": "MIIEowIBAAKCAQEAtopsecretkeymaterial",
}

SECRET_TEXT = """\
XAI_KEY={xai}
OPENAI_API_KEY={openai}
token: {github}
fine-grained: {github_pat}
SLACK_BOT_TOKEN={slack}
aws_access_key_id = {aws}
aws_secret_access_key = {aws_secret}
curl -H "Authorization: Bearer {bearer}" https://example.com
-----BEGIN RSA PRIVATE KEY-----
{private}
-----END RSA PRIVATE KEY-----
after the key block
""".format(**SECRETS)


grok = load_grok()


def everything(isolated_env, *procs):
    """All text a run produced: stdout, stderr and every file under HOME and the work dir."""
    texts = []
    for p in procs:
        texts += [p.stdout, p.stderr]
    for root in (isolated_env.home, isolated_env.work):
        for path in Path(root).rglob("*"):
            if path.is_file():
                texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


def tool_output(stdout):
    (out,) = [json.loads(l)["toolResult"]["output"] for l in stdout.split("\n")
              if l.strip() and json.loads(l)["type"] == "tool_use"]
    return out


# ------------------------------------------------------------------ scrub()
@pytest.mark.parametrize("name", sorted(SECRETS))
def test_scrub_redacts_each_kind(name):
    out = grok.scrub(SECRET_TEXT)
    assert SECRETS[name] not in out
    assert "REDACTED" in out


def test_scrub_keeps_the_rest():
    out = grok.scrub(SECRET_TEXT)
    assert "after the key block" in out and "aws_access_key_id = " in out and "https://example.com" in out
    plain = "task-list of 20 sk-items, Bearer of bad news, xai-short, AKIA, ghp_x, a task-abcdefghijklmnopqrstuvwxyz"
    assert grok.scrub(plain) == plain


def test_scrub_configured_key_without_prefix():
    assert grok.scrub("key=%s." % PLAIN_KEY, (PLAIN_KEY,)) == "key=[REDACTED_API_KEY]."
    assert grok.scrub("short", ("short",)) == "short"           # too short to be a key: not replaced


@pytest.mark.parametrize("block", [
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkey\n-----END EC PRIVATE KEY-----",
    "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHzBJBgkqkey\n-----END ENCRYPTED PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGkey\n-----END PGP PRIVATE KEY BLOCK-----",
    "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBkey\\n-----END PRIVATE KEY-----",      # JSON-escaped
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBkey\n[... 5000 bytes omitted: output truncated ...]",  # cut off
])
def test_scrub_private_key_blocks(block):
    body = [line for line in block.replace("\\n", "\n").split("\n") if line and "-----" not in line][0]
    out = grok.scrub("before\n" + block + "\nafter")
    assert body not in out and "[REDACTED_PRIVATE_KEY]" in out and out.startswith("before\n")


def test_scrub_basic_auth_header():
    assert "dXNlcjpwYXNzd29yZA" not in grok.scrub("Authorization: Basic dXNlcjpwYXNzd29yZA==")


# ---------------------------------------------------- the key in a whole run
def test_key_never_appears_anywhere(run, fake, isolated_env):
    """A tool that prints the environment and the key variables, a 5xx and a 401 that echo
    the key back: stdout, stderr, the session files, the events and what was sent to the
    model stay clean."""
    echo = {"error": {"message": "bad request from key %s" % PLAIN_KEY}}
    cmd = 'env; echo "g=$GROK_API_KEY x=$XAI_API_KEY"; printf "copy=%s\\n" "$KEY_COPY"'
    env = {"GROK_API_KEY": PLAIN_KEY, "KEY_COPY": PLAIN_KEY}
    procs = []
    fake.add(tools(("bash", {"command": cmd})), error(500, echo), answer("done"))
    p = run("-p", "go", "--format", "json", "-y", env=env)
    assert p.returncode == 0, p.stderr
    out = tool_output(p.stdout)
    assert "GROK_API_KEY=" not in out and "g= x=" in out             # not in the tool's environment
    assert "copy=[REDACTED_API_KEY]" in out                           # scrubbed where it is found
    procs.append(p)
    fake.add(error(401, echo))
    procs.append(run("-p", "go", env=env))
    assert procs[-1].returncode == 1 and "API key was rejected" in procs[-1].stderr
    fake.add(error(401, echo))
    procs.append(run("-p", "go", "--format", "json", env=env))
    fake.add(*[error(503, echo)] * 3, error(401, echo))
    procs.append(run(input="one\ntwo\n", env=dict(env, GROK_MAX_RETRIES=2)))     # the REPL
    assert "gave up after 2 retries" in procs[-1].stderr
    fake.add(tools(("bash", {"command": cmd})), answer("done"))
    procs.append(run(input="go\n", env=env, cwd=isolated_env.work))
    assert procs[-1].returncode == 0
    assert PLAIN_KEY not in everything(isolated_env, *procs)
    for req in fake.requests:
        assert PLAIN_KEY not in req.body.decode("utf-8", "replace")
        assert req.headers["authorization"] == "Bearer " + PLAIN_KEY      # where it belongs


def test_tool_output_is_scrubbed_before_it_is_stored_sent_or_printed(run, fake, isolated_env):
    (isolated_env.work / "secrets.txt").write_text(SECRET_TEXT)
    fake.add(tools(("bash", {"command": "cat secrets.txt"}), ("read_file", {"path": "secrets.txt"})),
             answer("done"))
    p = run("-p", "go", "--format", "json", "-y")
    assert p.returncode == 0, p.stderr
    fake.add(tools(("bash", {"command": "cat secrets.txt"})), answer("done"))
    q = run("-p", "go", "-y", "--format", "text")
    fake.add(tools(("bash", {"command": "cat secrets.txt"})), answer("done"))
    r = run(input="go\n", env={"GROK_ALWAYS_APPROVE": "1"})
    (isolated_env.work / "secrets.txt").unlink()
    produced = everything(isolated_env, p, q, r)
    sent = "\n".join(req.body.decode() for req in fake.requests)
    assert "after the key block" in sent                      # the output did go to the model...
    for name, secret in SECRETS.items():
        assert secret not in produced, name
        assert secret not in sent, name                        # ... scrubbed


def test_tool_arguments_shown_are_scrubbed(run, fake):
    token = SECRETS["bearer"]
    cmd = 'curl -s -H "Authorization: Bearer %s" http://127.0.0.1:9/ || true' % token
    fake.add(tools(("bash", {"command": cmd})), answer("done"))
    p = run("-p", "go", "-y", "--format", "json")
    fake.add(tools(("bash", {"command": cmd})), answer("done"))
    q = run("-p", "go", "-y")
    fake.add(tools(("bash", {"command": cmd})), answer("done"))
    r = run(input="go\n", env={"GROK_ALWAYS_APPROVE": "1"})
    for proc in (p, q, r):
        assert proc.returncode == 0, proc.stderr
        assert token not in proc.stdout + proc.stderr
    assert "[REDACTED_TOKEN]" in p.stdout and "[REDACTED_TOKEN]" in q.stderr and "[REDACTED_TOKEN]" in r.stdout


# ------------------------------------------------------------------- .env
def test_dotenv_gives_up_only_the_key(run, fake, isolated_env):
    (isolated_env.work / ".env").write_text(
        "OTHER_SECRET=topsecret-dotenv-value\n"
        "export PATH=/nonexistent-evil\n"
        "GROK_API_KEY=%s  # the key\n"
        "XAI_API_KEY=second-key-not-used\n" % PLAIN_KEY)
    fake.add(tools(("bash", {"command": "env"})), answer("done"))
    p = run("-p", "go", "--format", "json", "-y", env={"GROK_API_KEY": None})
    assert p.returncode == 0, p.stderr
    out = tool_output(p.stdout)
    assert "topsecret-dotenv-value" not in out and "OTHER_SECRET" not in out
    assert "/nonexistent-evil" not in out and "PATH=" in out
    assert fake.requests[0].headers["authorization"] == "Bearer " + PLAIN_KEY
    assert PLAIN_KEY not in p.stdout + p.stderr
    assert "topsecret-dotenv-value" not in everything(isolated_env, p).replace(
        (isolated_env.work / ".env").read_text(), "")


def test_dotenv_in_home_and_missing_key(run, fake, isolated_env):
    grok_dir = isolated_env.home / ".grok"
    grok_dir.mkdir()
    (grok_dir / ".env").write_text("SOMETHING=else\nXAI_API_KEY='%s'\n" % PLAIN_KEY)
    (isolated_env.work / ".env").write_text("NOT_THE_KEY=1\n")
    fake.add(answer("hi"))
    p = run("-p", "go", env={"GROK_API_KEY": None})
    assert p.returncode == 0, p.stderr
    assert fake.requests[0].headers["authorization"] == "Bearer " + PLAIN_KEY
    (grok_dir / ".env").unlink()
    p = run("-p", "go", env={"GROK_API_KEY": None})
    assert p.returncode == 1 and "GROK_API_KEY" in p.stderr and "Traceback" not in p.stderr


# ------------------------------------------------------------ file modes
def test_session_and_history_files_are_private(run, fake, isolated_env):
    from ptyrun import PtyProcess
    fake.add(answer("hi"))
    with PtyProcess([sys.executable, str(GROK)], run.env(), isolated_env.work) as p:
        p.expect("> ")
        p.send("hello\n")
        p.expect("hi")
        p.expect("> ")
        p.sendeof()
        assert p.wait() == 0
    data = isolated_env.home / ".local" / "share" / "grok-agent"
    (session,) = (data / "sessions").glob("*.jsonl")
    assert stat.S_IMODE(session.stat().st_mode) == 0o600
    assert stat.S_IMODE((data / "sessions").stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "history").stat().st_mode) == 0o600
