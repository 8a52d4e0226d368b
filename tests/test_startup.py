"""Start-up: a run that does little imports little. Each start is grok.py run as a script, and what
it loaded is read from sys.modules at its exit (modules the interpreter loads for `pass` too do not
count). No timing assertions: tests/bench.py times the starts."""
import subprocess
import sys

from conftest import GROK
from ptyrun import PROMPT, PtyProcess
from test_install import install, run_installed

# grok.py run as __main__ (as `python3 grok.py ARGS` does); at exit, the modules loaded go to a file.
WRAPPER = """import atexit, os, sys
def dump():
    with open(os.environ["MODULES_OUT"], "w") as f:
        f.write("\\n".join(name for name, module in sys.modules.items() if module is not None))
atexit.register(dump)
path = sys.argv[1]
sys.argv = sys.argv[1:]
code = compile(open(path, "rb").read(), path, "exec")
exec(code, {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__})
"""
# What a run needs only once it talks to a server, runs a command or edits a line.
RUN_ONLY = {"json", "threading", "subprocess", "http.client", "ssl", "socket", "readline",
            "urllib.parse", "select", "tempfile"}


def wrapped(run, tmp_path, script, *args, env=None):
    """(the CompletedProcess of script run by WRAPPER, the modules it had loaded at exit)."""
    out = tmp_path / "modules.txt"
    r = subprocess.run([sys.executable, "-c", WRAPPER, str(script)] + list(args), capture_output=True,
                       env=run.env(MODULES_OUT=str(out), **(env or {})), text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return r, set(out.read_text().split("\n"))


def loaded(run, tmp_path, script, *args, env=None):
    """(the CompletedProcess, the modules it loaded that `pass` does not)."""
    empty = tmp_path / "empty.py"
    empty.write_text("pass\n")
    r, got = wrapped(run, tmp_path, script, *args, env=env)
    return r, got - wrapped(run, tmp_path, empty)[1]


def test_version_imports_nothing_but_its_answer(run, tmp_path):
    r, extra = loaded(run, tmp_path, GROK, "--version")
    assert r.returncode == 0 and r.stdout.startswith("grok 0."), r.stderr
    assert extra & (RUN_ONLY | {"re", "argparse", "signal", "enum"}) == set()


def test_help_imports_argparse_and_nothing_of_a_run(run, tmp_path):
    r, extra = loaded(run, tmp_path, GROK, "--help")
    assert r.returncode == 0 and "--always-approve" in r.stdout, r.stderr
    assert "argparse" in extra
    assert extra & RUN_ONLY == set()


def test_a_missing_key_is_told_without_loading_a_client(run, tmp_path):
    r, extra = loaded(run, tmp_path, GROK, "-p", "hi", env={"GROK_API_KEY": None})
    assert r.returncode == 1 and "no API key" in r.stderr
    assert extra & RUN_ONLY == set()


def test_the_chat_shows_its_prompt_without_loading_a_client(run, tmp_path):
    out = tmp_path / "modules.txt"
    env = run.env(MODULES_OUT=str(out), TERM="xterm", GROK_DATA_DIR=str(tmp_path / "data"))
    with PtyProcess([sys.executable, "-c", WRAPPER, GROK], env, tmp_path) as p:
        p.expect(PROMPT)
        p.sendeof()
        assert p.wait() == 0, p.plain_output
    empty = tmp_path / "empty.py"
    empty.write_text("pass\n")
    extra = set(out.read_text().split("\n")) - wrapped(run, tmp_path, empty)[1]
    assert "readline" in extra      # the prompt's line editor
    assert extra & {"json", "http.client", "ssl", "socket", "subprocess"} == set()


def test_install_compiles_grok_so_no_start_compiles_it(run, fake, tmp_path):
    # Even where bytecode is never written (PYTHONDONTWRITEBYTECODE=1, as in many containers),
    # the installed grok loads the bytecode install.sh compiled.
    prefix = tmp_path / "prefix"
    assert install(prefix, env={"PYTHONDONTWRITEBYTECODE": "1"}).returncode == 0
    cached = list((prefix / "bin" / "__pycache__").glob("grok.*.pyc"))
    assert len(cached) == 1
    r = run_installed(run, prefix / "bin" / "grok", "--version",
                      env={"PYTHONDONTWRITEBYTECODE": "1", "PYTHONVERBOSE": "1"})
    assert r.returncode == 0 and r.stdout.startswith("grok 0."), r.stderr
    assert "%s matches %s" % (cached[0], prefix / "bin" / "grok.py") in r.stderr
