"""A fake MCP server on stdio, for the faults a real one rarely shows. `fakemcp.py hang` never
answers initialize. Tools: echo, env, big (10 MB of text), die (exits mid-call), garbage (answers
with what is not JSON-RPC), silent (never answers), ping (pings the client first), grow (adds a
tool and says so: notifications/tools/list_changed). tools/list comes in two pages (`fakemcp.py
odd-list`: a tool without a name, then a page whose tools are not a list). FAKEMCP_LOG
names a file that gets every line received. Stdlib only."""

import json
import os
import sys

TOOLS = ["echo", "env", "big", "die", "garbage", "silent", "ping", "grow"]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id, value):
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text(request_id, body, error=False):
    result(
        request_id,
        {
            "content": (
                [{"type": "text", "text": body}, {"type": "image", "data": "", "mimeType": "x"}]
                if body == "with an image"
                else [{"type": "text", "text": body}]
            ),
            "isError": error,
        },
    )


def call(request_id, name, args):
    if name == "echo":
        text(request_id, str(args.get("text")), error=args.get("fail", False))
    elif name == "env":
        text(request_id, json.dumps(dict(os.environ)))
    elif name == "big":
        text(request_id, "x" * (10 << 20))
    elif name == "die":
        sys.stderr.write("fatal: the fake exploded\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "garbage":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
    elif name == "ping":
        send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
        send({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"})
        pending.append(request_id)
    elif name == "grow":
        TOOLS.append("extra")
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        text(request_id, "grown")
    elif name == "extra":
        text(request_id, "extra ran")


def schema(name):
    return (
        {"type": "object", "properties": {"text": {"type": "string"}}}
        if name == "echo"
        else {"type": "object"}
    )


pending = []
log = open(os.environ["FAKEMCP_LOG"], "a") if os.environ.get("FAKEMCP_LOG") else None
sys.stderr.write("fakemcp: started\n")
sys.stderr.flush()
for line in sys.stdin:
    if log:
        log.write(line)
        log.flush()
    msg = json.loads(line)
    method, request_id = msg.get("method"), msg.get("id")
    if method == "initialize" and sys.argv[1:] != ["hang"]:
        result(
            request_id,
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "fake", "version": "1"},
            },
        )
    elif method == "tools/list" and sys.argv[1:] == ["odd-list"]:  # a nameless tool; no list
        cursor = (msg.get("params") or {}).get("cursor")
        odd = [{"description": "nameless"}, {"name": "echo", "inputSchema": schema("echo")}]
        result(request_id, {"tools": 5} if cursor else {"tools": odd, "nextCursor": "2"})
    elif method == "tools/list":
        page = TOOLS[4:] if (msg.get("params") or {}).get("cursor") == "2" else TOOLS[:4]
        listed = {
            "tools": [
                {"name": n, "description": "the %s tool" % n, "inputSchema": schema(n)}
                for n in page
            ]
        }
        result(request_id, dict(listed, nextCursor="2") if page == TOOLS[:4] else listed)
    elif method == "tools/call":
        call(request_id, msg["params"]["name"], msg["params"].get("arguments") or {})
    elif request_id == "p1" and pending:  # the client answered our ping
        text(pending.pop(), "pong: %s" % json.dumps(msg.get("result")))
