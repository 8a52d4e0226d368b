"""A loopback fake of xAI's OpenAI-compatible API, for tests and benchmarks.

    with FakeAPI() as fake:
        fake.add(tools(("bash", {"command": "ls"})), answer("done"))
        ... run the client against fake.url ...
        assert fake.chat_requests()[1].last_user.startswith("Tool results")

Replies are scripted per path (FIFO); every request is recorded before it is answered.
Stdlib only; Python 3.8+.
"""
import http
import itertools
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHAT = "/chat/completions"
RESPONSES = "/responses"


# ---------------------------------------------------------------- reply specs
class RawServer:
    """A loopback TCP server for what http.server cannot fake (a proxy, a trickle): each
    connection goes to self.handle(conn) on its own thread and is kept in self.socks. A subclass
    sets what handle() reads before calling this __init__, which starts accepting."""

    def __init__(self, path=""):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d%s" % (self.server.getsockname()[1], path)
        self.socks = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.socks.append(conn)
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()


class Spec:
    """One scripted reply: a kind plus its parameters (built by the factories below)."""

    def __init__(self, kind, delay=0, path=CHAT, **kw):
        self.kind, self.delay, self.path, self.kw = kind, delay, path, kw

    def __repr__(self):
        return "Spec(%s, %r)" % (self.kind, self.kw)


def reply(content, usage=None, finish_reason="stop", delay=0, chunk_size=20, chunk_delay=0,
          stream=None, headers=None, close=False, reasoning=None, hold=None):
    """A chat completion; streamed (SSE, chunked) when the request asks or stream=True.

    close=True closes the connection after the reply without announcing it (no
    `Connection: close`), as a server does whose keep-alive idle timeout strikes.
    reasoning: text sent as reasoning_content (streamed first, in chunk_size pieces).
    hold: a threading.Event; the last chunk of a stream waits until the test sets it."""
    if not isinstance(content, str):
        content = json.dumps(content)
    return Spec("reply", delay, content=content, usage=usage, finish_reason=finish_reason,
                chunk_size=max(1, int(chunk_size)), chunk_delay=chunk_delay, stream=stream,
                headers=headers, close=close, reasoning=reasoning, hold=hold)


