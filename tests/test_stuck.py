"""Never stuck: one deadline for every byte read, fast honest failure when nothing listens, the
context window asked only when it matters (and remembered), and a loop detector for models that
repeat themselves."""
import json
import socket
import threading
from contextlib import suppress

import pytest

from fakeapi import RawServer, answer, hang, raw, reply, tools
from test_faults import closed_port, no_traceback
from test_repl import piped

LOCAL = {"GROK_CONTEXT_WINDOW": None}      # as a user of a local server runs it (prices: no notice)
TIMED_OUT = ("no complete reply from 127.0.0.1 within the timeout (GROK_TIMEOUT, for the whole "
             "reply)")


class Trickler(RawServer):
    """A loopback server that answers every request with a chunked body of one byte per chunk,
    20 a second, that never ends (a JSON body, or an event stream whose first line never ends)."""

    def __init__(self, content_type):
        self.content_type, self.paths = content_type, []
        self.stop = threading.Event()
        super().__init__("/v1")

    def handle(self, conn):
        data = b""
        with conn, suppress(OSError):
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            self.paths.append(data.split(b" ")[1].decode())
            head = "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
            conn.sendall((head % self.content_type).encode())
            body = (b"data: " if "stream" in self.content_type else b"") + b'{"choices": ['
            for i in range(100000):
                conn.sendall(b"1\r\n%s\r\n" % (body[i:i + 1] or b" "))
                if self.stop.wait(0.05):
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
    env = dict(env, GROK_BASE_URL=trickler.url, GROK_TIMEOUT="1", GROK_MAX_RETRIES="0")
    p = run("-p", "hi", env=env, timeout=30)
    assert p.returncode == 2 and TIMED_OUT in p.stderr, p.stderr
    assert trickler.paths == ["/v1/chat/completions"]
    no_traceback(p.stderr)


