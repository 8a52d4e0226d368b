"""Shared fixtures: an isolated HOME and cwd for every test, the fake API, a runner."""
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from fakeapi import FakeAPI

ROOT = Path(__file__).resolve().parent.parent
GROK = ROOT / "grok.py"
GROK_DETAILED = ROOT / "grok_detailed.py"
TEST_KEY = "xai-TESTKEY0123456789abcdefABCDEF"

_SCRUB_PREFIXES = ("GROK_", "XAI_")


def _own_session(init):
    """Every child the suite spawns starts its own session, with no controlling terminal, so that
    nothing (an approval asked on /dev/tty, a password prompt, Ctrl-C typed by the developer)
    reaches the terminal the suite was typed into. A test may still pass start_new_session=False."""
    def popen_init(self, *args, **kw):
        kw.setdefault("start_new_session", True)
        init(self, *args, **kw)
    return popen_init


subprocess.Popen.__init__ = _own_session(subprocess.Popen.__init__)
_SCRUB_NAMES = ("COST_LIMIT", "COMPACT_THRESHOLD", "XDG_DATA_HOME", "NO_COLOR", "http_proxy", "https_proxy",
                "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """HOME = tmp/home, cwd = tmp/work, no GROK_*/XAI_* or other config variables."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in list(os.environ):
        if name.startswith(_SCRUB_PREFIXES) or name in _SCRUB_NAMES:
            monkeypatch.delenv(name)
    monkeypatch.chdir(work)
    return types.SimpleNamespace(home=home, work=work)


@pytest.fixture
def fake():
    api = FakeAPI()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def run(fake, isolated_env):
    """run(*args, input=None, env=None, timeout=60, cwd=None, script=GROK) -> CompletedProcess.

    The child gets the test key, the fake's URL, fast retries and NO_COLOR; env overrides
    (a value of None deletes the variable). run.env(**overrides) builds that environment
    for Popen/PtyProcess; run.fake is the fake."""

    def make_env(overrides=None):
        env = dict(os.environ)
        # The fake is not xAI's server: a window and grok-4.3's prices keep it answering like xAI.
        env.update({"GROK_API_KEY": TEST_KEY, "GROK_BASE_URL": fake.url, "GROK_RETRY_BACKOFF": "0.01",
                    "NO_COLOR": "1", "GROK_CONTEXT_WINDOW": "1000000", "GROK_PRICES": "1.25,0.20,2.50"})
        env["GROK_LOOP_DETECTION"] = "0"    # scripted replies repeat calls (test_stuck turns it on)
        for k, v in (overrides or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        return env

    def _run(*args, input=None, env=None, timeout=60, cwd=None, script=GROK):
        kw = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run([sys.executable, str(script)] + [str(a) for a in args],
                              env=make_env(env), cwd=None if cwd is None else str(cwd),
                              capture_output=True, text=True, errors="replace",
                              timeout=timeout, start_new_session=True, **kw)

    _run.env = lambda **overrides: make_env(overrides)
    _run.fake = fake
    return _run


def load_grok(name="grok_under_test"):
    """grok.py imported as a module, for the unit tests of its parsers and helpers."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, str(GROK))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fast_clock(tmp_path, factor=100000):
    """Environment overrides for a child whose monotonic clock and timers run `factor` times fast,
    so that a default limit of minutes passes in a moment: a test can then tell "0 = no limit" from
    the default."""
    site = tmp_path / "fast_clock"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import threading, time\n"
        "_real, _start = time.monotonic, time.monotonic()\n"
        "time.monotonic = lambda: _start + (_real() - _start) * %d\n"
        "_timer = threading.Timer\n"
        "threading.Timer = lambda interval, *args: _timer(interval / %d, *args)\n"
        % (factor, factor))
    return {"PYTHONPATH": str(site)}