def models(*ids):
    """A GET /models reply listing these model ids."""
    return Spec("raw", path="/models", status=200, headers=None,
                body=json.dumps({"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}))


def answer(text, **kw):
    return reply({"tool_calls": [], "response": text, "done": True}, **kw)


def tools(*calls, response=None, done=False, **kw):
    return reply({"tool_calls": [{"tool": n, "args": a} for n, a in calls],
                  "response": response, "done": done}, **kw)


def error(status, body=None, headers=None, delay=0):
    if body is None:
        try:
            code = http.HTTPStatus(status).phrase
        except ValueError:
            code = "Error"
        body = {"code": code, "error": "fake error %d" % status}
    return Spec("error", delay, status=status, body=body, headers=headers)


def raw(status=200, body=b"", headers=None, delay=0):
    return Spec("raw", delay, status=status, body=body, headers=headers)


def drop(delay=0):
    return Spec("drop", delay)


def drop_mid_body(delay=0):
    return Spec("drop_mid_body", delay)


def sse(events, truncate=False, chunk_delay=0, delay=0):
    return Spec("sse", delay, events=list(events), truncate=truncate, chunk_delay=chunk_delay)


def endless(piece="x", chunk_delay=0, headers=None):
    """A chat stream of valid chunks that never ends, until the client goes or the fake closes."""
    return Spec("endless", 0, piece=piece, chunk_delay=chunk_delay, headers=headers)


def hang(seconds, delay=0):
    return Spec("hang", delay, seconds=seconds)


def responses_reply(text, urls=(), usage=None, delay=0):
    """A Responses API (web search) reply; add() queues it on /responses by default."""
    return Spec("responses", delay, path=RESPONSES, text=text, urls=list(urls), usage=usage)


# ------------------------------------------------------------------- requests
class Request:
    def __init__(self, method, path, headers, body, conn_id, arrived):
        self.method, self.path, self.headers, self.body = method, path, headers, body
        self.conn_id, self.time = conn_id, arrived
        self.sent = []          # streamed replies: (time.monotonic(), content piece) per chunk sent
        self.done_at = None     # time.monotonic() once the whole reply was sent
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    @property
    def messages(self):
        j = self.json
        return (j.get("messages") or []) if isinstance(j, dict) else []

    @property
    def last_user(self):
        for m in reversed(self.messages):
            if isinstance(m, dict) and m.get("role") == "user":
                return m.get("content")
        return None

    def __repr__(self):
        return "Request(%s %s conn=%d, %d bytes)" % (self.method, self.path, self.conn_id,
                                                       len(self.body))


# -------------------------------------------------------------------- handler
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.fake = self.server.fake
        self.conn_id = self.fake._connected(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            self.fake._disconnected(self.connection)

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if not size:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _handle(self):
        arrived = time.monotonic()
        try:
            body = self._read_body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            req = Request(self.command, self.path, headers, body, self.conn_id, arrived)
            spec = self.fake._record(req)
            if spec.delay:
                self.fake._stop.wait(spec.delay)
            getattr(self, "_do_" + spec.kind)(req, **spec.kw)
        except (OSError, ValueError):  # client went away, or a malformed request
            self.close_connection = True

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _handle

    # -- low-level writers
    def _head(self, status, defaults, headers):
        hdrs = dict(defaults)
        for k, v in (headers or {}).items():
            for old in [o for o in hdrs if o.lower() == k.lower()]:
                del hdrs[old]
            hdrs[k] = v
        self.send_response(status)
        for k, v in hdrs.items():
            self.send_header(k, str(v))
        self.end_headers()

    def _send(self, status, body, ctype="application/json", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        self._head(status, {"Content-Type": ctype, "Content-Length": len(body)}, headers)
        self.wfile.write(body)

    def _stream_head(self, headers=None):
        self._head(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                         "Transfer-Encoding": "chunked"}, headers)

    def _chunk(self, data):
        if isinstance(data, str):
            data = data.encode()
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _event(self, payload):
        self._chunk("data: %s\n\n" % (payload if isinstance(payload, str) else json.dumps(payload)))

    def _abort(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- reply kinds
    def _do_reply(self, req, content, usage, finish_reason, chunk_size, chunk_delay, stream,
                  headers, close, reasoning, hold):
        self._reply(req, content, usage, finish_reason, chunk_size, chunk_delay, stream, headers,
                    reasoning, hold)
        req.done_at = time.monotonic()
        if close:
            self.close_connection = True

    def _reply(self, req, content, usage, finish_reason, chunk_size, chunk_delay, stream, headers,
               reasoning, hold=None):
        j = req.json if isinstance(req.json, dict) else {}
        if usage is None:
            p, c = max(1, len(req.body) // 4), max(1, len(content) // 4)
            usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
                     "prompt_tokens_details": {"cached_tokens": 0}}
        cid, model = "chatcmpl-%d" % next(self.fake._ids), j.get("model", "fake-model")
        base = {"id": cid, "created": int(time.time()), "model": model}
        if not (bool(j.get("stream")) if stream is None else stream):
            msg = {"role": "assistant", "content": content}
            if reasoning:
                msg["reasoning_content"] = reasoning
            body = dict(base, object="chat.completion", usage=usage, choices=[
                {"index": 0, "message": msg, "finish_reason": finish_reason}])
            return self._send(200, body, headers=headers)
        base["object"] = "chat.completion.chunk"
        self._stream_head(headers)
        thoughts = [("reasoning_content", reasoning[i:i + chunk_size])
                    for i in range(0, len(reasoning or ""), chunk_size)]
        pieces = thoughts + [("content", content[i:i + chunk_size])
                             for i in range(0, len(content), chunk_size)] or [("content", "")]
        for i, (key, piece) in enumerate(pieces):
            if i and chunk_delay:
                self.fake._stop.wait(chunk_delay)
            if hold is not None and i == len(pieces) - 1:
                hold.wait(30)
            delta = {"role": "assistant", key: piece} if i == 0 else {key: piece}
            self._event(dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]))
            self.wfile.flush()
            req.sent.append((time.monotonic(), piece))
        self._event(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish_reason}]))
        if (j.get("stream_options") or {}).get("include_usage"):
            self._event(dict(base, choices=[], usage=usage))
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")

    def _do_error(self, req, status, body, headers):
        ctype = "text/plain; charset=utf-8" if isinstance(body, (str, bytes)) else "application/json"
        self._send(status, body, ctype, headers)

    def _do_raw(self, req, status, body, headers):
        self._send(status, body, "application/json", headers)

    def _do_drop(self, req):
        self._abort()

    def _do_drop_mid_body(self, req):
        part = b'{"id": "chatcmpl-cut", "object": "chat.completion", "choices": [{"ind'
        self._head(200, {"Content-Type": "application/json", "Content-Length": 4096}, None)
        self.wfile.write(part)
        self._abort()

    def _do_sse(self, req, events, truncate, chunk_delay):
        self._stream_head()
        for i, ev in enumerate(events):
            if i and chunk_delay:
                self.fake._stop.wait(chunk_delay)
            self._chunk(ev) if isinstance(ev, bytes) else self._event(ev)     # bytes: sent as they are
        if truncate:
            return self._abort()
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")

    def _do_endless(self, req, piece, chunk_delay, headers):
        self._stream_head(headers)
        while not self.fake._stop.is_set():
            self._event({"id": "chatcmpl-endless", "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
            self.wfile.flush()
            req.sent.append((time.monotonic(), piece))
            if chunk_delay:
                self.fake._stop.wait(chunk_delay)

    def _do_hang(self, req, seconds):
        self.fake._stop.wait(seconds)
        self._abort()

    def _do_responses(self, req, text, urls, usage):
        j = req.json if isinstance(req.json, dict) else {}
        ann = [{"type": "url_citation", "url": u, "title": u} for u in urls]
        self._send(200, {
            "id": "resp_1", "object": "response", "status": "completed",
            "model": j.get("model", "fake-model"),
            "output": [{"type": "web_search_call", "status": "completed"},
                       {"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": ann}]}],
            "citations": list(urls),
            "usage": usage or {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70}})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):  # connection noise stays quiet
            super().handle_error(request, client_address)


