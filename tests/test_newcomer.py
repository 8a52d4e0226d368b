"""What a newcomer meets on the first day: the README's commands on a fresh machine, notices that
fit the terminal, the session id, a local server set up in the person's own .env, a wrong URL."""
import sys

from conftest import ROOT
from ptyrun import PtyProcess

# Two tests whose REPL answers a tool call that needs approval, which is asked on /dev/tty.
ASKS_APPROVAL = ("tests/test_original.py::test_detailed_shows_a_skill_line_when_a_skill_is_read",
                 "tests/test_secrets.py::test_key_never_appears_anywhere")


def test_the_suite_typed_into_a_terminal_never_asks_on_it(run):
    """The suite run from a terminal (here a pty): no child reaches it, so nothing waits for a key."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + list(ASKS_APPROVAL)
    with PtyProcess(argv, run.env(), ROOT, cols=200) as p:
        m = p.expect(r"run it\? \[y\]es|\d+ (?:passed|failed)[^\n]*", timeout=120, plain=True)
        assert m.group(0).startswith("2 passed"), p.plain_output[-3000:]
        assert p.wait(60) == 0
