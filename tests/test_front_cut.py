"""The front ends after their simplification: what a cut must not break, and what it fixed."""
import os
import subprocess
import sys

import pytest

from conftest import GROK


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_json_error_that_cannot_be_written_ends_with_the_message_not_a_traceback(run):
    # A bad flag with --format json is reported as a JSON error event too; stdout on a full disk
    # cannot take it, and that must not turn the exit 1 into a traceback.
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, str(GROK), "-p", "hi", "--format", "json", "--bogus"],
                           stdout=full, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           env=run.env(), text=True, timeout=60, start_new_session=True)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "grok: unrecognized arguments: --bogus" in r.stderr