# ----------------------------------------------------------------------- fake
class FakeAPI:
    def __init__(self):
        self.requests = []
        self.connections = 0
        self._queues = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._socks = set()
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self.port = self._server.server_address[1]
        self.url = "http://127.0.0.1:%d/v1" % self.port
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def add(self, *specs, path=None):
        """Queue replies. path=None: "/chat/completions" ("/responses" for responses_reply)."""
        with self._cond:
            for s in specs:
                if not isinstance(s, Spec):
                    raise TypeError("not a reply spec: %r" % (s,))
                self._queues.setdefault(path or s.path, []).append(s)

    def pending(self, path=None):
        """Number of scripted replies not yet used (for one path, or all)."""
        with self._cond:
            return sum(len(q) for p, q in self._queues.items() if path in (None, p))

    def chat_requests(self):
        return [r for r in list(self.requests) if r.path.split("?")[0].endswith(CHAT)]

    def responses_requests(self):
        return [r for r in list(self.requests) if r.path.split("?")[0].endswith(RESPONSES)]

    def wait_for_requests(self, n, timeout=10):
        with self._cond:
            return self._cond.wait_for(lambda: len(self.requests) >= n, timeout)

    def close(self):
        if self._stop.is_set():
            return
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        with self._cond:
            socks = list(self._socks)
        for s in socks:  # wake handler threads idling on keep-alive connections
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- called from handler threads
    def _connected(self, sock):
        with self._cond:
            self.connections += 1
            self._socks.add(sock)
            return self.connections

    def _disconnected(self, sock):
        with self._cond:
            self._socks.discard(sock)

    def _record(self, req):
        """Record the request and pick its reply spec."""
        with self._cond:
            self.requests.append(req)
            self._cond.notify_all()
            path = req.path.split("?")[0]
            keys = [k for k in self._queues if path.endswith(k) and self._queues[k]]
            if keys:
                return self._queues[max(keys, key=len)].pop(0)
            if req.method != "POST":
                return error(404, {"code": "not_found", "error": "fake server: POST only, unless scripted"})
        return error(418, {"code": "fake", "error": "fake server: no scripted reply left"})