@pytest.mark.parametrize("trickler", ["application/json"], indirect=True)
def test_grok_models_gives_the_built_in_list_when_the_server_trickles(run, trickler):
    p = run("models", env={"GROK_BASE_URL": trickler.url, "GROK_TIMEOUT": "1"}, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ("grok: cannot list the models of %s (%s); the built-in list follows\n"
                        % (trickler.url, TIMED_OUT))
    assert p.stdout.startswith("* grok-4.3 (default)\n")


# 2. Nothing listens there: no retries, and the message names host:port and who it is.
def test_a_refused_connection_fails_at_once_naming_the_server(run):
    port = closed_port()
    url = "http://127.0.0.1:%d/v1" % port
    p = run("-p", "hi", env={"GROK_BASE_URL": url, "GROK_MAX_RETRIES": None})
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("grok: connection refused by 127.0.0.1:%d, the server in GROK_BASE_URL: "
                        "is it running?\n" % port)


def test_a_proxy_that_refuses_is_named_not_the_server(run, fake):
    port = closed_port()
    p = run("-p", "hi", env={"HTTP_PROXY": "http://127.0.0.1:%d" % port, "GROK_MAX_RETRIES": None})
    assert p.returncode == 2 and fake.requests == []
    assert "connection refused by 127.0.0.1:%d, the proxy in HTTP_PROXY: is it running?" % port \
        in p.stderr
    assert "GROK_BASE_URL" not in p.stderr and "retrying" not in p.stderr


def test_a_proxy_that_cannot_be_resolved_is_named_not_the_server(run, fake):
    proxy = "http://nonexistent.invalid:3128"
    p = run("-p", "hi", env={"HTTP_PROXY": proxy, "GROK_MAX_RETRIES": None})
    assert p.returncode == 2 and fake.requests == []
    assert "cannot resolve host nonexistent.invalid:3128, the proxy in HTTP_PROXY (DNS)" in p.stderr
    assert "GROK_BASE_URL" not in p.stderr and "retrying" not in p.stderr


# 3. The context window is asked only when it matters, briefly, and remembered per server and model.
def usage(prompt, completion=50):
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def asked(fake):
    return sorted(q.path for q in fake.requests if "/chat/" not in q.path)


def windows_file(isolated_env):
    return isolated_env.home / ".local" / "share" / "grok-agent" / "windows.json"


def n_ctx(n):
    return raw(200, {"default_generation_settings": {"n_ctx": n}})      # as llama.cpp's /props


def test_a_short_conversation_asks_the_server_nothing_but_the_chat(run, fake):
    fake.add(tools(("list_files", {})), answer("done"))
    p = run("-p", "hi", env=LOCAL)
    assert p.returncode == 0 and p.stdout == "done\n", p.stderr
    assert asked(fake) == [] and "window" not in p.stderr


def test_a_server_that_never_says_its_window_costs_a_short_wait_and_nothing_later(
        run, fake, isolated_env):
    for path in ("/v1/models", "/props", "/api/show"):
        fake.add(hang(120), path=path)
    fake.add(tools(("list_files", {}), usage=usage(3500)), answer("done"))
    p = run("-p", "hi", env=LOCAL, timeout=30)
    assert p.returncode == 0 and p.stdout == "done\n", p.stderr
    assert asked(fake) == ["/api/show", "/props", "/v1/models"]
    saved = json.loads(windows_file(isolated_env).read_text())
    assert saved == {"%s grok-4.3" % fake.url: 0}       # asked, not told
    fake.add(tools(("list_files", {}), usage=usage(3500)), answer("again"))
    p = run("-p", "hi", env=LOCAL)
    assert p.returncode == 0 and p.stdout == "again\n" and "window" not in p.stderr
    assert len(asked(fake)) == 3        # a later run asks nothing


def test_the_window_is_remembered_per_server_and_model(run, fake):
    fake.add(n_ctx(8192), path="/props")
    fake.add(tools(("list_files", {}), usage=usage(3500)), answer("done"))
    p = run("-p", "hi", env=LOCAL)
    assert p.returncode == 0, p.stderr
    assert "context window: 8192 tokens (from the server's /props)\n" in p.stderr
    assert len(asked(fake)) == 3
    # the next run compacts at 75% of 8,192 without asking again
    fake.add(*[tools(("list_files", {}), usage=usage(100)) for _ in range(3)],
             tools(("list_files", {}), usage=usage(6500)), reply("SUMMARY: listed."),
             answer("compacted"))
    p = run("-p", "hi", env=LOCAL)
    assert p.returncode == 0 and p.stdout == "compacted\n", p.stderr
    assert "compacted 3 older messages" in p.stderr and len(asked(fake)) == 3
    # another model on the same server is its own question
    fake.add(n_ctx(2048), path="/props")
    fake.add(tools(("list_files", {}), usage=usage(3500)), answer("other"))
    p = run("-p", "hi", "-m", "other-model", env=LOCAL)
    assert "context window: 2048 tokens (from the server's /props)" in p.stderr
    assert len(asked(fake)) == 6


@pytest.mark.parametrize("saved", [b"\xff\xfe not json", b"[8192]", b'{"x": "8192", "y": -1}',
                                   pytest.param(b"[" * 100000, id="nested too deep")])
def test_a_damaged_window_file_is_asked_again_and_rewritten(run, fake, isolated_env, saved):
    windows = windows_file(isolated_env)
    windows.parent.mkdir(parents=True, mode=0o700)
    windows.write_bytes(saved)
    fake.add(n_ctx(8192), path="/props")
    fake.add(tools(("list_files", {}), usage=usage(3500)), answer("done"))
    p = run("-p", "hi", env=LOCAL)
    assert p.returncode == 0 and "context window: 8192 tokens" in p.stderr, p.stderr
    assert json.loads(windows.read_text())["%s grok-4.3" % fake.url] == 8192


def test_a_window_file_in_a_data_dir_others_can_write_is_not_read(run, fake, isolated_env):
    windows = windows_file(isolated_env)
    windows.parent.mkdir(parents=True)
    windows.parent.chmod(0o777)
    planted = {"%s grok-4.3" % fake.url: 100}       # would compact on every turn
    windows.write_text(json.dumps(planted))
    fake.add(n_ctx(8192), path="/props")
    fake.add(tools(("list_files", {}), usage=usage(3500)), answer("done"))
    p = piped(run, "hi\n", env=LOCAL)       # the REPL goes on unsaved (headless refuses such a dir)
    assert p.returncode == 0 and "done" in p.stdout, p.stderr
    assert "context window: 8192 tokens" in p.stderr and len(asked(fake)) == 3
    assert json.loads(windows.read_text()) == planted       # nor written


# 4. A model that repeats itself is told once, then stopped; calls whose results change are not.
PARIS = "The capital of France is Paris."
ON = {"GROK_LOOP_DETECTION": None}      # the default (the other tests' scripted replies: off)


def looping(n, response=PARIS):
    """The same calls round after round, in another order and number each time (SmolLM2 did)."""
    listing, reading = ("list_files", {"path": "."}), ("read_file", {"path": "notes.txt"})
    rounds = [(listing, reading), (reading, listing, listing)]
    return [tools(*rounds[i % 2], response=response) for i in range(n)]


def loop_notes(fake):
    return [i for i, q in enumerate(fake.chat_requests()) if "[Loop]" in q.last_user]


@pytest.fixture
def notes(isolated_env):
    (isolated_env.work / "notes.txt").write_text("nothing about France\n")


def test_a_model_that_repeats_itself_is_told_once_then_its_response_is_the_answer(
        run, fake, notes):
    fake.add(tools(("list_files", {})), *looping(3))
    p = run("-p", "What is the capital of France?", env=ON)
    assert p.returncode == 0 and p.stdout == PARIS + "\n", p.stderr
    assert loop_notes(fake) == [3] and len(fake.chat_requests()) == 4
    told = "You made these same tool calls and got these same results 2 rounds in a row"
    assert told in fake.chat_requests()[3].last_user
    assert p.stderr.count("loop stopped") == 1
    assert ("loop stopped: the model repeated the same tool calls and results 3 rounds in a row; "
            "its response is the answer\n") in p.stderr


def test_a_loop_without_a_response_ends_with_exit_3(run, fake, notes):
    fake.add(*looping(3, response=None))
    p = run("-p", "What is the capital of France?", env=ON)
    assert p.returncode == 3 and p.stdout == "", p.stderr
    assert p.stderr.endswith("grok: the model repeated the same tool calls and results 3 rounds in "
                             "a row, without an answer (GROK_LOOP_DETECTION=0 lets it go on)\n")
    assert len(fake.chat_requests()) == 3
    no_traceback(p.stderr)


def test_polling_is_not_a_loop_until_its_results_stop_changing(run, fake):
    poll = ("bash", {"command": "echo tick >> poll.log; wc -l < poll.log"})
    stuck = ("bash", {"command": "echo building"})
    fake.add(*[tools(poll, response="still waiting")] * 4,
             *[tools(stuck, response="still waiting")] * 3)
    p = run("-p", "wait for the build", "-y", env=ON)
    assert p.returncode == 0 and p.stdout == "still waiting\n", p.stderr
    assert loop_notes(fake) == [6] and len(fake.chat_requests()) == 7
    assert p.stderr.count("loop stopped") == 1


def test_a_repeat_between_other_calls_is_not_a_loop(run, fake, notes):
    test = looping(1)[0]        # run between two edits, with the same result each time
    edits = [tools(("write_file", {"path": "fix.py", "content": "try %d" % i})) for i in (1, 2)]
    fake.add(test, edits[0], test, edits[1], test, test, test)
    p = run("-p", "What is the capital of France?", "-y", env=ON)
    assert p.returncode == 0 and p.stdout == PARIS + "\n", p.stderr
    assert loop_notes(fake) == [6] and len(fake.chat_requests()) == 7
    assert p.stderr.count("loop stopped") == 1


def test_loop_detection_can_be_turned_off(run, fake, notes):
    fake.add(*looping(3))
    p = run("-p", "What is the capital of France?", env=ON)
    assert p.returncode == 0 and len(fake.chat_requests()) == 3
    fake.add(*looping(6))
    off = {"GROK_LOOP_DETECTION": "0", "GROK_MAX_ITERATIONS": "5"}
    p = run("-p", "What is the capital of France?", env=off)
    assert p.returncode == 3 and "tool round limit reached" in p.stderr, p.stderr
    assert loop_notes(fake) == [2] and len(fake.chat_requests()) == 9
    assert "loop stopped" not in p.stderr
