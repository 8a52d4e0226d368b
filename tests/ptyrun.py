"""Run a process on a real pseudo-terminal (a tiny pexpect), for interactive tests.

    with PtyProcess([sys.executable, str(GROK)], env, cwd) as p:
        p.expect(r"> ")
        p.send("hello\\n")
        p.expect(r"answer")
        p.sendeof()
        assert p.wait() == 0
"""
import codecs
import errno
import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"          # CSI
                   r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
                   r"|\x1b[()][A-Za-z0-9]|\x1b[=>78]")  # charset, keypad, save/restore


PROMPT = r"\n(?:\x1b\[\?2004h)?> "      # the REPL prompt (readline asks the terminal for bracketed pastes)


def strip_ansi(text):
    return _ANSI.sub("", text)


def default_sigint():
    """For a child that gets Ctrl-C: SIGINT handled by default (Python then raises KeyboardInterrupt),
    even when the test runner was started with SIGINT ignored, which a child would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _exitcode(status):
    if hasattr(os, "waitstatus_to_exitcode"):
        return os.waitstatus_to_exitcode(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)


class PtyProcess:
    """The child is a session leader whose controlling terminal is this pty (pty.fork calls setsid),
    never the terminal the tests were started from."""
    def __init__(self, argv, env, cwd, cols=100, rows=30):
        argv = [str(a) for a in argv]
        pid, fd = pty.fork()
        if pid == 0:  # child: the slave side is already stdin/stdout/stderr
            try:
                default_sigint()
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                os.chdir(str(cwd))
                os.execvpe(argv[0], argv, env)
            except BaseException as e:  # never return into the test runner
                os.write(2, ("exec failed: %r\n" % (e,)).encode())
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.set_blocking(fd, False)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.output = ""
        self._pos = self._plain_pos = 0
        self.eof = False
        self.status = None  # exit code once reaped

    @property
    def plain_output(self):
        return strip_ansi(self.output)

    # -- I/O
    def _read(self, timeout):
        """Read what arrives within timeout; True if anything was read (sets eof at EOF)."""
        if self.eof or self.fd is None or not select.select([self.fd], [], [], max(0, timeout))[0]:
            return False
        got = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return got
            except OSError as e:  # EIO: every slave fd is closed (Linux)
                if e.errno != errno.EIO:
                    raise
                data = b""
            if not data:
                self.output += self._decoder.decode(b"", final=True)
                self.eof = True
                return got
            self.output += self._decoder.decode(data)
            got = True

    def send(self, text):
        data = text.encode() if isinstance(text, str) else text
        while data:
            try:
                data = data[os.write(self.fd, data):]
            except BlockingIOError:
                select.select([], [self.fd], [], 1)

    def sendintr(self):
        self.send(b"\x03")

    def sendeof(self):
        self.send(b"\x04")

    def expect(self, pattern, timeout=10, plain=False):
        """Search output not consumed by an earlier expect (of the same kind) for pattern;
        consume up to the end of the match and return it. plain=True matches plain_output."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            text, pos = (self.plain_output, self._plain_pos) if plain else (self.output, self._pos)
            m = rx.search(text, pos)
            if m:
                if plain:
                    self._plain_pos = m.end()
                else:
                    self._pos = m.end()
                return m
            left = deadline - time.monotonic()
            if self.eof or left <= 0:
                raise AssertionError("%s waiting for %r; output so far:\n%s" % (
                    "EOF" if self.eof else "timeout", rx.pattern, self.plain_output[-4000:]))
            self._read(min(left, 0.2))

    # -- process control
    def isalive(self):
        if self.status is not None:
            return False
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid:
            self.status = _exitcode(status)
            return False
        return True

    def wait(self, timeout=10):
        """Wait for exit (draining output meanwhile); returns the exit code (-N for signal N)."""
        deadline = time.monotonic() + timeout
        while self.isalive():
            if time.monotonic() > deadline:
                raise AssertionError("process %d still running after %ss; output:\n%s" % (
                    self.pid, timeout, self.plain_output[-4000:]))
            if not self._read(0.05) and self.eof:
                time.sleep(0.01)
        while self._read(0):  # whatever is left in the pty buffer
            pass
        return self.status

    def kill(self, sig=signal.SIGKILL):
        if self.status is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def close(self):
        if self.isalive():
            self.kill()
            try:
                self.wait(5)
            except AssertionError:
                pass
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
