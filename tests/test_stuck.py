"""Never stuck: one deadline for every byte read, fast honest failure when nothing listens, the context window
asked only when it matters (and remembered), and a loop detector for models that repeat themselves."""
import socket
import threading
from contextlib import suppress

import pytest

from conftest import GROK_DETAILED
from fakeapi import answer, hang, raw, reply, tools
from test_faults import closed_port, no_traceback

LOCAL = {"GROK_CONTEXT_WINDOW": None, "GROK_PRICES": None}      # as a user of a local server runs it


class Trickler:
    """A loopback server that answers every request with a chunked body of one byte per chunk, 20 a second,
    that never ends (a JSON body, or an event stream whose first line never ends)."""

    def __init__(self, content_type):
        self.content_type, self.paths, self.socks = content_type, [], []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d/v1" % self.server.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.socks.append(conn)
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn):
        data = b""
        with conn:
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            self.paths.append(data.split(b" ")[1].decode())
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                         % self.content_type.encode())
            body = b'data: {"choices": [' if "event-stream" in self.content_type else b'{"choices": ['
            try:
                for i in range(100000):
                    conn.sendall(b"1\r\n%s\r\n" % (body[i:i + 1] or b" "))
                    if self.stop.wait(0.05):
                        return
            except OSError:
                return

    def close(self):
        self.stop.set()
        self.server.close()
        for s in self.socks:
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def trickler(request):
    server = Trickler(request.param)
    yield server
    server.close()


# 1. One deadline for every byte, whatever the server's pacing.
@pytest.mark.parametrize("trickler, env", [
    ("application/json", {"GROK_STREAM": "0"}),     # an unstreamed reply
    ("application/json", {}),                       # a JSON answer to a streamed request
    ("text/event-stream", {}),                      # an event stream whose line never ends
], indirect=["trickler"], ids=["unstreamed", "json-to-a-stream", "endless-line"])
def test_a_reply_trickled_a_byte_at_a_time_is_cut_at_the_deadline(run, trickler, env):
    p = run("-p", "hi", env=dict(env, GROK_BASE_URL=trickler.url, GROK_TIMEOUT="1", GROK_MAX_RETRIES="0"),
            timeout=30)
    assert p.returncode == 2, p.stderr
    assert "no complete reply from 127.0.0.1 within the timeout (GROK_TIMEOUT, for the whole reply)" in p.stderr
    assert trickler.paths == ["/v1/chat/completions"]
    no_traceback(p.stderr)


@pytest.mark.parametrize("trickler", ["application/json"], indirect=True)
def test_grok_models_gives_the_built_in_list_when_the_server_trickles(run, trickler):
    p = run("models", env={"GROK_BASE_URL": trickler.url, "GROK_TIMEOUT": "1"}, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ("grok: cannot list the models of %s (no complete reply from 127.0.0.1 within the timeout "
                        "(GROK_TIMEOUT, for the whole reply)); the built-in list follows\n" % trickler.url)
    assert p.stdout.startswith("* grok-4.3 (default)\n")


# 2. Nothing listens there: one quick retry, and the message names host:port and who it is.
def test_a_refused_connection_fails_after_one_quick_retry_naming_the_server(run):
    port = closed_port()
    p = run("-p", "hi", env={"GROK_BASE_URL": "http://127.0.0.1:%d/v1" % port, "GROK_MAX_RETRIES": None})
    assert p.returncode == 2 and p.stdout == ""
    refused = "connection refused by 127.0.0.1:%d, the server in GROK_BASE_URL: is it running?" % port
    assert p.stderr.count(refused) == 2 and p.stderr.count("retrying in") == 1, p.stderr
    assert p.stderr.endswith("(gave up after 1 retries)\n")
    no_traceback(p.stderr)


def test_a_proxy_that_refuses_is_named_not_the_server(run, fake):
    port = closed_port()
    p = run("-p", "hi", env={"HTTP_PROXY": "http://127.0.0.1:%d" % port, "GROK_MAX_RETRIES": None})
    assert p.returncode == 2 and fake.requests == []
    assert "connection refused by 127.0.0.1:%d, the proxy in HTTP_PROXY: is it running?" % port in p.stderr
    assert "GROK_BASE_URL" not in p.stderr and p.stderr.count("retrying in") == 1


def test_a_proxy_that_cannot_be_resolved_is_named_not_the_server(run, fake):
    p = run("-p", "hi", env={"HTTP_PROXY": "http://nonexistent.invalid:3128", "GROK_MAX_RETRIES": None})
    assert p.returncode == 2 and fake.requests == []
    assert "cannot resolve host nonexistent.invalid:3128, the proxy in HTTP_PROXY (DNS)" in p.stderr
    assert "GROK_BASE_URL" not in p.stderr and p.stderr.count("retrying in") == 1
