"""install.sh as a new user runs it: PREFIX=DIR ./install.sh, then the installed `grok`."""
import os
import stat
import subprocess
import sys

import pytest

from conftest import ROOT
from fakeapi import answer, tools

SHIPPED_SKILLS = sorted(str(p.relative_to(ROOT / "skills")) for p in (ROOT / "skills").rglob("*")
                        if p.is_file() and not p.name.startswith("."))


def python_first_path():
    """PATH with this interpreter's directory first, so `#!/usr/bin/env python3` finds a python3."""
    here = os.path.dirname(sys.executable)
    if not os.path.exists(os.path.join(here, "python3")):
        return os.environ.get("PATH", "")
    return here + os.pathsep + os.environ.get("PATH", "")


def install(prefix, *args, env=None, cwd=None):
    e = dict(os.environ, PREFIX=str(prefix), PATH=python_first_path())
    e.update(env or {})
    return subprocess.run(["bash", str(ROOT / "install.sh")] + list(args), env=e, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def run_installed(run, path, *args, env=None):
    e = run.env(PATH=python_first_path(), **(env or {}))
    return subprocess.run([str(path)] + list(args), env=e, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def prefix(tmp_path):
    return tmp_path / "prefix"


def test_install_then_run_the_installed_grok(run, fake, prefix, tmp_path):
    r = install(prefix, cwd=tmp_path)        # run from elsewhere: the script finds its own dir
    assert r.returncode == 0, r.stderr
    bin_dir = prefix / "bin"
    grok = bin_dir / "grok"
    assert "installed %s" % grok in r.stdout
    assert stat.S_IMODE(grok.stat().st_mode) == 0o755
    assert (prefix / "bin" / "grok.py").read_bytes() == (ROOT / "grok.py").read_bytes()
    assert sorted(str(p.relative_to(bin_dir / "skills")) for p in (bin_dir / "skills").rglob("*")
                  if p.is_file() and not p.name.startswith(".")) == SHIPPED_SKILLS

    v = run_installed(run, grok, "--version")
    assert v.returncode == 0 and v.stdout.startswith("grok ")

    fake.add(tools(("bash", {"command": "echo installed-ok"})), answer("Works."))
    t = run_installed(run, grok, "-p", "try it", "-y")
    assert t.returncode == 0, t.stderr
    assert t.stdout == "Works.\n"
    first, second = fake.chat_requests()
    assert "installed-ok" in second.last_user
    system = first.messages[0]["content"]
    for name in ("code-review", "research", "shell-safety"):
        assert "\n- %s: " % name in system
    assert str(bin_dir / "skills" / "code-review" / "SKILL.md") in system


def test_installed_grok_detailed_runs(run, prefix):
    assert install(prefix).returncode == 0
    detailed = prefix / "bin" / "grok-detailed"
    assert os.access(str(detailed), os.X_OK)
    r = run_installed(run, detailed, "--version")
    assert r.returncode == 0 and r.stdout.startswith("grok-detailed ")


def test_installed_grok_runs_through_a_symlink_and_on_path(run, fake, prefix, tmp_path):
    assert install(prefix).returncode == 0
    links = tmp_path / "links"
    links.mkdir()
    os.symlink(str(prefix / "bin" / "grok"), str(links / "grok"))
    fake.add(answer("via symlink"))
    env = {"PATH": str(links) + os.pathsep + python_first_path()}
    r = subprocess.run(["grok", "-p", "hi"], env=run.env(**env), capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "via symlink\n"
    # the skills beside the real file, not beside the link
    assert str(prefix / "bin" / "skills" / "research.md") in fake.chat_requests()[0].messages[0]["content"]


def test_install_is_idempotent_and_keeps_the_users_own_skills(prefix):
    assert install(prefix).returncode == 0
    mine = prefix / "bin" / "skills" / "my-own.md"
    mine.write_text("---\nname: mine\ndescription: my skill\n---\n")
    shipped = prefix / "bin" / "skills" / "research.md"
    shipped.write_text("stale copy")
    r = install(prefix)
    assert r.returncode == 0, r.stderr
    assert mine.read_text().startswith("---\nname: mine")
    assert shipped.read_bytes() == (ROOT / "skills" / "research.md").read_bytes()
    assert not [p for p in (prefix / "bin").rglob(".install.*")]     # no temp files left


def test_uninstall_removes_what_was_installed_only(prefix):
    assert install(prefix).returncode == 0
    mine = prefix / "bin" / "skills" / "my-own.md"
    mine.write_text("mine")
    r = install(prefix, "--uninstall")
    assert r.returncode == 0, r.stderr
    assert not (prefix / "bin" / "grok").exists() and not (prefix / "bin" / "grok-detailed").exists()
    left = sorted(str(p.relative_to(prefix / "bin")) for p in (prefix / "bin").rglob("*"))
    assert left == ["skills", "skills/my-own.md"]


def test_install_tells_a_new_user_about_path_and_key(prefix, tmp_path):
    home = tmp_path / "newhome"
    home.mkdir()
    env = {"HOME": str(home), "GROK_API_KEY": "", "XAI_API_KEY": ""}
    r = install(prefix, env=env)
    assert r.returncode == 0
    assert "is not on your PATH" in r.stdout
    assert "No API key found" in r.stdout
    (home / ".grok").mkdir()
    (home / ".grok" / ".env").write_text("GROK_API_KEY=xai-abc\n")
    env["PATH"] = str(prefix / "bin") + os.pathsep + python_first_path()
    r = install(prefix, env=env)
    assert r.returncode == 0
    assert "not on your PATH" not in r.stdout and "No API key found" not in r.stdout


def test_install_rejects_an_unknown_option(prefix):
    r = install(prefix, "--bogus")
    assert r.returncode != 0 and "unknown option" in r.stderr
    assert not prefix.exists()


def test_installed_grok_is_a_launcher_that_reuses_cached_bytecode(run, fake, prefix):
    assert install(prefix).returncode == 0
    bin_dir = prefix / "bin"
    launcher = (bin_dir / "grok").read_text()
    assert len(launcher.splitlines()) < 12 and "from grok import main" in launcher
    assert (bin_dir / "grok.py").read_bytes() == (ROOT / "grok.py").read_bytes()
    fake.add(answer("via the launcher"))
    r = run_installed(run, bin_dir / "grok", "-p", "hi", env={"PYTHONDONTWRITEBYTECODE": None})
    assert r.returncode == 0 and r.stdout == "via the launcher\n", r.stderr
    assert list((bin_dir / "__pycache__").glob("grok.*.pyc"))      # the next start skips compiling
    assert install(prefix, "--uninstall").returncode == 0
    assert not (bin_dir / "grok.py").exists() and not (bin_dir / "__pycache__").exists()


def readme_commands():
    """The commands of the README's first code block, without their comments."""
    block = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_ci_runs_exactly_the_readme_test_command():
    test_command = readme_commands()[1]
    assert "pip install -q pytest pytest-subprocess" in test_command and "-m pytest -q tests" in test_command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert any(line.startswith(test_command + " ") or line == test_command for line in ci)
    assert ".venv/" in (ROOT / ".gitignore").read_text().split()


def test_the_readme_first_command_chats_without_a_path_edit(run, fake, tmp_path):
    """`./install.sh && ~/.local/bin/grok` on a fresh HOME whose PATH lacks ~/.local/bin."""
    fake.add(answer("Hello from the fake."))
    home = tmp_path / "fresh"
    home.mkdir()
    command = readme_commands()[0]
    assert "~/.local/bin/grok" in command
    env = run.env(HOME=str(home), PATH=python_first_path(), PREFIX=None)
    r = subprocess.run(["bash", "-c", command], cwd=str(ROOT), env=env, input="hi\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "is not on your PATH" in r.stdout
    assert "Hello from the fake." in r.stdout
    assert (home / ".local" / "bin" / "grok").exists()
