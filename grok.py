#!/usr/bin/env python3
"""grok: a minimal agent harness for xAI's Grok models (or any OpenAI-compatible server): the model
answers in a JSON contract and runs local tools. Standard library only, Python 3.8+. `grok --help`
lists the modes (chat, -p, --acp) and settings; grok_detailed.py loads this file as its engine."""

import os
import stat
import sys
import time
from collections import namedtuple
from contextlib import suppress

__version__ = "0.1.0"


class Lazy:
    """A module imported at the first use of one of its names: a start imports only what it uses."""

    def __init__(self, name):
        self.name = name

    def __getattr__(self, attr):
        __import__(self.name)
        module = globals()[self.name.replace(".", "_")] = sys.modules[self.name]    # from now on
        return getattr(module, attr)


(json, re, threading, subprocess, signal, select, socket, termios, tempfile, glob, fnmatch, difflib,
 itertools, shutil, urllib_parse, _thread, queue, textwrap, traceback, argparse, getpass, hashlib,
 base64, fcntl, ctypes, unicodedata, urllib_request, email_utils) = map(Lazy, (
    "json re threading subprocess signal select socket termios tempfile glob fnmatch difflib"
    " itertools shutil urllib.parse _thread queue textwrap traceback argparse getpass hashlib"
    " base64 fcntl ctypes unicodedata urllib.request email.utils").split())

# --- Constants and configuration ---

DEFAULT_BASE_URL = "https://api.x.ai/v1"
DEFAULT_MODEL = "grok-4.3"
KEY_VARS = ("GROK_API_KEY", "XAI_API_KEY")
ENV_FILES = ("~/.grok/.env", "~/.claude/.env", "./.env")     # your own key before a project's

PRICES = {"grok-4.3": (1.25, 0.20, 2.50), "grok-4.20": (1.25, 0.20, 2.50),
          "grok-3-mini": (0.30, 0.075, 0.50)}      # USD per 1M tokens: input, cached input, output
RETIRED_MODELS = ("grok-4-1-fast", "grok-4-fast", "grok-code-fast-1", "grok-3", "grok-4-0709")
WINDOWS = {"grok-4.3": 1000000, "grok-4.20": 2000000, "grok-3-mini": 131072}
DEFAULT_WINDOW = 131072

OUTPUT_HEAD, OUTPUT_TAIL = 30000, 5000      # bytes of tool output kept from its start, its end
PIPED_CAP = 100000          # bytes of piped stdin added to a -p prompt
STDIN_WAIT = 1.0            # seconds of silence that end a stdin pipe grok's parent holds open
READ_CAP, LIST_CAP = 100000, 500    # bytes read_file returns, entries list_files returns
ARG_CAP = 100000            # characters of a command or path run, of any argument the history keeps
APPROVAL_LINES, APPROVAL_CHARS = 40, 4000      # of a command or file shown before "s shows all"
RULES_CAP, RULES_TOTAL_CAP = 8000, 24000    # bytes of project rules per AGENTS.md/GROK.md, in all
MAX_STRIKES = 3             # invalid replies in a row before a turn fails
LOOP_NUDGE, LOOP_STOP = 2, 3    # rounds in a row, same calls and results: told, then stopped
RETRY_STATUSES = (408, 429) + tuple(s for s in range(500, 600) if s not in (501, 505))
RETRY_AFTER_CAP = 30.0      # seconds: a longer Retry-After is shortened to this
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)     # a symlink in place of a session file: an error
SEARCH_ESTIMATE = 0.05      # USD reserved for a web_search before its first cost is known
REPLY_CAP = 8 << 20         # bytes of one reply at most (or 1 KB per max_tokens, if more)
DENIED = "denied: the user did not allow this %s call; do not retry it, ask or take another way"
CONNECT_TIMEOUT = 15.0      # seconds to connect (a host may drop packets), at most GROK_TIMEOUT
SMALL_WINDOW = 4096         # tokens: under COMPACT_THRESHOLD of this, no window needs compacting
WINDOW_ASK_TIMEOUT = 3.0    # seconds to ask a server (not xAI's) its window, three ways at once
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts")    # writable in a sandbox
ENV_LINE = r"""\s*(?:export\s+)?(\w+)\s*=\s*(?:"([^"]*)"|'([^']*)'|(.*?))\s*(?:\s#.*)?$"""


def read_env_file(path, names):
    """The first of `names` set in a .env file (regular, < 64 KB, UTF-8/16); the last one wins."""
    got = read_regular(path, 65536)
    data = got[0] if got and len(got[0]) <= 65536 else b""
    text = data.decode("utf-16" if b"\0" in data[:4] else "utf-8-sig", "replace")
    matches = [re.match(ENV_LINE, line) for line in text.splitlines()]
    found = {m[1]: m[2] or m[3] or m[4] for m in matches if m and m[1] in names}
    return next((found[n] for n in names if found.get(n)), None)


def own_setting(names, files=ENV_FILES[:2]):
    """(value, source): the first of `names` in the environment or your .env `files`; ("", None)"""
    for source in ["$" + n for n in names] + list(files):
        value = (os.environ.get(source[1:], "").strip() if source.startswith("$")
                 else read_env_file(os.path.expanduser(source), names))
        if value:
            return value, source
    return "", None


def find_api_key():
    """(key, where it came from) or (None, None); a key with a space or a control: UserError."""
    key, source = own_setting(KEY_VARS, ENV_FILES)
    if any(ord(c) < 33 or 127 <= ord(c) < 160 for c in key):
        raise UserError("the API key in %s has whitespace or control characters: fix it" % source)
    if source == "./.env":
        sys.stderr.write("grok: using the API key in ./.env (no key of your own is set)\n")
    return key or None, source


def env_flag(name, default=False):
    """A yes/no setting: unset or empty is the default; "0", "false" and "no" are no, else yes."""
    value = os.environ.get(name, "")
    return value not in ("0", "false", "no") if value else default


def append_private(path, text):
    """text added to a file made 0600 (a symlink in its place is an OSError, not followed)."""
    with open(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NOFOLLOW, 0o600), "a") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


def ask_api_key():
    """(key typed on a terminal, "the terminal"), kept in ~/.grok/.env if agreed; none: UserError"""
    key, path = "", os.path.expanduser(ENV_FILES[0])
    with suppress(EOFError):
        if sys.stdin.isatty() and sys.stderr.isatty():
            sys.stderr.write("grok: no API key yet (make one at https://console.x.ai)\n")
            key = "".join(getpass.getpass("API key (hidden; empty to quit): ", sys.stderr).split())
    if not key:
        raise UserError("no API key: set GROK_API_KEY or XAI_API_KEY, or put "
                        "GROK_API_KEY=... in " + ", ".join(ENV_FILES))
    if (ask_tty("save it to ~/.grok/.env (0600)? [Y/n] ") or "y").lower()[0] == "y":
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            append_private(path, "\nGROK_API_KEY=%s\n" % key)
            sys.stderr.write("grok: saved to %s\n" % path)
        except OSError as e:
            sys.stderr.write("grok: not saved (%s: %s)\n" % (path, e.strerror or e))
    return key, "the terminal"


class Config:
    """Settings from flags, else the environment: read once (a session changes its Agent's)."""

    def __init__(self, model=None, cwd=None, always_approve=False, require_key=True, effort=None,
                 sandbox=None, net=None, tools=None, deny=(), rules=None, system_prompt=None,
                 max_iterations=None):
        self.api_key, self.key_source = find_api_key()
        if require_key and not self.api_key:
            self.api_key, self.key_source = ask_api_key()
        self.read_env(max_iterations)
        if model == "grok-build":
            model = None        # xAI's CLI's model name, which its clients pass: the default here
        self.model = model or own_setting(["GROK_MODEL"])[0] or DEFAULT_MODEL
        self.reasoning_effort = effort
        self.summary_model = os.environ.get("GROK_SUMMARY_MODEL") or self.model
        self.tools = list(TOOLS) if tools is None else tools
        self.deny, self.rules, self.system_prompt = deny, rules, system_prompt
        self.always_approve = always_approve or env_flag("GROK_ALWAYS_APPROVE")
        self.cwd = os.path.abspath(os.path.expanduser(cwd or os.getcwd()))
        if not os.path.isdir(self.cwd):
            raise UserError("--cwd: no such directory: %s" % self.cwd)
        skills = os.path.join(os.path.dirname(os.path.realpath(__file__)), "skills")
        data = os.path.join(os.environ.get("XDG_DATA_HOME") or "~/.local/share", "grok-agent")
        self.skills_dir = os.path.expanduser(os.environ.get("GROK_SKILLS_DIR") or skills)
        self.data_dir = os.path.expanduser(os.environ.get("GROK_DATA_DIR") or data)
        sandbox = sandbox or os.environ.get("GROK_SANDBOX") or "off"     # its backend: chosen once
        self.sandbox = None if sandbox == "off" != net else Sandbox(sandbox, net == "off", self.cwd)
        self.frozen = True

    def __setattr__(self, name, value):
        if getattr(self, "frozen", False):
            raise AttributeError("Config is read once: %s belongs on the session's Agent" % name)
        object.__setattr__(self, name, value)

    def read_env(self, max_iterations):
        """The settings only the environment gives: the server, how to talk to it, the limits."""
        self.base_url = (own_setting(["GROK_BASE_URL"])[0] or DEFAULT_BASE_URL).rstrip("/")
        url = check_base_url(self.base_url)
        self.xai = ("." + url.hostname).endswith(".x.ai")
        SECRETS.update(filter(None, (self.api_key, url.password)))
        self.prices = env_prices(self.xai)
        find_proxy(url.scheme, url.hostname)        # a bad proxy is named now, not after a request
        self.timeout = self.number("GROK_TIMEOUT", 300.0) or None      # 0: no limit (None: block)
        self.max_retries = int(self.number("GROK_MAX_RETRIES", 4, 20))
        self.backoff = self.number("GROK_RETRY_BACKOFF", 1.0, 60)
        self.stream = env_flag("GROK_STREAM", True)
        self.cost_limit = self.number("COST_LIMIT", 10.0)
        self.compact_threshold = self.number("COMPACT_THRESHOLD", 75.0, 100)
        self.window_set = int(self.number("GROK_CONTEXT_WINDOW", 0, 1e9))
        self.max_tokens = int(self.number("GROK_MAX_TOKENS", 0, 1e8)) or None
        rounds = int(self.number("GROK_MAX_ITERATIONS", 25))
        self.max_iterations = rounds if max_iterations is None else max_iterations
        self.loop_detection = env_flag("GROK_LOOP_DETECTION", True)
        self.bash_timeout = self.number("GROK_BASH_TIMEOUT", 180)
        temperature = os.environ.get("GROK_TEMPERATURE", "0.5").strip()      # empty: not sent
        self.temperature = self.number("GROK_TEMPERATURE", 0.5, 100) if temperature else None

    @staticmethod
    def number(name, default, most=1e6):
        """A number setting: unset or empty is the default; not a number from 0 to `most`: error."""
        value = os.environ.get(name, "").strip()
        with suppress(ValueError):
            if 0 <= float(value or default) <= most:    # (not NaN)
                return float(value or default)
        raise UserError("%s must be a number from 0 to %g, not %r" % (name, most, value))


def check_base_url(url):
    """The URL split (with a host name); a UserError now rather than an odd network error later."""
    if not url.startswith(("http://", "https://")):
        raise UserError("GROK_BASE_URL must start with http:// or https://, not %r" % url)
    if url.endswith("/chat/completions"):
        raise UserError("GROK_BASE_URL is the API's base (such as %s), not /chat/completions: "
                        "grok adds that" % url[:-len("/chat/completions")])
    if any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise UserError("GROK_BASE_URL must not contain spaces or control characters")
    try:
        u = urllib_parse.urlsplit(url)
        u.port
        if not u.hostname:
            raise UserError("GROK_BASE_URL has no host name: %r" % url)
        u.hostname.encode("idna")
    except (ValueError, UnicodeError) as e:
        raise UserError("GROK_BASE_URL is not a valid URL (%s): %r" % (e, url))
    return u


def env_prices(xai):
    """GROK_PRICES (USD per 1M tokens in, cached, out); unset: on xAI None (its table), else ()."""
    value = os.environ.get("GROK_PRICES", "").strip()
    with suppress(ValueError):
        prices = tuple(float(p) for p in value.split(",")) if value else (None if xai else ())
        if not value or len(prices) == 3 and all(0 <= p <= 10000 for p in prices):    # (not NaN)
            return prices
    raise UserError("GROK_PRICES must be IN,CACHED,OUT in USD per 1M tokens, not %r" % value)


def model_entry(table, model, default=None):
    """The entry of PRICES or WINDOWS for a model id or its dated variant; retired: grok-4.3's."""
    m = model.split("/")[-1]
    for name in sorted(table, key=len, reverse=True) + list(RETIRED_MODELS):    # the longest first
        if m == name or m.startswith(name + "-"):
            return table.get(name, table["grok-4.3"])
    return default


# Where a usage says each number, in Chat Completions' words (the Responses API's: input, output)
USAGE_FIELDS = (("input", "prompt_tokens"), ("output", "completion_tokens"),
                ("reasoning", "completion_tokens_details.reasoning_tokens"),
                ("cached", "prompt_tokens_details.cached_tokens"), ("total", "total_tokens"),
                ("ticks", "cost_in_usd_ticks"))


def usage_numbers(usage):
    """The one usage reader: USAGE_FIELDS >= 0 (0 if absent, ticks None); "odd": a value ignored."""
    n = {"odd": False}
    for name, chat in USAGE_FIELDS:
        for path in (chat, chat.replace("prompt", "input").replace("completion", "output")):
            value = usage
            for key in path.split("."):
                value = value.get(key) if isinstance(value, dict) else None
            if value is not None:
                break
        if type(value) not in (int, float) or not 0 <= value < 1e15:    # (a bool, NaN: odd)
            n["odd"], value = n["odd"] or value is not None, None
        n[name] = 0 if value is None and name != "ticks" else value
    n["total"] = n["total"] or n["input"] + n["output"] + n["reasoning"]
    return n


def usage_cost(model, usage, prices=None):
    """(USD, price known) of a call's usage: the server's figure, else by `prices` (None: xAI's)."""
    n = usage_numbers(usage)
    if n["ticks"] is not None:
        return n["ticks"] / 1e10, True
    prices = model_entry(PRICES, model) if prices is None else prices
    if not prices:
        return 0.0, not isinstance(usage, dict)
    cached = min(n["cached"], n["input"])
    tokens = (n["input"] - cached, cached, n["output"] + n["reasoning"])
    return sum(count * price for count, price in zip(tokens, prices)) / 1e6, True


# --- Errors: one root, a subclass per exit code ---

class GrokError(Exception):
    """The root: .exit_code; named data as keywords (ContextOverflow(message, window=N).window)."""
    exit_code = 4

    def __init__(self, message, **data):
        Exception.__init__(self, message)
        self.__dict__.update(data)


class UserError(GrokError):
    exit_code = 1           # something the user has to fix: a flag, the key, the config, a 4xx


class TransientError(GrokError):
    exit_code = 2           # the network or the server failed, even after retries


class AgentError(GrokError):
    exit_code = 3           # the model broke the contract, a tool was denied, a limit was reached


class ContextOverflow(UserError):
    """A request too big for the server's window: .window its size, .asked its tokens (or None)."""
    window = asked = None


class Cancelled(GrokError):
    exit_code = 130


class HTTPStatusError(Exception):
    def __init__(self, status, body):
        Exception.__init__(self, "HTTP %d" % status)
        self.status, self.text = status, body.decode("utf-8", "replace")

    def server_message(self):
        try:
            obj = json.loads(self.text)
        except (ValueError, RecursionError):        # an HTML page: its words, not its markup
            words = re.sub(r"(?s)<(script|style).*?</\1>|<[^>]*>", " ", self.text).split()
            return " ".join(words)[:300] or "(empty body)"
        err = isinstance(obj, dict) and obj.get("error", obj.get("message", obj.get("detail")))
        if isinstance(err, dict):
            err = err.get("message") or json.dumps(err)
        return str(err)[:500] if err else self.text[:300]

    def mentions(self, *words):
        return any(w in self.text.lower() for w in words)

    def overflow(self):
        """A ContextOverflow when the server says the request does not fit its window, else None."""
        words = "n_ctx", "exceed_context_size", "context length", "context window", "context_length"
        if self.status not in (400, 413) or not self.mentions(*words):
            return None
        m = re.search(r'(?i)(?:"n_ctx"\s*:\s*|context (?:window|length) (?:of|is) )(\d+)', self.text)
        size = m and int(m[1])
        m = re.search(r'(?i)(?:"n_prompt_tokens": ?|requested (?:tokens \()?)(\d+)', self.text)
        message = "the request does not fit the server's context window%s (HTTP %d): %s" % (
            "" if size is None else " of %d tokens" % size, self.status, self.server_message())
        return ContextOverflow(message, window=size, asked=m and int(m[1]))


class StreamBroken(Exception):
    """An SSE stream ended before the reply was complete."""


class ContractError(Exception):
    """A reply that breaks the contract; the message goes back to the model."""


class RetryableFault(TransientError):
    """Worth another try (the message scrubbed): .wait, seconds asked or None; .broke: a stream."""
    wait, broke = None, False


class SessionBusy(UserError):
    """A session another grok process has open (and locked)."""


class LimitReached(AgentError):
    """A limit ended the turn: .cause says which, "cost" (COST_LIMIT) or "rounds" (tool rounds)."""
    cause = "cost"


class Terminated(BaseException):
    """SIGTERM or SIGHUP (its number in args[0]): the turn is settled, then the process ends."""


class OutputClosed(GrokError):
    """stdout closed by its reader (`grok -p ... | head -1`): headless() stops quietly, exit 0."""
    exit_code = 0


class RpcError(Exception):
    """An error to answer a request with; .payload is its JSON-RPC error object."""

    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.payload = {"code": code, "message": message}


# --- Trust boundary: what models, tools, files, servers and sessions send, checked before use ---

SECRETS = set()         # the configured key and URL password: Config adds them
SECRET_PATTERNS = (      # compiled on first use (re caches them)
    (r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----.*?"
     r"(-----END [A-Z ]*PRIVATE KEY( BLOCK)?-----|\Z)", "[REDACTED_PRIVATE_KEY]"),
    (r"\b(xai-[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{20,})", "[REDACTED_API_KEY]"),
    (r"\b(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})", "[REDACTED_GH_TOKEN]"),
    (r"\b(xox[abeoprs]|xapp)-[0-9A-Za-z\-]{10,}", "[REDACTED_SLACK_TOKEN]"),
    (r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", "[REDACTED_AWS_KEY]"),
    (r"(?i)(aws_secret_access_key\W{0,4})[A-Za-z0-9/+=]{40}", r"\1[REDACTED_AWS_SECRET]"),
    (r"(?i)(Bearer\s+)[A-Za-z0-9\-_.~+/]{20,}=*", r"\1[REDACTED_TOKEN]"),
    (r"(?i)(Authorization:\s*Basic\s+)[A-Za-z0-9+/]{8,}=*", r"\1[REDACTED_TOKEN]"),
    (r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@", r"\1[REDACTED]@"))


def scrub(value, extra=()):
    """Credentials (keys, tokens, URL userinfo) redacted in a text, or in a JSON value's strings."""
    if isinstance(value, dict):
        return {k: scrub(v, extra) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, extra) for v in value]
    if not isinstance(value, str):
        return value
    keys = [(re.escape(s), "[REDACTED_API_KEY]") for s in (*extra, *SECRETS) if len(s or "") >= 8]
    for pattern, replacement in keys + list(SECRET_PATTERNS):
        value = re.sub(pattern, replacement, value)
    return value


def visible(text, newlines=True):
    """For display: what would not print as itself (controls, bidi...) escaped, but \\t and \\n."""
    def escaped(match):     # \x0d, \u200b, \U000e0041; or the character, if it prints as itself
        char = match.group()
        blank = re.match("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\uffa0"     # fillers,
                         "\ufe00-\ufe0f\U000e0000-\U000e0fff]", char)         # variation selectors
        if not blank and unicodedata.category(char) not in "Cc Cf Co Cs Cn Zl Zp".split():
            return char
        return "\\x%02x" % ord(char) if ord(char) < 256 else ascii(char)[1:-1]
    text = str(text) if newlines else str(text).replace("\n", "\\n")
    return re.sub("[^\t\n -~]", escaped, text)


def open_to_others(path, owners):
    """Why others could plant files in a directory (not owners', group/world-writable), or None."""
    try:
        info = os.stat(path)
    except OSError as e:
        return "unusable (%s)" % (e.strerror or e)
    if info.st_uid not in owners:
        return "owned by another user"
    return "group/world-writable" if info.st_mode & 0o22 else None


def data_dir_problem(path):
    """Why the data dir (made 0700 if missing) is unsafe (others could plant files), or None."""
    with suppress(OSError):     # open_to_others says why it is unusable
        os.makedirs(path, mode=0o700, exist_ok=True)
    why = open_to_others(path, (os.getuid(),))
    return why and "the data dir %s (GROK_DATA_DIR) is %s: not used (make it yours, 0700)" % (path, why)


def read_regular(path, cap):
    """(first cap+1 bytes, size) of a regular file (never a device, pipe or socket), or None."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)     # opening a FIFO must not block
    with suppress(OSError), open(os.open(path, flags), "rb") as f:
        info = os.fstat(f.fileno())
        return (f.read(cap + 1), info.st_size) if stat.S_ISREG(info.st_mode) else None


def clean_text(text):
    """Undecodable bytes (surrogate escapes of stdin, argv) as U+FFFD, so the text is UTF-8."""
    with suppress(UnicodeEncodeError):
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text.encode("utf-8", "replace").decode("utf-8")


def strict_json(obj, **options):
    """json.dumps() as every parser takes it: NaN and infinities (a model's) become null."""
    with suppress(ValueError):
        return json.dumps(obj, allow_nan=False, **options)
    return json.dumps(json.loads(json.dumps(obj), parse_constant=lambda name: None), **options)


def canonical(cwd, path):
    """The path as the file system resolves it: against cwd, `..` and every symlink followed."""
    return os.path.realpath(os.path.join(cwd, os.path.expanduser(str(path))))


def inside(path, directory):
    """Whether a canonical path is the directory or under it (after resolving the directory)."""
    directory = os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def path_glob(pattern, path):
    """A glob on a path: `*` and `?` stay within one path component, `**` crosses `/`."""
    rx = re.escape(pattern).replace(r"\*\*/", "\0").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
    return re.fullmatch(rx.replace(r"\?", "[^/]").replace("\0", "(?:.*/)?"), path) is not None


def needs_approval(call, free_dirs=()):
    """bash, write_file, MCP tools always; read_file and list_files outside cwd and free dirs."""
    if call.name in NEEDS_APPROVAL or call.name not in TOOLS:
        return True
    path = call.args.get("path") or "."
    return (call.name in ("read_file", "list_files") and isinstance(path, str)
            and not any(inside(canonical(call.cwd, path), d) for d in [call.cwd, *free_dirs]))


def approval_text(call, full=False):
    """(text, characters hidden) of an approval: the command, or resolved path and content/diff."""
    head = "bash (sandbox: %s)" % call.sandbox.label if call.sandbox else "bash"
    body = str(call.args.get("command"))
    if call.name.startswith("mcp__"):
        head = "MCP server %s, tool %s" % tuple(call.name.split("__", 2)[1:])
        body = json.dumps(call.args, indent=2)
    elif call.name != "bash":
        path = canonical(call.cwd, call.args.get("path") or ".")
        head, body = "%s %s (outside the working directory)" % (call.name, path), ""
    if call.name == "write_file":
        body = call.args.get("content", "")
        body = body if isinstance(body, str) else json.dumps(body, indent=2)
        old = old_text(path)
        state = "replaces the file" if os.path.exists(path) else "a new file"
        state += "; the changes" if old else ""
        head = "write_file %s (%d bytes, %s)" % (path, len(body.encode("utf-8", "replace")), state)
        if old is not None:
            diff = difflib.unified_diff(old.splitlines(True), body.splitlines(True), "now", "new")
            body = "".join(diff) or "(no change)"
    text = visible(body[:-1] if body.endswith("\n") else body)
    shown = text if full else "\n".join(text.split("\n")[:APPROVAL_LINES])[:APPROVAL_CHARS]
    lines = [visible(head, newlines=False)] + ["  " + line for line in shown.split("\n") if body]
    if len(shown) < len(text):
        lines.append("  [... %d more characters (%d lines) not shown: answer s to see all]"
                     % (len(text) - len(shown), text.count("\n") - shown.count("\n")))
    return "\n".join(lines), len(text) - len(shown)


def arg_problem(name, args):
    """Why a call's arguments cannot run ("error: ..."), or None; before approval or file access."""
    if name not in TOOLS:       # an MCP tool: its server checks its arguments
        return None
    spec = TOOLS[name].args
    key = next(iter(spec))
    value = args.get(key)
    if not (isinstance(value, str) and value.strip() or spec[key].endswith("?") and not value):
        return "error: %s needs a non-empty string %r argument" % (name, key)
    if isinstance(value, str) and len(value) > ARG_CAP:
        return ("error: not run: the %s is too long (%d characters, at most %d); put long text in "
                "a file with write_file" % (key, len(value), ARG_CAP))
    for k in spec:
        texts = args.get(k) if isinstance(args.get(k), list) else [args.get(k)]
        if any(re.search("[\0\ud800-\udc7f\udd00-\udfff]", t) for t in texts if isinstance(t, str)):
            return "error: not run: the %s holds a NUL or a lone surrogate, which text cannot" % k


def rule_globs(call, rules):
    """--allow/--deny globs for this call: plain ones, xAI CLI's Bash(...), Write/Edit/Read(...)."""
    kinds = dict(Bash="bash", Write="write_file", Edit="write_file", Read="read_file list_files")
    found = [(re.fullmatch(r"(Bash|Write|Edit|Read)(?:\((.*)\))?", r, re.S), r) for r in rules]
    return [r if not m else re.sub(r":\*$", "*", m[2]) if m[2] is not None else
            "*" if call.name == "bash" else "/**" for m, r in found
            if not m or call.name in kinds[m[1]].split()]


def rule_matches(call, rules, deny=False):
    """--allow/--deny: a glob on bash's command (deny: or a command in it), a path, an MCP name."""
    globs = rule_globs(call, rules)
    if call.name not in TOOLS:      # an MCP tool
        return any(fnmatch.fnmatchcase(call.name, g) for g in globs)
    if call.name == "bash" and deny:
        command = str(call.args.get("command"))
        parts = [command] + re.split(r"[;&|<>$`()\n]+", command)
        return any(fnmatch.fnmatchcase(part.strip(), g) for part in parts for g in globs)
    value = call.args.get("command" if call.name == "bash" else "path")
    value = value or ("." if call.name == "list_files" else "")
    if not isinstance(value, str) or not value:
        return False
    if call.name == "bash":
        free = "[^;&|<>$`()\n]"        # what a `*` or `?` stands for: anything but a shell operator
        return any(re.fullmatch(re.escape(g).replace(r"\*", free + "*").replace(r"\?", free), value)
                   for g in globs)
    full, root = canonical(call.cwd, value), os.path.realpath(call.cwd)    # relative globs: in cwd
    relative = os.path.relpath(full, root) if inside(full, root) else None
    return any(path_glob(os.path.normpath(g), full if os.path.isabs(g) else relative)
               for g in map(os.path.expanduser, globs) if os.path.isabs(g) or relative)


# --- HTTP client: keep-alive, retries with backoff, SSE ---

def json_bytes(obj):
    """UTF-8 JSON; a lone surrogate (from a non-UTF-8 file name) becomes a \\u escape."""
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "backslashreplace")


def parse_retry_after(value, now=None, per_second=1):
    """Seconds to wait from a Retry-After (seconds, 1/per_second units, an HTTP date), or None."""
    with suppress(TypeError, ValueError, OverflowError):    # neither a number nor a date: None
        try:
            seconds = float(value) / per_second
        except ValueError:
            seconds = email_utils.mktime_tz(email_utils.parsedate_tz(value)) - (now or time.time())
        return None if seconds != seconds else min(RETRY_AFTER_CAP, max(0.0, seconds))   # (not NaN)


def retry_delay(attempt, backoff, retry_after=None):
    """Exponential backoff with up to 25% jitter; a server's Retry-After is a lower bound."""
    jitter = int.from_bytes(os.urandom(2), "big") / 65535.0
    delay = backoff * (2 ** (attempt - 1)) * (1 + 0.25 * jitter)
    return delay if retry_after is None else max(retry_after, min(delay, RETRY_AFTER_CAP))


class Client:
    """POSTs JSON to an OpenAI-compatible server over persistent connections."""

    def __init__(self, base_url, api_key, timeout=300.0, max_retries=4, backoff=1.0, notice=None):
        u = urllib_parse.urlsplit(base_url)
        self.https, self.host = u.scheme == "https", u.hostname or "localhost"
        self.port = u.port or (443 if self.https else 80)
        self.proxy = find_proxy(u.scheme, self.host)
        # through a plain-http proxy the request line names the whole URL (https: a CONNECT tunnel)
        via = self.proxy if not self.https else None
        self.prefix = ("http://" + u.netloc if via else "") + u.path.rstrip("/")
        self.headers = {"Content-Type": "application/json", "User-Agent": "grok.py/" + __version__,
                        "Authorization": "Bearer " + (api_key or ""), **(via[2] if via else {})}
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff
        self.notice = notice or (lambda text: None)
        self.conv_id, self._idle, self._busy, self._lock = None, [], set(), threading.Lock()

    def _connect(self):
        """(connection, reused): an idle one, else a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        if not self.https and "ssl" not in sys.modules:     # plain http: spare ssl's 4 MB
            sys.modules["ssl"] = None       # http.client's optional `import ssl` then fails at once
            try:
                import http.client
            finally:
                del sys.modules["ssl"]
        import http.client
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        timeout = min(self.timeout or CONNECT_TIMEOUT, CONNECT_TIMEOUT)     # (then GROK_TIMEOUT)
        conn = kind(*(self.proxy[:2] if self.proxy else (self.host, self.port)), timeout=timeout)
        if self.proxy and self.https:
            conn.set_tunnel(self.host, self.port, self.proxy[2])
        return conn, False

    def abort(self):
        """Break every request in flight (from another thread, to cancel)."""
        with self._lock:
            for conn in self._busy:
                self._shut(conn)

    def _shut(self, conn):
        """Break conn's request: to cancel, or at its deadline (conn.reading: see _send)."""
        with suppress(OSError, AttributeError):     # (AttributeError: no socket opened yet)
            (conn.sock or conn.reading).shutdown(socket.SHUT_RDWR)

    def close(self):
        with self._lock:
            while self._idle:
                self._idle.pop().close()

    def _send(self, conn, reused, request, cancel):
        ssl = sys.modules.get("ssl")
        closed = (ConnectionError,) + ((ssl.SSLEOFError, ssl.SSLZeroReturnError) if ssl else ())
        for again in (reused, False):
            try:
                conn.request(*request)
                conn.reading = conn.sock    # http.client drops conn.sock for a reply that closes
                conn.sock.settimeout(self.timeout)
                if cancel.is_set():      # abort() may have come before the socket
                    raise Cancelled("cancelled")
                return conn.getresponse()
            except closed:      # the server closed the idle keep-alive: reconnect once, not a retry
                if not again or cancel.is_set():
                    raise
            conn.close()

    def get(self, path, payload=None):
        """The JSON answer to GET `path` (POST, with a payload): one try, its failure raised."""
        method, body = ("POST", json_bytes(payload)) if payload else ("GET", None)
        return self._attempt((method, path, body, self.headers), threading.Event())

    def probe(self, path, payload=None):
        """get() of `path` on the server's root, or None."""
        with suppress(GrokError, HTTPStatusError, ContractError):
            return self.get(re.sub("/v1$", "", self.prefix) + path, payload)

    def post(self, path, payload, on_stream=None, cancel=None, no_retry=None, cap=REPLY_CAP):
        """The JSON reply (or on_stream(reader)); faults, 429 and 5xx retried with backoff."""
        conv = {"x-grok-conv-id": self.conv_id} if self.conv_id else {}
        headers = dict(self.headers, Accept="text/event-stream" if on_stream else "*/*", **conv)
        request = ("POST", self.prefix + path, json_bytes(payload), headers)
        cancel, most = cancel or threading.Event(), self.max_retries
        attempt = breaks = delay = 0
        while not cancel.wait(delay):       # (wait() returns whether cancel is set)
            try:
                return self._attempt(request, cancel, on_stream, no_retry, cap)
            except RetryableFault as fault:
                why, attempt, breaks = str(fault), attempt + 1, breaks + fault.broke
                if breaks == 2 and on_stream and attempt <= most:    # the caller asks unstreamed
                    raise StreamBroken(why)
                if cancel.is_set():
                    break
                if attempt > most:
                    raise TransientError("%s (gave up after %d retries)" % (why, most))
                delay = retry_delay(attempt, self.backoff, fault.wait)
                self.notice("%s; retrying in %.1fs (%d/%d)" % (why, delay, attempt, most))
        raise Cancelled("cancelled")

    def _attempt(self, request, cancel, on_stream=None, no_retry=None, cap=REPLY_CAP):
        """One try of a request (method, URL, body, headers) within GROK_TIMEOUT and `cap` bytes."""
        conn, reused = self._connect()      # (imports http.client, without ssl for plain http)
        with self._lock:
            self._busy.add(conn)
        reusable, started = False, time.monotonic()
        deadline = threading.Timer(self.timeout or threading.TIMEOUT_MAX, self._shut, (conn,))
        with suppress(RuntimeError):    # no thread to be had: the socket timeouts alone bound it
            deadline.start()        # it shuts the socket, cutting any read, however slow
        try:
            resp = self._send(conn, reused, request, cancel)
            reader, ctype = ReplyReader(resp, cap), resp.getheader("Content-Type") or "-"
            streamed = on_stream and "text/event-stream" in ctype and resp.status < 300
            result = on_stream(reader) if streamed else None
            data = reader.read()        # all of it (a stream: its end): the connection is reusable
            reusable = not resp.will_close
            if resp.status >= 300 and ("html" not in ctype or resp.status in RETRY_STATUSES):
                raise self._refusal(resp, data, no_retry)   # (an HTML page: _json names it)
            return result if streamed else self._json(request, resp, ctype, data)
        except Exception as e:      # a read cut at the deadline may end in any of these
            late = self.timeout and time.monotonic() - started >= self.timeout
            raise self._fault(TimeoutError() if late else e)
        finally:
            deadline.cancel()
            with self._lock:
                self._busy.discard(conn)
                if reusable:        # (shut by a late deadline: _send reconnects)
                    self._idle.append(conn)
            if not reusable:
                conn.close()

    def _refusal(self, resp, data, no_retry):
        """The error of a non-2xx reply: for 429, 5xx a RetryableFault unless no_retry(it)."""
        status = resp.status
        if status < 400:
            where = resp.getheader("Location") or "?"
            return UserError("the server at %s answered HTTP %d, a redirect to %s: grok does not"
                             " follow redirects (the API key goes to GROK_BASE_URL only); set"
                             " GROK_BASE_URL to the address you mean" % (self.host, status, where))
        err = HTTPStatusError(status, data)
        if status not in RETRY_STATUSES or (no_retry and no_retry(err)):
            return err
        wait = parse_retry_after(resp.getheader("Retry-After"))
        if wait is None:        # OpenAI's header
            wait = parse_retry_after(resp.getheader("retry-after-ms"), per_second=1000)
        what = ("rate limited" if status == 429 else "server error", status, err.server_message())
        return RetryableFault(scrub("%s (HTTP %d): %s" % what), wait=wait)

    def _json(self, request, resp, ctype, data):
        """The reply's JSON; if it is HTML or no JSON, a UserError naming the URL and the reply."""
        with suppress(ValueError, RecursionError):
            if "html" not in ctype:
                return json.loads(data.decode("utf-8", "replace"))
        method, url = request[:2]
        if "://" not in url:
            url = "http%s://%s:%d%s" % ("s" * self.https, self.host, self.port, url)
        said = HTTPStatusError(resp.status, data).server_message()[:120]
        raise UserError(scrub("%s %s did not answer with JSON (HTTP %d, %s): %r; is GROK_BASE_URL"
                              " an OpenAI-compatible API (its base, as http://localhost:8080/v1)?"
                              % (method, url, resp.status, ctype, said)))

    def _fault(self, e):
        """What to raise for e: a RetryableFault, an error retrying cannot help, or e (no fault)."""
        import http.client
        if not isinstance(e, (OSError, StreamBroken, http.client.HTTPException, ValueError)):
            return e        # (ValueError: defensive: no parse error in http.client ends the REPL)
        ssl = sys.modules.get("ssl")
        if ssl and isinstance(e, ssl.CertificateError):
            why = getattr(e, "verify_message", None) or e
            return UserError("the TLS certificate of %s is not trusted (%s): check GROK_BASE_URL,"
                             " or point SSL_CERT_FILE at your CA bundle" % (self.host, why))
        where = ("%s:%d, the proxy in HTTP%s_PROXY" % (*self.proxy[:2], "S" * self.https)
                 if self.proxy else "%s:%d, the server in GROK_BASE_URL" % (self.host, self.port))
        host, name, short = self.host, type(e).__name__, str(e)[:100]
        problems = (        # the first whose exception types e is one of
            (socket.gaierror, "cannot resolve host %s (DNS)" % where),
            (ConnectionRefusedError, "connection refused by %s: is it running?" % where),
            ((socket.timeout, TimeoutError), "no complete reply from %s within the timeout"
                                             " (GROK_TIMEOUT, for the whole reply)" % host),
            (StreamBroken, "the reply stream from %s broke off: %s" % (host, e)),
            ((http.client.RemoteDisconnected, http.client.IncompleteRead, ConnectionResetError,
              BrokenPipeError), "connection to %s dropped (%s)" % (host, name)),
            ((ValueError, http.client.BadStatusLine, http.client.LineTooLong,
              http.client.UnknownProtocol), "garbled reply from %s (%s: %s)" % (host, name, short)),
            (Exception, "network error talking to %s: %s" % (host, e)))
        problem = scrub(next(text for kinds, text in problems if isinstance(e, kinds)))
        if isinstance(e, (socket.gaierror, ConnectionRefusedError)):      # nothing answers there
            return TransientError(problem)
        return RetryableFault(problem, broke=isinstance(e, StreamBroken))


class ReplyReader:
    """A reply body read within a size cap: an endless fast stream cannot hold the turn."""

    def __init__(self, resp, cap):
        self.resp, self.cap, self.size = resp, cap, 0

    def _count(self, data):
        self.size += len(data)
        if self.size > self.cap:
            raise ContractError("the reply passed %d MB and was abandoned" % (self.cap >> 20))
        return data

    def readline(self):
        return self._count(self.resp.readline(self.cap + 1 - self.size))

    def read(self):
        data = b"".join(iter(lambda: self._count(self.resp.read(65536)), b""))
        if self.resp.length:        # the connection ended before Content-Length was reached
            raise StreamBroken("%d bytes of the reply missing" % self.resp.length)
        return data


def find_proxy(scheme, host):
    """(host, port, headers) of the http(s)_proxy, or None (none set, or no_proxy exempts host)."""
    url = os.environ.get(scheme + "_proxy") or os.environ.get(scheme.upper() + "_PROXY")
    if not url or urllib_request.proxy_bypass_environment(host):
        return None
    u = urllib_parse.urlsplit(url if "://" in url else "http://" + url)
    port = None
    with suppress(ValueError):      # a port that is not one
        port = u.hostname and (u.port or 1080)
    if not port:
        raise UserError("%s_proxy / %s_PROXY is not a proxy URL (HOST:PORT, a port up to 65535): %r"
                        % (scheme, scheme.upper(), url))
    if u.username is None:
        return u.hostname, port, {}
    user = ":".join(urllib_parse.unquote(part or "") for part in (u.username, u.password)).encode()
    return u.hostname, port, {"Proxy-Authorization": "Basic " + base64.b64encode(user).decode()}


class ChatResult:
    def __init__(self, content, finish_reason=None, usage=None, response_id=None, problem=None):
        # a server's list of parts becomes JSON text: the contract check says why it is no answer
        self.content = content if isinstance(content, (str, type(None))) else json.dumps(content)
        self.finish_reason = finish_reason if isinstance(finish_reason, str) else None
        self.usage = usage if isinstance(usage, dict) else {}
        self.tokens = usage_numbers(usage)      # what the rest of the program reads of the usage
        self.problem = problem                  # a reply abandoned as too large: a strike
        self.id = response_id if isinstance(response_id, str) else None


def read_chat_stream(resp, on_delta, on_thought=None):
    """A ChatResult of an SSE chat stream; an error in it (llama.cpp: an error: line) is raised."""
    parts, finish, usage, response_id = [], None, None, None
    for line in iter(resp.readline, b""):
        field, _, data = (part.strip() for part in line.partition(b":"))
        if field == b"data" and data == b"[DONE]":
            break
        try:
            chunk = json.loads(data.decode("utf-8", "replace")) if field == b"data" else None
        except (ValueError, RecursionError):
            raise StreamBroken("a stream chunk was not JSON: %r" % data[:80])
        if field == b"error" or isinstance(chunk, dict) and chunk.get("error"):
            code = re.search(rb'"code"\s*:\s*([45]\d\d)\b', data)      # the status, else 500
            raise HTTPStatusError(int(code.group(1)) if code else 500, data)
        delta = parse_chat_reply(chunk, on_thought, "delta")
        parts.append(deliver(delta.content, on_delta))
        finish = delta.finish_reason or finish
        usage = delta.usage or usage
        response_id = delta.id or response_id
    else:
        if finish is None:
            raise StreamBroken("no end of stream")
    return ChatResult("".join(parts), finish, usage, response_id)


def deliver(piece, callback):
    """piece if it is text (given to callback, if any), else ""."""
    piece = piece if isinstance(piece, str) else ""
    if piece and callback:
        callback(piece)
    return piece


def parse_chat_reply(obj, on_thought=None, part="message"):
    """A ChatResult of a reply's first choice (of a stream's chunk, with part "delta")."""
    obj = obj if isinstance(obj, dict) else {}
    choices, usage = obj.get("choices"), obj.get("usage")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) and obj.get("error"):
        raise HTTPStatusError(500, json.dumps(obj).encode())
    choice = choice if isinstance(choice, dict) else {}
    msg = choice.get(part) if isinstance(choice.get(part), dict) else {}
    deliver(msg.get("reasoning_content"), on_thought)
    return ChatResult(msg.get("content"), choice.get("finish_reason"), usage, obj.get("id"))


class ResponseStreamer:
    """The text of the top-level "response" string of a JSON object fed in pieces, as it comes."""

    # raw string text to its last whole character: an escape or a surrogate pair waits for its end
    WHOLE = r'(?s)(?:[^\\]|\\[^u]|\\u(?![dD][89abAB]).{4}|\\u.{4}(?=[^\\]|\\[^u]|\\u.{4}))*'

    def __init__(self):
        self.tool_calls = "unknown"     # the "tool_calls" list so far: "empty", "nonempty" or this
        self.key, self.raw, self.depth, self.cut = None, None, 0, 0     # raw: the string being read
        self.colon = self.escaped = self.response = False

    def feed(self, text):
        out = []
        for ch in text:
            if self.raw is None:
                self._structure(ch)
            elif ch == '"' and not self.escaped:        # the end of the string
                if self.depth == 1:     # a top-level key, or a value (the next key replaces it)
                    self.key = self._decode("".join(self.raw))
                out.append(self._take(whole=True))
                self.raw, self.response = None, False
            else:
                self.escaped = ch == "\\" and not self.escaped
                self.raw.append(ch)
        out.append(self._take())
        return "".join(out)

    def _structure(self, ch):
        if self.depth == 2 and self.key == "tool_calls" and ch not in " \t\r\n]":
            self.tool_calls = "nonempty"
        elif self.depth == 1 and self.key == "tool_calls" and ch == "[":
            self.tool_calls = "empty"
        if ch == '"':
            self.raw, self.cut = [], 0
            self.response = self.depth == 1 and self.colon and self.key == "response"
        self.depth += (ch in "{[") - (ch in "}]")
        if not ch.isspace():
            self.colon = self.depth == 1 and ch == ":"

    def _take(self, whole=False):
        """The response text not given out yet: to the last whole character, or all at its end."""
        if not self.response:
            return ""
        raw = "".join(self.raw[self.cut:])
        raw = raw if whole else re.match(self.WHOLE, raw).group()
        self.cut += len(raw)
        return re.sub("[\ud800-\udfff]", "\ufffd", self._decode(raw))     # (unprintable)

    @staticmethod
    def _decode(raw):
        with suppress(ValueError):          # a bad escape: the text without it
            return json.loads('"%s"' % raw, strict=False)
        return raw.replace("\\", "")


# --- The JSON contract ---

class Contract(namedtuple("Contract", "name extra_properties extra_prompt max_tokens",
                          defaults=({}, "", 4000))):
    """What the model is asked to return: the schema, its description, defaults."""

    def schema(self, tools):
        calls = [{"type": "object", "required": ["tool", "args"], "additionalProperties": False,
                  "properties": {"tool": {"type": "string", "enum": [name]}, "args": tool.schema()}}
                 for name, tool in tools.items()]
        items = {"anyOf": calls} if calls else {"type": "object"}   # {} breaks llama.cpp's grammars
        props = {**self.extra_properties, "tool_calls": {"type": "array", "items": items,
                                                         "maxItems": MAX_CALLS if calls else 0},
                 "response": {"type": ["string", "null"]}, "done": {"type": "boolean"}}
        return {"type": "object", "properties": props, "required": list(props)}


MINIMAL = Contract("grok_reply")
REPLY_SHAPE = '{"tool_calls": [{"tool": NAME, "args": {...}}], "response": STRING or null, "done": BOOL}'


def extract_json_object(text, cut=False):
    """The reply's JSON object amid fences or prose (if `cut`, all of it); control chars pass."""
    text, decoder, broken = text.strip(), json.JSONDecoder(strict=False), None
    with suppress(ValueError, RecursionError):
        return decoder.decode(text)
    if cut:     # a reply cut off at max_tokens may still hold an inner object: never take that
        raise ContractError("the reply was cut off at max_tokens before its JSON ended:"
                            " reply shorter, with fewer tool calls")
    for brace in itertools.islice(re.finditer("{", text), 20):
        try:
            obj = decoder.raw_decode(text, brace.start())[0]
            if broken is None or {"tool_calls", "response", "done"} & set(obj):    # not inner args
                return obj
        except (ValueError, RecursionError) as e:
            broken = broken or e
    raise ContractError("the reply is not a JSON object" + (" (%s)" % broken if broken else ""))


def parse_reply(content, tool_names, finish_reason=None):
    """Validate one assistant message against the contract; returns a clean dict."""
    if content is None or not str(content).strip():
        raise ContractError("the reply was empty")
    obj = extract_json_object(str(content), cut=finish_reason == "length")
    if not isinstance(obj, dict):
        raise ContractError("the reply must be a JSON object")
    calls = obj.get("tool_calls") or []
    calls = [calls] if isinstance(calls, dict) else calls
    if not isinstance(calls, list):
        raise ContractError('"tool_calls" must be an array')
    clean = [clean_call(i, call, tool_names) for i, call in enumerate(calls)]
    response = obj.get("response")
    response = str(response) if isinstance(response, (int, float)) else response
    if response is not None and not isinstance(response, str):
        raise ContractError('"response" must be a string or null')
    if not clean and not (response and response.strip()):
        raise ContractError("the reply has neither tool_calls nor a response")
    done = obj.get("done")
    done = done.strip().lower() == "true" if isinstance(done, str) else done
    obj.update(tool_calls=clean, response=response, done=not clean if done is None else bool(done))
    return obj


def clean_call(i, call, tool_names):
    """{"tool", "args"} of one entry of tool_calls (OpenAI's "name" and "arguments" too)."""
    if not isinstance(call, dict):
        raise ContractError("tool_calls[%d] must be an object with \"tool\" and \"args\"" % i)
    name, args = call.get("tool", call.get("name")), call.get("args", call.get("arguments"))
    if isinstance(args, str):
        with suppress(ValueError, RecursionError):
            args = json.loads(args) if args.strip() else {}
    if not isinstance(name, str) or not name:
        raise ContractError("tool_calls[%d] has no \"tool\" name" % i)
    if name not in tool_names:
        raise ContractError("unknown tool %r; the tools are: %s" % (name, ", ".join(tool_names) or "none"))
    if not isinstance(args or {}, dict):
        raise ContractError("tool_calls[%d].args must be an object" % i)
    return {"tool": name, "args": args or {}}


def kept_reply(content, reply):
    """The reply as the history keeps it: an argument over ARG_CAP becomes a note, not resent."""
    if len(content) <= ARG_CAP:
        return content
    note = "[%d characters, not kept]"
    calls = [dict(c, args={k: note % len(str(v)) if len(str(v)) > ARG_CAP else v
                           for k, v in c["args"].items()}) for c in reply["tool_calls"]]
    return json.dumps(dict(reply, tool_calls=calls))


def corrective_message(problem):
    return ("Your last reply broke the JSON contract: %s. Reply again with exactly one JSON"
            " object: %s." % (problem, REPLY_SHAPE))


# --- Tools: one function each, one dict to dispatch ---

class Sandbox:
    """--sandbox: bash commands run under bubblewrap or Landlock and write only in writable(cwd)."""

    def __init__(self, profile, net_off, cwd):
        forced = os.environ.get("GROK_SANDBOX_BACKEND", "")
        if profile not in ("workspace", "read-only"):
            raise UserError("--sandbox/GROK_SANDBOX %r: use workspace or read-only (or off, the "
                            "default; --sandbox-network off needs one of the first two)" % profile)
        if forced not in ("", "bwrap", "landlock"):
            raise UserError("GROK_SANDBOX_BACKEND must be bwrap or landlock, not %r" % forced)
        self.profile, self.net_off, problems = profile, net_off, []
        self.tmp = os.path.realpath(tempfile.gettempdir())
        if profile == "read-only":      # a temp dir of its own, the only place commands write
            self.tmp = os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="grok-", dir=self.tmp)
            __import__("atexit").register(__import__("shutil").rmtree, self.tmp, True)
        for self.backend in [b for b in ("bwrap", "landlock") if forced in ("", b)]:
            problems.append(self.probe(cwd))
            if not problems[-1]:
                break
        if problems[-1]:
            raise UserError("--sandbox %s: none works here: %s" % (profile, "; ".join(problems)))
        self.label = "%s (%s%s)" % (profile, self.backend, ", no network" * net_off)
        sys.stderr.write("sandbox: %s\n" % self.label)

    def probe(self, cwd):       # why self.backend cannot work here ("" or 0: it can)
        if self.backend == "bwrap":
            self.bwrap = shutil.which("bwrap")
            if not self.bwrap:
                return "bubblewrap is not installed (apt-get install bubblewrap)"
            ran = subprocess.run(self.wrap(["true"], cwd)[0], capture_output=True, errors="replace")
            return ran.returncode and "bubblewrap fails here: %s" % ran.stderr.strip()[:300]
        self.libc = ctypes.CDLL(None, use_errno=True)      # syscall 444, flag 1: the Landlock ABI
        abi = self.abi = self.libc.syscall(444, None, 0, 1) if sys.platform == "linux" else -1
        if abi < 1:
            return "the kernel has no Landlock (Linux 5.13+, landlock in the lsm= boot parameter)"
        return "Landlock ABI %d cannot cut TCP (4 can)" % abi if self.net_off and abi < 4 else ""

    def writable(self, cwd):        # /dev/shm: POSIX semaphores (Python's multiprocessing)
        return [self.tmp] + [os.path.realpath(cwd), "/dev/shm"] * (self.profile == "workspace")

    def wrap(self, argv, cwd):
        """(argv, preexec_fn) that run argv in the sandbox: by bwrap, or Landlock in the child."""
        if self.backend == "bwrap":
            binds = [arg for path in self.writable(cwd) for arg in ("--bind-try", path, path)]
            net = ["--unshare-net"] * self.net_off + ["--"]
            return [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev"] + binds + net + argv, None
        import struct
        syscall, prctl, abi, net = self.libc.syscall, self.libc.prctl, self.abi, 3 * self.net_off
        tree = 0x1ff2 | (abi >= 2) << 13 | (abi >= 3) << 14    # write, remove, make; move, truncate
        rules = [(p, tree) for p in self.writable(cwd)] + [(d, tree & 0x4002) for d in DEVICES]

        def restrict():     # in the child after fork: nothing imported or looked up (dlsym) here
            ruleset = syscall(444, struct.pack("=QQ", tree, net), 16 if net else 8, 0)    # net: TCP
            for path, allowed in rules:
                with suppress(OSError):
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                    syscall(445, ruleset, 1, struct.pack("=Qi", allowed, fd), 0)    # path beneath
                    os.close(fd)
            if ruleset < 0 or prctl(38, 1, 0, 0, 0) or syscall(446, ruleset, 0):
                raise OSError("Landlock refused the sandbox")       # 38: PR_SET_NO_NEW_PRIVS
        return argv, restrict


class ToolResult:
    def __init__(self, output, ok=True):
        self.output, self.ok = output, ok
        self.started = self.finished = time.time()      # a call not run; call_tool times a run


def kill_group(proc):
    """SIGKILL the process group a tool started; never pgid 0 or 1 (our own group, init)."""
    if proc.pid > 1:
        with suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)


class Lifeline:
    """Commands die with grok, SIGKILL too: a watchdog kills their groups when grok's pipe ends."""
    lock, watchdog, groups = _thread.allocate_lock(), None, set()      # (threading's Lock)

    @classmethod
    def update(cls, add=None):
        """Tell the watchdog the live groups; then a new command (add, its Popen) is let start."""
        with cls.lock:
            if cls.watchdog is None:        # unbuffered: each write reaches it at once
                cls.watchdog = subprocess.Popen(
                    [TOOL_SHELL, "-c", "while read -r g; do l=$g; done; kill -9 $l"], bufsize=0,
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)
            cls.groups = {g for g in cls.groups | {add and add.pid} if g and alive(g, os.killpg)}
            with suppress(OSError):     # (the watchdog was killed: nothing to tell)
                cls.watchdog.stdin.write((" ".join("-%d" % g for g in cls.groups) + "\n").encode())
        if add:         # the line its shell waits for; then its stdin is closed, empty
            with suppress(OSError), add.stdin:
                add.stdin.write(b"\n")


def alive(pid, send=os.kill):
    """Whether a process (or, with os.killpg, a group) lives; EPERM: it does, as another user."""
    try:
        return send(pid, 0) or True
    except OSError as e:
        return not isinstance(e, ProcessLookupError)


# What a tool gets, never the agent. timeout: bash's; procs: the commands running (a stop kills
# them); env: without the API key; cancel: the turn's; ask(question, options), search, withdraw.
ToolContext = namedtuple("ToolContext", "cwd sandbox timeout procs env cancel ask search withdraw")


def tool_bash(args, ctx):
    argv = [TOOL_SHELL, "-c", "read -r _ || exit; " + args["command"]]
    argv, preexec = ctx.sandbox.wrap(argv, ctx.cwd) if ctx.sandbox else (argv, None)
    try:
        proc = subprocess.Popen(argv, cwd=ctx.cwd, env=ctx.env, preexec_fn=preexec,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except (OSError, subprocess.SubprocessError) as e:
        return ToolResult("error: cannot start %s: %s" % (TOOL_SHELL, e), ok=False)
    ctx.procs.add(proc)
    Lifeline.update(proc)       # `read -r _` holds the command until the watchdog knows its group
    out, omitted = bytearray(), [0]

    def read():         # on a thread, so the tool waits for the process, not in fixed sleeps
        with suppress(OSError, ValueError):
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                out.extend(chunk)
                omitted[0] += max(0, len(out) - OUTPUT_HEAD - OUTPUT_TAIL)
                del out[OUTPUT_HEAD:-OUTPUT_TAIL]       # the first and the last bytes are kept
    reader = threading.Thread(target=read, daemon=True)
    code, waited, limit = None, 0.0, ctx.timeout       # limit 0: none
    try:
        reader.start()      # no thread to be had (a process limit): the command is killed
        while code is None and not ctx.cancel.is_set() and not 0 < limit <= waited:
            with suppress(subprocess.TimeoutExpired):
                code = proc.wait(0.05)
            waited += 0.05
    finally:
        note = "" if code is not None else "\n[cancelled by the user]" if ctx.cancel.is_set() else (
            "\n[timed out after %gs: process group killed]" % limit)
        if note:
            kill_group(proc)
            code = proc.wait()
        ctx.procs.discard(proc)
        Lifeline.update()
    reader.join(1 if note else 0.2)     # background children may keep the output open
    cut = b"\n[... %d bytes omitted: output truncated ...]\n" % omitted[0] if omitted[0] else b""
    text = (out[:OUTPUT_HEAD] + cut + out[OUTPUT_HEAD:]).decode(errors="replace")
    text = text.replace("\x00", "\\0") if text.strip() or note else "(no output)"
    background = "" if note or not reader.is_alive() else (
        "\n[background processes are still running; their output is not captured and they may "
        "die writing to it: redirect it (cmd > file 2>&1 &)]")
    if code and not note:
        note = "\n[exit code %d]" % code
    return ToolResult(text + note + background, ok=not note)


def tool_read_file(args, ctx):
    path = canonical(ctx.cwd, args["path"])
    data, size = read_regular(path, READ_CAP) or (None, 0)
    if data is None:
        why = ("no such file: %s" if not os.path.exists(path)
               else "%s is a directory (use list_files)" if os.path.isdir(path)
               else "%s is not readable (permission denied)" if not os.access(path, os.R_OK)
               else "%s is not a regular file (a device, pipe or socket): not read")
        return ToolResult("error: " + why % path, ok=False)
    if b"\x00" in data[:8192]:
        return ToolResult("binary file (%d bytes), not shown: %s" % (size, path), ok=False)
    text = data[:READ_CAP].decode("utf-8", "replace")
    if size > READ_CAP:
        text += "\n[truncated: showing the first %d of %d bytes]" % (READ_CAP, size)
    return ToolResult(text if text else "(empty file)")


def atomic_write(path, data, private=True):
    """Via a temp file and a rename: a crash leaves the old file or the new one. 0600 if private."""
    folder, prefix = os.path.dirname(path), ".grok-%s." % os.path.basename(path)[:100]
    for stale in glob.glob(os.path.join(glob.escape(folder), glob.escape(prefix) + "*.*.tmp")):
        with suppress(ValueError, OSError):     # left by a process killed while writing this path
            if not alive(int(os.path.basename(stale)[len(prefix):].split(".")[0])):
                os.unlink(stale)
    tmp = os.path.join(folder, "%s%d.%s.tmp" % (prefix, os.getpid(), os.urandom(4).hex()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if not private:     # an existing file keeps its mode
            with suppress(FileNotFoundError):
                os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        with suppress(OSError):     # left by a failure; once replaced, tmp is gone
            os.unlink(tmp)


def tool_write_file(args, ctx):
    path = canonical(ctx.cwd, args["path"])
    content = args.get("content", "")
    data = (content if isinstance(content, str) else json.dumps(content, indent=2)).encode("utf-8")
    dirs = ctx.sandbox.writable(ctx.cwd) if ctx.sandbox else [path]
    if not any(inside(path, d) for d in dirs):
        return ToolResult("error: the sandbox allows writes only in " + ", ".join(dirs), False)
    if os.path.isdir(path):
        return ToolResult("error: %s is a directory" % path, ok=False)
    try:        # the path is resolved: a symlink is written through, not replaced
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, data, private=False)
    except OSError as e:
        return ToolResult("error: cannot write %s: %s" % (path, e.strerror or e), ok=False)
    return ToolResult("wrote %d bytes to %s" % (len(data), path))


def tool_list_files(args, ctx):
    path = canonical(ctx.cwd, args.get("path") or ".")
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except FileNotFoundError:
        return ToolResult("error: no such directory: %s" % path, ok=False)
    except NotADirectoryError:
        return ToolResult("error: %s is a file, not a directory (use read_file)" % path, ok=False)
    except OSError as e:
        return ToolResult("error: cannot list %s: %s" % (path, e.strerror or e), ok=False)
    lines = []
    for entry in entries[:LIST_CAP]:
        name = clean_text(entry.name)
        try:
            lines.append("link %s -> %s" % (name, os.readlink(entry.path)) if entry.is_symlink()
                         else "dir  %s/" % name if entry.is_dir()
                         else "file %s %d" % (name, entry.stat().st_size))
        except OSError:
            lines.append("?    %s" % name)
    if len(entries) > LIST_CAP:
        lines.append("[... %d more entries not shown]" % (len(entries) - LIST_CAP))
    return ToolResult("\n".join(lines) if lines else "(empty directory)")


def tool_ask_user(args, ctx):
    options = args.get("options") or []
    options = [str(o) for o in (options if isinstance(options, list) else [options])]
    answer = ctx.ask(args["question"], options)
    if answer is None:
        return ToolResult("no user available in this mode: decide and say what you assumed", False)
    return ToolResult("the user answered: %s" % answer)


def tool_web_search(args, ctx):
    try:
        obj = ctx.search(args["query"])
    except LimitReached as e:
        return ToolResult("not run: %s; answer with what you have" % e, ok=False)
    except HTTPStatusError as e:
        if e.status in (404, 405, 410, 501):
            return ctx.withdraw("web_search", "the server has no Responses API (%s)" % e)
        return ToolResult("web search failed: HTTP %d: %s" % (e.status, e.server_message()), False)
    except (TransientError, UserError, ContractError) as e:        # ContractError: too long a reply
        return ToolResult("web search failed: %s" % e, ok=False)
    text, urls = responses_answer(obj if isinstance(obj, dict) else {})
    if not text:
        return ToolResult("web search returned no answer", ok=False)
    sources = "\n\nSources:\n" + "\n".join("- " + u for u in urls[:20]) if urls else ""
    return ToolResult(text + sources)


def responses_answer(obj):
    """(text, source URLs) of a Responses API reply."""
    parts = [part for item in obj.get("output") or () if isinstance(item, dict)
             for part in item.get("content") or () if isinstance(part, dict)]
    texts = [str(p.get("text") or "") for p in parts if p.get("type") in ("output_text", "text")]
    urls = [a.get("url") for p in parts for a in p.get("annotations") or () if isinstance(a, dict)]
    urls = [u for u in urls + list(obj.get("citations") or ()) if u and isinstance(u, str)]
    return "\n".join(texts).strip(), list(dict.fromkeys(urls))


class Tool(namedtuple("Tool", "run doc args input", defaults=(None,))):
    """Its function, what it does, {argument: JSON type} ("?": optional; the first is displayed)."""

    def schema(self):       # input: an MCP tool's own JSON schema of its args
        props = {k: {"type": "array", "items": {"type": "string"}} if t.startswith("array")
                 else {"type": t.rstrip("?")} for k, t in self.args.items()}
        return self.input or {"type": "object", "properties": props, "additionalProperties": False,
                              "required": [k for k, t in self.args.items() if not t.endswith("?")]}


TOOLS = {
    "bash": Tool(tool_bash, "run a shell command in the working directory; stdout+stderr, exit "
                 "code if non-zero (timeout %ds)", {"command": "string"}),
    "web_search": Tool(tool_web_search, "search the web; an answer with source URLs", {"query": "string"}),
    "read_file": Tool(tool_read_file, "read a text file (relative to the working directory)",
                      {"path": "string"}),
    "write_file": Tool(tool_write_file, "create or overwrite a file (parent dirs are created)",
                       {"path": "string", "content": "string"}),
    "list_files": Tool(tool_list_files, "list a directory (default: the working directory): type, "
                       "name, size", {"path": "string?"}),
    "ask_user": Tool(tool_ask_user, "ask the user when only they can decide",
                     {"question": "string", "options": "array?"}),
}
MAX_CALLS = 8               # tool calls run from one reply (the schema's bound), and at once
NEEDS_APPROVAL = ("bash", "write_file")
TOOL_SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"     # the bash tool's shell


def tool_line(name, bash_timeout, tool):
    """`name {"arg": "...", ...}: what it does`, as the system prompt lists it."""
    example = ", ".join('"%s": %s' % (k, '["...", "..."]' if t.startswith("array") else '"..."')
                        for k, t in tool.args.items())
    return "%s {%s}: %s" % (name, example, tool.doc.replace("%d", str(int(bash_timeout))))


def key_arg(name, args):
    """The one argument that says what a tool call does, for one-line displays."""
    key = next(iter(TOOLS[name].args)) if name in TOOLS else None
    value = args.get(key, "") if key in args or key and not args else args     # else all it has
    if not value and name == "list_files":
        value = "."
    if not isinstance(value, str):
        value = json.dumps(value)
    if len(value) > ARG_CAP:
        value = value[:200] + "... [%d characters]" % len(value)
    if "\n" in value or "\r" in value:        # one line, but no line of a command hidden in it
        value = " ⏎ ".join(line.strip() for line in value.splitlines() if line.strip())
    return value


# --- MCP: the tools of MCP servers (stdio, newline-delimited JSON-RPC 2.0) ---

class McpServer:
    """A stdio MCP server: its process, a thread routing its answers to requests by id, tools."""
    ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")  # ours

    def __init__(self, name, spec, cwd):
        self.name, self.spec, self.cwd, self.proc, self.tools = name, spec, cwd, None, {}
        self.state, self.pending, self.err, self.ids = "starting", {}, b"", iter(range(1, 1 << 62))
        self.lock, self.changed = threading.Lock(), False

    def timeout(self, key, env_ms, default):     # seconds in its config, else ms (Claude Code's)
        return float(self.spec.get(key) or Config.number(env_ms, default * 1000, 1e9) / 1000)

    def start(self):
        env = dict({k: v for k, v in os.environ.items() if k in self.ENV}, **self.spec["env"])
        try:
            self.proc = subprocess.Popen([self.spec["command"]] + self.spec["args"], cwd=self.cwd,
                                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
            self.drain = threading.Thread(target=self.read_stderr, daemon=True)
            self.drain.start()
            threading.Thread(target=self.read, daemon=True).start()
            timeout = self.timeout("startup_timeout_sec", "MCP_TIMEOUT", 30)
            self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": dict(name="grok", version=__version__)}, timeout)
            self.send(method="notifications/initialized")      # any version it answered will do
            self.list_tools(timeout)
        except (OSError, ValueError, RuntimeError) as e:    # RuntimeError: no thread to be had
            self.state = "failed: %s" % e
            self.close()

    def list_tools(self, timeout):
        tools, page, self.changed = {}, {}, False
        for _ in range(100):
            page = self.request("tools/list", page and {"cursor": page["nextCursor"]}, timeout)
            listed = page.get("tools") if isinstance(page.get("tools"), list) else ()
            tools.update(("mcp__%s__%s" % (self.name, tool["name"]), self.tool(tool))
                         for tool in listed if isinstance(tool, dict) and "name" in tool)
            if not page.get("nextCursor"):
                break
        self.tools, self.state = tools, "%d tool%s" % (len(tools), "s" * (len(tools) != 1))

    def tool(self, tool):
        """A Tool; its args' schema is the inputSchema unless too big for a local grammar."""
        schema = tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else {}
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        doc = " ".join(str(tool.get("description") or "").split())[:999]
        return Tool(lambda args, ctx: self.call(str(tool["name"]), args, ctx.cancel),
                    "(MCP server %s) %s" % (self.name, doc), dict.fromkeys(props, "string"),
                    dict(schema, type="object") if len(json.dumps(schema)) < 4000 else {"type": "object"})

    def call(self, tool, args, cancel):
        """tools/call as a ToolResult: text content joined, other content named, capped as bash."""
        try:
            got = self.request("tools/call", {"name": tool, "arguments": args},
                               self.timeout("tool_timeout_sec", "MCP_TOOL_TIMEOUT", 600), cancel)
        except ConnectionError as e:
            return ToolResult("error: MCP server %s: %s" % (self.name, e), ok=False)
        parts = [p.get("text") if p.get("type") == "text" else "[%s content]" % p.get("type")
                 for p in got.get("content") or () if isinstance(p, dict)]
        text = "\n".join(map(str, parts)) or json.dumps(got.get("structuredContent", "(no output)"))
        if len(text) > OUTPUT_HEAD + OUTPUT_TAIL:
            text = "%s\n[... %d characters omitted: output truncated ...]\n%s" % (
                text[:OUTPUT_HEAD], len(text) - OUTPUT_HEAD - OUTPUT_TAIL, text[-OUTPUT_TAIL:])
        return ToolResult(text, ok=not got.get("isError"))

    def request(self, method, params, timeout, cancel=None):
        """Its result; ConnectionError if the server fails it, has failed, or does not answer."""
        request_id = next(self.ids)         # atomic, as the dict's get and pop: no lock
        slot = self.pending[str(request_id)] = [threading.Event(), None]
        self.send(id=request_id, method=method, params=params or {})
        deadline = time.time() + timeout if timeout > 0 else float("inf")
        try:
            while not slot[0].wait(0.05):
                failed = self.state.startswith("failed") and self.state[8:]
                late = time.time() > deadline and "no answer to %s within %gs" % (method, timeout)
                why = failed or cancel and cancel.is_set() and "cancelled by the user" or late
                if why:
                    self.send(method="notifications/cancelled", params=dict(requestId=request_id, reason=why))
                    raise ConnectionError(why + ("" if failed else self.stderr_tail()))
        finally:
            self.pending.pop(str(request_id), None)
        answer = slot[1]
        if not isinstance(answer.get("result"), dict):
            raise ConnectionError("%s failed: %s" % (method, json.dumps(answer.get("error"))[:500]))
        return answer["result"]

    def send(self, **message):
        with self.lock, suppress(OSError, ValueError, AttributeError):    # dead: read() says so
            self.proc.stdin.write((json.dumps(dict(jsonrpc="2.0", **message)) + "\n").encode())
            self.proc.stdin.flush()

    def read(self):
        """Answers wake their requests; a ping is answered; a changed tool list is read again."""
        why = "closed its output"
        for line in iter(lambda: self.proc.stdout.readline(16 << 20), b""):
            with suppress(ValueError, RecursionError):
                message = None
                message = json.loads(line)      # a line cut at 16 MB is not JSON
            if not isinstance(message, dict):
                why = "wrote what is not a JSON-RPC message of at most 16 MB: %r" % line[:100]
                break
            method, slot = message.get("method"), self.pending.get(str(message.get("id")))
            if method == "notifications/tools/list_changed":      # read before the next request
                self.changed = True
            elif method == "ping" and "id" in message:
                self.send(id=message["id"], result={})
            elif method and "id" in message:      # a request we do not serve
                self.send(id=message["id"], error={"code": -32601, "message": method})
            elif slot and not method:
                slot[1] = message
                slot[0].set()
        self.drain.join(1)     # a dying server's last words
        if not self.state.startswith("failed"):     # requests see it; a reason told stays
            self.state = "failed: the server %s%s" % (why, self.stderr_tail())
        self.close()

    def read_stderr(self):
        with suppress(OSError, ValueError):
            for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
                self.err = (self.err + chunk)[-2000:]

    def stderr_tail(self):
        lines = self.err.decode("utf-8", "replace").strip().splitlines()[-3:]
        return " (its stderr: %s)" % " | ".join(lines) if lines else ""

    def close(self, deadline=0.0):
        """Its stdin closed (a server ends then), its process group killed at `deadline` latest."""
        with suppress(Exception):       # no process; a timeout
            self.proc.stdin.close()
            self.proc.wait(max(0.0, deadline - time.time()))
        if self.proc:
            kill_group(self.proc)


def start_mcp(specs, cwd, notice):
    """The servers, started in parallel (each within its start-up timeout), each state told."""
    servers = [McpServer(name, spec, cwd) for name, spec in specs.items()]
    if servers:
        notice("MCP servers starting: %s" % ", ".join(specs))
    threads = [threading.Thread(target=server.start, daemon=True) for server in servers]
    for thread in threads:
        with suppress(RuntimeError):        # no thread to be had: its server starts below instead
            thread.start()
    for server, thread in zip(servers, threads):
        if thread.ident:
            thread.join()
        else:
            server.start()
        notice("MCP server %s: %s" % (server.name, server.state))
    return servers


def mcp_specs(table, where, notice):
    """The stdio servers of a config's {name: {command, args, env, ...}}; others named, skipped."""
    specs = {}
    for name, spec in table.items() if isinstance(table, dict) else ():
        try:
            args = spec.get("args") or []
            if spec.get("enabled", True) is not False:
                specs[name.replace("__", "_")] = dict(spec, command=str(spec["command"]), args=[
                    str(a) for a in (args if isinstance(args, list) else None)],
                    env={str(k): str(v) for k, v in (spec.get("env") or {}).items()})
        except (AttributeError, KeyError, TypeError):
            notice("%s: MCP server %s skipped: only stdio servers (command, args [...], env {...}) "
                   "are supported" % (where, name))
    return specs


def mcp_config(cfg, files, ask, notice):
    """{name: spec} of ~/.grok/config.toml, each --mcp-config FILE and (ask not False) .mcp.json."""
    path = os.path.join(os.path.expanduser("~"), ".grok", "config.toml")
    data, specs = (read_regular(path, 1 << 20) or (b"",))[0], {}
    if b"mcp_servers" in data:      # else nothing is imported
        try:
            import tomllib      # novermin: 3.11+; before, the notice below
            specs = mcp_specs(tomllib.loads(data.decode(errors="replace")).get("mcp_servers"), path, notice)
        except (ImportError, ValueError, RecursionError) as e:
            why = "reading TOML needs Python 3.11 or newer" if isinstance(e, ImportError) else e
            notice("%s: [mcp_servers] skipped: %s" % (path, why))
    for path in files:
        try:
            with open(path, "rb") as f:
                specs.update(mcp_specs(json.loads(f.read()).get("mcpServers"), path, notice))
        except (OSError, ValueError, AttributeError, RecursionError) as e:
            raise UserError("--mcp-config %s: %s" % (path, getattr(e, "strerror", None) or e))
    return dict(specs, **project_mcp(cfg, ask, notice)) if ask is not False else specs


def project_mcp(cfg, ask, notice):
    """A project .mcp.json runs what its authors chose: used once ask(text) approves (None: -y)."""
    path = os.path.join(cfg.cwd, ".mcp.json")
    data = (read_regular(path, 1 << 20) or (b"",))[0]
    if not data:        # none (or not a regular file)
        return {}
    try:
        specs = mcp_specs(json.loads(data).get("mcpServers"), path, notice)
    except (ValueError, AttributeError, RecursionError) as e:
        return notice("%s is not used: %s" % (path, e)) or {}
    store, safe = os.path.join(cfg.data_dir, "mcp-approved"), not data_dir_problem(cfg.data_dir)
    known = (safe and read_regular(store, 1 << 20) or (b"",))[0]     # no approval others planted
    mark = ("%s %s\n" % (hashlib.sha256(data).hexdigest(), os.path.realpath(path))).encode()
    if not specs or mark in known or ask is None and cfg.always_approve:
        return specs
    if ask is None:
        return notice("%s (its MCP servers) is not used: pass -y to use it" % path) or {}
    listed = "".join("\n  %s: %s" % (n, " ".join([s["command"]] + s["args"])) for n, s in specs.items())
    if not ask("%s starts MCP servers, as you:%s\nuse them? [y/N] " % (path, visible(listed))):
        return {}
    with suppress(OSError):     # not saved (a read-only data dir): asked again next time
        if safe:
            atomic_write(store, known + mark)
    return specs


# --- System prompt: contract, tools, runtime info, skills, project rules ---

def front_matter(text):
    """A '---' header's fields, else description: the first non-heading line or the last heading."""
    lines = [line.strip() for line in text.splitlines()]
    if lines[:1] == ["---"]:
        fields = [ln.partition(":") for ln in itertools.takewhile(lambda ln: ln != "---", lines[1:30])]
        return {k.strip().lower(): v.strip().strip("\"'") for k, sep, v in fields if sep}
    texts = [line for line in lines[:20] if line and not line.startswith("#")]
    headings = [line.lstrip("# ") for line in lines[:20] if line.startswith("#")]
    return {"description": texts[0] if texts else headings[-1] if headings else ""}


def find_skills(skills_dir):
    """[(name, description, path)] of *.md in skills_dir and its folders (NAME/SKILL.md: NAME)."""
    skills, base = [], glob.escape(skills_dir)
    for path in sorted(glob.glob(base + "/*.md") + glob.glob(base + "/*/*.md")):
        rel = os.path.relpath(path, skills_dir)[:-3]
        folder, stem = os.path.split(rel)
        got = read_regular(path, 4000)
        if stem.lower() == "readme" or not got:
            continue
        meta = front_matter(got[0].decode("utf-8", "replace"))
        desc = " ".join((meta.get("description") or meta.get("title") or "").split())[:160]
        name = meta.get("name") or (folder if stem.upper() == "SKILL" else rel)
        skills.append((name, desc, path))
    return skills


def find_project_rules(cwd):
    """(path, text), capped, of ~/.grok/AGENTS.md, then AGENTS.md, GROK.md from git root to cwd."""
    up = [cwd]
    while not os.path.exists(os.path.join(up[-1], ".git")) and os.path.dirname(up[-1]) != up[-1]:
        up.append(os.path.dirname(up[-1]))
    dirs = up if os.path.exists(os.path.join(up[-1], ".git")) else [cwd]    # else cwd only
    root = os.path.realpath(dirs[-1])
    paths = [os.path.expanduser("~/.grok/AGENTS.md")] + [os.path.join(d, n) for d in reversed(dirs)
             if not open_to_others(d, (os.getuid(), 0)) for n in ("AGENTS.md", "GROK.md")]
    seen, budget = set(), RULES_TOTAL_CAP
    in_all = "project rules are capped at %d bytes in all" % RULES_TOTAL_CAP
    for path in paths:
        real, cap = os.path.realpath(path), min(RULES_CAP, budget)
        if real in seen or os.path.islink(path) and path != paths[0] and not inside(real, root):
            continue
        seen.add(real)
        data, size = read_regular(path, cap) or (b"", 0)      # no such file: as an empty one
        text = data[:cap].decode("utf-8", "replace").strip()
        if not cap and data:
            text = "[not included: %s]" % in_all
        elif len(data) > cap:     # cut at a character boundary, and say so
            total = ", the " + in_all if cap < RULES_CAP else ""
            text = "%s\n[truncated: only the first %d of %d bytes of this file are included%s]" % (
                text.rstrip("\ufffd").rstrip(), cap, size, total)
        if text:
            budget -= min(len(data), cap)
            yield path, scrub(text)


def build_system_prompt(cfg, contract, cwd, tools, skills):
    override = cfg.system_prompt        # --system-prompt-override: for the guidance and the context
    parts = [
        override or "You are Grok, an agent working on the user's computer through tools.",
        "Always reply with exactly one JSON object and nothing else:", REPLY_SHAPE,
        "- To act: list the tool calls (independent calls run concurrently), response null, done"
        " false. Their results come back in the next user message.",
        "- To answer: tool_calls [], response = your answer for the user, done true. done true"
        " with tool calls runs them and then ends the turn with your response: their results"
        " reach you only with the next message.",
        "- Tools first: use web_search for facts, news and current events (put the year in the"
        " query) instead of answering from memory; prefer acting over asking; check your work"
        " with tools before you say it is done.",
        "- Answers are plain text for a terminal: concise, no markdown."][:override and 5]
    parts += [contract.extra_prompt] if contract.extra_prompt else []
    parts += ["", "TOOLS:"] + ["- " + tool_line(n, cfg.bash_timeout, t) for n, t in tools.items()]
    parts += ["", "RULES (follow them):", cfg.rules] if cfg.rules else []
    if override:
        return "\n".join(parts)
    parts += ["", "RUNTIME (at the start of this session):",    # not `platform` (2 ms to import)
              "- date: %s" % time.strftime("%A %Y-%m-%d %H:%M %Z"),
              "- system: {0.sysname} {0.release}, Python {1}".format(os.uname(), sys.version.split()[0]),
              "- shell: the bash tool runs %s -c; the user's login shell is %s" % (
                  TOOL_SHELL, os.environ.get("SHELL") or "unknown"),
              "- working directory: %s" % cwd]
    found = {"SKILLS (load one with read_file when it fits the task):":
             ["- %s: %s (%s)" % skill for skill in skills],
             "PROJECT RULES (follow them; where they differ, the later, more specific file wins):":
             ["\nFrom %s:\n%s" % rule for rule in find_project_rules(cwd)]}
    parts += [line for heading, lines in found.items() if lines for line in ["", heading] + lines]
    return "\n".join(parts)


# --- Sessions: append-only JSONL, 0600 in a 0700 directory ---

class Session:
    """One conversation on disk. Every write is one appended line."""

    def __init__(self, directory, session_id=None, warn=None):
        self.dir = os.path.join(directory, "sessions")
        self.id = session_id or time.strftime("%Y%m%d-%H%M%S-") + os.urandom(3).hex()
        self.path = os.path.join(self.dir, self.id + ".jsonl")
        self.warn = warn or (lambda text: None)
        self.fd, self.disabled, self.legacy, self.header = None, False, False, None

    def _open(self):
        """The file opened (0600, in a 0700 directory) and locked: one process per session."""
        problem = data_dir_problem(os.path.dirname(self.dir))
        if problem:
            raise OSError(problem)
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | NOFOLLOW, 0o600)
        os.fchmod(self.fd, 0o600)
        try:        # an advisory lock, held while the file is open
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.close()
            raise SessionBusy("session %s is in use by another grok process" % self.id)
        size = os.fstat(self.fd).st_size
        if size and os.pread(self.fd, 1, size - 1) != b"\n":     # a torn last line (a crash)
            os.write(self.fd, b"\n")

    def append(self, record=None):
        """A record appended (None: open only), a new session's header first; failing: a warning."""
        if self.disabled:
            return
        try:
            if self.fd is None:
                self._open()
            data = b"".join(json_bytes(scrub(r)) + b"\n" for r in (self.header, record) if r)
            self.header = None
            while data:
                data = data[os.write(self.fd, data):]
        except OSError as e:
            self.disabled = True
            self.warn("warning: cannot save the session in %s (%s); the chat goes on unsaved"
                      % (self.dir, e.strerror or e))

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def read(self):
        """The non-blank lines (JSONL); the bash grok's session (ID.json, `legacy`) as records."""
        problem = data_dir_problem(os.path.dirname(self.dir))
        if problem:
            raise UserError(problem)
        legacy = os.path.join(self.dir, self.id + ".json")
        self.legacy = not os.path.exists(self.path) and os.path.isfile(legacy)
        source = legacy if self.legacy else self.path
        try:
            with open(os.open(source, os.O_RDONLY | NOFOLLOW), "rb") as f:
                data = f.read()
            if not self.legacy:
                return [line for line in data.splitlines() if line.strip()]
            obj = json.loads(data.decode("utf-8", "replace"))
            records = [dict(type="message", message=m) for m in obj["messages"]]
            return [json_bytes(r) for r in records + [dict(type="cwd", cwd=obj.get("working_dir"))]]
        except OSError as e:
            raise UserError("cannot read session %s: %s" % (source, e.strerror or e))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            raise UserError("%s is not a session file of the bash grok" % legacy)

    def load(self):
        """(system prompt or None, the messages after it, cost_usd, cwd); warns of damaged lines."""
        system, messages, cost, cwd, bad = None, [], 0.0, None, 0
        for line in self.read():
            try:
                rec = json.loads(line.decode("utf-8"))
                kind = rec["type"]
                if kind in ("session", "cwd"):      # the header, a /cd
                    system = rec.get("system", system)
                    cwd = rec.get("cwd") if isinstance(rec.get("cwd"), str) else cwd
                elif kind in ("message", "reset"):
                    new = [rec["message"]] if kind == "message" else list(rec["messages"])
                    if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant")
                               and isinstance(m.get("content"), str) for m in new):
                        raise ValueError("not a message as the API takes it")
                    messages = messages + new if kind == "message" else new
                elif kind == "usage" and 0 <= float(rec.get("cost_usd") or 0) < 1e6:
                    cost += float(rec.get("cost_usd") or 0)
                else:
                    raise ValueError("an unknown record, or not a cost")
            except (ValueError, KeyError, TypeError, IndexError, RecursionError):
                bad += 1 - self.legacy      # the bash grok's system prompt is left out, not damaged
        if bad:
            self.warn("warning: session %s: skipped %d damaged line(s)" % (self.id, bad))
        return (system if isinstance(system, str) else None), messages, cost, cwd


def session_ids(directory):
    """{id: mtime} of the saved sessions, newest first; the bash grok's (ID.json) too."""
    found = {}
    with suppress(OSError):
        for entry in os.scandir(os.path.join(directory, "sessions")):
            if entry.name.endswith((".jsonl", ".json")):
                with suppress(OSError):
                    found[entry.name.rsplit(".", 1)[0]] = entry.stat().st_mtime
    return dict(sorted(found.items(), key=lambda item: item[1], reverse=True))


def list_sessions(directory):
    """(id, mtime, first request, cost) of each readable session, newest first, read when asked."""
    for session_id, mtime in session_ids(directory).items():
        s = Session(directory, session_id)
        try:
            _, messages, cost, _ = s.load()
        except UserError:
            continue
        # the first request: not a note, a summary or tool results; the bash grok's note cut off
        typed = (m["content"] for m in messages if m["role"] == "user")
        first = next((t for t in typed if not t.startswith(("[", "Tool results:"))), "")
        first = " ".join(first.partition("[INTERNAL")[0].split()).rstrip(" -")[:80]
        yield session_id, mtime, ("[bash grok] " if s.legacy else "") + first, cost


def sessions_text(agent, width):
    """/sessions: the newest ten saved sessions (* this one) but those nobody typed into."""
    here = agent.session.id
    found = [s for s in list_sessions(agent.cfg.data_dir) if s[2] or s[0] == here]
    lines = ["%s %s  %s  $%.4f  %s" % ("*" if sid == here else " ", sid, time.strftime(
        "%Y-%m-%d %H:%M", time.localtime(mtime)), cost, first or "(empty)")
        for sid, mtime, first, cost in found[:10]]
    lines += ["  (%d older sessions not shown)" % (len(found) - 10)] * (len(found) > 10)
    lines = [ln if len(ln) <= width else ln[:width - 3] + "..." for ln in map(visible, lines)]
    return "\n".join(lines or ["no saved sessions in %s" % agent.session.dir]) + "\n"


def find_session(directory, key):
    """The saved session `key` names: its whole id, the start of it, or its random suffix."""
    ids = session_ids(directory)
    found = [i for i in ids if i == key] or [i for i in ids if i.startswith(key) or i.endswith(key)]
    if len(found) != 1:
        raise UserError("%r matches %d sessions; give more of the id: %s%s" % (
            key, len(found), ", ".join(found[:8]), ", ..." * (len(found) > 8)) if found
            else "no session %r in %s" % (key, os.path.join(directory, "sessions")))
    return found[0]


# --- The loop: run_turn() -> query() + execute() ---

class UI:
    """A front end's hooks of a turn, each optional (here a no-op: no approval, no one to ask)."""

    _skip = staticmethod(lambda *args: None)
    step_start = stream_text = stream_reset = reply = tool_start = tool_end = step_finish = _skip
    answer = notice = thought = ask_user = approve = invalid = _skip


def turn_end(e):
    """How a turn that raised e ended, for all front ends: (message, exit code, ACP stop reason)."""
    if isinstance(e, Terminated):
        return "terminated by signal %d" % e.args[0], 128 + e.args[0], "cancelled"
    if isinstance(e, (KeyboardInterrupt, Cancelled)):
        return "interrupted: the turn was cancelled", 130, "cancelled"
    if isinstance(e, GrokError):
        rounds = isinstance(e, LimitReached) and e.cause == "rounds"
        return str(e), e.exit_code, "max_turn_requests" if rounds else None
    return "internal error: %s: %s (set GROK_DEBUG=1 for a traceback)" % (type(e).__name__, e), 4, None


UNRUN = "[the user cancelled the tool calls before they finished]"
NUDGE = {LOOP_NUDGE: "[Loop] You made these same tool calls and got these same results %d rounds "
                     "in a row: repeating them changes nothing. Answer now (\"done\": true), or "
                     "try something else." % LOOP_NUDGE}
LAST_ROUND = ("[Limit] That was the last tool round allowed in this turn (%d). Answer now with "
              "what you have and say what is left to do; further tool calls will not run.")
SUMMARY_PROMPT = ("You summarise an AI agent's conversation and tool history so the agent can "
                  "continue. Keep the user's goals and requests, decisions, facts learned, files "
                  "and commands involved, and open tasks. Be concise; plain text.")
TURN_KEYS = ("input", "output", "reasoning", "cached", "total", "cost")
STOP_REASONS = {"length": "max_tokens", "content_filter": "refusal"}    # else end_turn
ToolCall = namedtuple("ToolCall", "index name args id cwd shown sandbox")     # shown: scrubbed


class Ledger:
    """A session's cost, the reserves of requests in flight, the turn's usage, the limit (/cost)."""

    def __init__(self, cfg, once, record):
        self.cfg, self.once, self.record, self.limit = cfg, once, record, cfg.cost_limit
        self.cost_usd, self.reserved, self.search_costs = 0.0, 0.0, []
        self.turn, self.lock = dict.fromkeys(TURN_KEYS, 0), threading.Lock()   # searches pay too

    def add_cost(self, usage, model, kind="chat"):
        cost, known = usage_cost(model, usage, self.cfg.prices)
        if not known:
            limit = ", so COST_LIMIT cannot apply" if self.limit > 0 else ""
            self.once("price " + self.cfg.base_url, "price unknown for model %s at %s: cost is not "
                      "tracked%s (GROK_PRICES=IN,CACHED,OUT sets prices in USD per million tokens; "
                      "shown once per server)" % (model, self.cfg.base_url, limit), remember=True)
        if usage_numbers(usage)["odd"]:
            self.once("odd", "the server's usage has numbers that are not counts (%s): ignored"
                      % json.dumps(usage, default=str)[:200])
        with self.lock:
            self.cost_usd += cost
            self.record(dict(type="usage", kind=kind, model=model, usage=usage or {}, cost_usd=cost))
        return cost

    def count(self, result, model):
        """A model call's cost, set on the result and added with its tokens to the turn's."""
        result.cost = self.add_cost(result.usage, model)
        for key in self.turn:
            self.turn[key] += result.cost if key == "cost" else result.tokens[key]

    def reserve(self, estimate=0.0):
        """Before a paid request: LimitReached at the limit, or if `estimate` USD more passes it."""
        with self.lock:
            spent, cap = self.cost_usd + self.reserved, self.limit
            if 0 < cap <= spent:
                raise LimitReached("cost limit reached: $%.4f of $%.2f (COST_LIMIT)" % (spent, cap))
            if 0 < cap < spent + estimate:
                raise LimitReached("it would pass the cost limit: $%.4f spent or reserved, about "
                                   "$%.2f more, of $%.2f (COST_LIMIT)" % (spent, estimate, cap))
            self.reserved += estimate

    def paid(self, post, model):
        """post() for a web search, with the most a search cost so far reserved while it runs."""
        estimate = max([SEARCH_ESTIMATE] + self.search_costs)
        self.reserve(estimate)
        try:
            obj = post()
        finally:
            with self.lock:
                self.reserved -= estimate
        usage = obj.get("usage") if isinstance(obj, dict) else None
        self.search_costs.append(self.add_cost(usage, model, kind="web_search"))
        return obj


class Link:
    """The session's link to the server: client, model, context window, what the server takes."""

    def __init__(self, cfg, contract, cancel, notice, ledger, key=None):
        self.cfg, self.contract, self.cancel, self.notice = cfg, contract, cancel, notice
        self.ledger, self.key = ledger, key or (cfg.api_key, cfg.key_source)
        self.client = Client(cfg.base_url, self.key[0], cfg.timeout, cfg.max_retries, cfg.backoff,
                             notice=notice)
        wanted = {"temperature": cfg.temperature, "reasoning_effort": cfg.reasoning_effort}
        self.optional = {k: v for k, v in wanted.items() if v is not None}     # a server may refuse
        self.stream, self.partial, self.format_level = cfg.stream, "", 0    # partial: shown so far
        self.use_model(cfg.model)

    def chat(self, messages, tools=None, model=None, max_tokens=None, ui=None):
        """One chat completion under the contract for `tools` (None: free text), shown on `ui`."""
        stream, self.partial, contract, thought = True, "", tools is not None, ui and ui.thought
        while True:
            self.ledger.reserve()
            payload = self.payload(messages, tools, model, max_tokens, self.stream and stream)
            read = payload.get("stream") and (lambda resp: self.read_stream(resp, ui))
            cap = max(REPLY_CAP, 1024 * payload["max_tokens"])
            try:
                obj = self.client.post("/chat/completions", payload, cancel=self.cancel, cap=cap,
                                       on_stream=read, no_retry=contract and self.format_rejected)
                return obj if isinstance(obj, ChatResult) else parse_chat_reply(obj, thought)
            except ContractError as e:         # the reply passed the size cap: a strike
                return ChatResult(None, "length", problem="%s; reply much shorter" % e)
            except StreamBroken as e:
                stream = False
                self.notice("the reply stream from %s broke off again (%s): asking once without "
                            "streaming, to see the server's answer" % (self.client.host, e))
            except HTTPStatusError as e:     # streamed or not (an error object in a 200 reply)
                self.fall_back(e, contract)     # or raises the error

    def payload(self, messages, tools, model, max_tokens, stream):
        """A chat request's body; the kind of a stored message is not sent."""
        max_tokens = max_tokens or self.cfg.max_tokens or self.contract.max_tokens
        payload = dict(model=model or self.model, max_tokens=max_tokens, **self.optional)
        payload["messages"] = [{"role": m["role"], "content": m["content"]} for m in messages]
        if tools is not None:       # under the contract
            schema = self.contract.schema(tools)
            formats = ({"type": "json_schema", "json_schema": {"name": self.contract.name, "schema": schema}},
                       {"type": "json_object", "schema": schema}, {"type": "json_object"})
            payload["response_format"] = formats[self.format_level]
        if stream:
            payload.update(stream=True, stream_options={"include_usage": True})
        return payload

    def read_stream(self, resp, ui):
        """A streamed reply, its answer text shown as it comes; a retried stream starts it over."""
        if not ui:
            return read_chat_stream(resp, None, None)
        streamer, self.partial = ResponseStreamer(), ""
        ui.stream_reset()

        def piece(data):
            text = streamer.feed(data)
            if text:
                self.partial += text
                ui.stream_text(text, streamer.tool_calls)
        return read_chat_stream(resp, piece, ui.thought)

    def fall_back(self, e, contract):
        """Leave out what the server rejected (for the session) and ask again; else raise."""
        bad = e.status in (400, 422)
        rejected = [k for k in self.optional if bad and e.mentions(k, k.replace("_", ""))]
        if contract and self.format_rejected(e) and self.format_level < 2:
            self.format_level += 1
            self.notice("the server rejected response_format; falling back to %s" % (
                "json_object (the schema is still sent)" if self.format_level == 1 else
                "plain json_object (the schema is only described in the prompt)"))
        elif rejected:
            self.optional = {k: v for k, v in self.optional.items() if k not in rejected}
            self.notice("the server rejected %s: not sent again this session" % ", ".join(rejected))
        elif self.stream and bad and e.mentions("stream") and not e.overflow():
            self.stream = False
        else:
            raise e.overflow() or self.api_error(e)

    @staticmethod
    def format_rejected(e):
        return e.status in (400, 422, 500, 501) and e.mentions(
            "response_format", "json_schema", "json schema", "response format")

    def api_error(self, e):
        """The exception to show for a non-retryable HTTP status: it says what to fix."""
        msg = scrub(e.server_message())
        if e.status in RETRY_STATUSES:
            return TransientError("the server failed (HTTP %d): %s" % (e.status, msg))
        key = "key from %s; set a valid GROK_API_KEY" % self.key[1]
        what = {401: "the API key was rejected (HTTP 401, %s)" % key,
                403: "access denied (HTTP 403): the key lacks permission or credits",
                404: "not found (HTTP 404) at %s: check GROK_BASE_URL and the model %r"
                     % (self.cfg.base_url, self.model)}
        if e.status in what:
            return UserError("%s: %s" % (what[e.status], msg))
        hint = " (check the model name: -m/GROK_MODEL)" if "model" in msg.lower() else ""
        return UserError("the request was rejected (HTTP %d): %s%s" % (e.status, msg, hint))

    def search(self, query):
        payload = {"model": self.model, "input": [{"role": "user", "content": query}],
                   "tools": [{"type": "web_search"}]}
        return self.ledger.paid(lambda: self.client.post("/responses", payload, cancel=self.cancel),
                                self.model)

    def use_model(self, model):
        """Talk to `model` from now on, in its window: set, xAI's, the server's, else a guess."""
        cfg, self.model, self.windows = self.cfg, model, {}
        self.window_key = "%s %s" % (cfg.base_url, model)
        mine = not open_to_others(cfg.data_dir, (os.getuid(),))     # else a planted file is unread
        got = mine and read_regular(cfg.data_dir + "/windows.json", 1 << 20)
        with suppress(TypeError, ValueError, AttributeError, RecursionError):  # not a JSON object
            said = json.loads(got[0]).items() if got else ()    # (no file: json is not imported)
            self.windows = {k: n for k, n in said if type(n) is int and n >= 0}
        told = cfg.window_set or self.windows.get(self.window_key)
        self.window = told or model_entry(WINDOWS, model, DEFAULT_WINDOW)
        self.window_known = bool(told or cfg.xai)       # else the window is a guess

    def learn_window(self):
        """Ask a non-xAI server for its window (the vLLM, llama.cpp, Ollama ways); remember it."""
        if self.window_known or self.window_key in self.windows:       # (0: asked, not told)
            return
        from concurrent.futures import ThreadPoolExecutor
        asker = Client(self.cfg.base_url, self.key[0], WINDOW_ASK_TIMEOUT)
        asks = (("/v1/models", None), ("/props", None), ("/api/show", {"model": self.model}))
        with suppress(RuntimeError), ThreadPoolExecutor(len(asks)) as pool:    # no thread: unasked
            told = list(pool.map(lambda ask: (find_window(asker.probe(*ask)), ask[0]), asks))
            self.remember_window(*max(told, key=lambda said: said[0] is not None))

    def remember_window(self, window, source):
        """Take the window the server said (None: it said none), now and, in the data dir, later."""
        self.window, self.window_known = window or self.window, bool(window)
        if window:
            self.notice("context window: %d tokens (from the server's %s)" % (window, source))
        self.windows[self.window_key] = window or 0
        with suppress(OSError):
            if not data_dir_problem(self.cfg.data_dir):
                atomic_write(self.cfg.data_dir + "/windows.json", json_bytes(self.windows))


class ToolRunner:
    """A session's tools: those offered, approvals ([a]lways lasts the session), running calls."""

    def __init__(self, cfg, ui, ui_lock, notice, link, stop, mcp=None):
        self.cfg, self.ui, self.ui_lock, self.notice, self.stop = cfg, ui, ui_lock, notice, stop
        self.cancel, self.search, self.specs, self.mcp = link.cancel, link.search, mcp or {}, []
        self.tool_names, self.withdrawn, self.lock = list(cfg.tools), {}, threading.Lock()
        self.procs, self.session_always, self.tool_count = set(), set(), 0     # procs: bash running
        self.read_dirs = [cfg.skills_dir]   # read unasked, as cwd is; agent mode adds its workspace

    def start_mcp(self, cwd):
        self.mcp = self.mcp or start_mcp(self.specs, cwd, self.notice)

    def tools(self):
        """The tools offered now: built-in ones not withdrawn, the MCP servers' (may change)."""
        tools = {name: TOOLS[name] for name in self.tool_names if name not in self.withdrawn}
        for server in self.mcp:
            with suppress(ConnectionError):
                server.changed and server.list_tools(30)
            tools.update(server.tools)
        return tools

    def execute(self, calls, step_no, cwd):
        """[(ToolCall, ToolResult)] in call order: approvals, ask_user, then the rest at once."""
        items = [ToolCall(i, c["tool"], c["args"], "call_%d_%d" % (step_no, i + 1), cwd,
                          scrub(key_arg(c["tool"], c["args"])), self.cfg.sandbox)
                 for i, c in enumerate(calls)]
        results = [None] * len(items)
        for item in items:
            if item.index >= MAX_CALLS:     # (a server may not hold a model to the schema)
                capped = "error: not run: one reply runs at most %d tool calls; ask again for it"
                results[item.index] = self.finish_tool(item, ToolResult(capped % MAX_CALLS, False))
            elif not self.approved(item):
                results[item.index] = self.finish_tool(item, ToolResult(DENIED % item.name, False))
            elif item.name == "ask_user":
                self.ui.tool_start(item)
                results[item.index] = self.finish_tool(item, self.call_tool(item))
        runnable = [item for item, result in zip(items, results) if result is None]
        for item in runnable:
            self.ui.tool_start(item)
        self.run_together(runnable, results)
        if self.cancel.is_set():
            raise Cancelled("cancelled")
        return list(zip(items, results))

    def run_together(self, items, results):
        """The one place tools run: up to MAX_CALLS threads, each result finished on this thread."""
        todo, finished, threads = items[::-1], queue.Queue(), []

        def work():
            with suppress(IndexError):      # (pop is atomic: IndexError when all are taken)
                for item in iter(todo.pop, None):
                    try:
                        result = self.call_tool(item)
                    except Exception as e:      # Cancelled: a thread must never print a traceback
                        result = ToolResult("error: %s" % e, ok=False)
                    finished.put((item, result))
        with suppress(RuntimeError):        # "can't start new thread": fewer threads, or none
            while len(items) > 1 and len(threads) < len(items):    # (MAX_CALLS at most)
                threads.append(threading.Thread(target=work, daemon=True))
                threads[-1].start()
        threads = [t for t in threads if t.ident]        # started
        if not threads:
            work()      # here (Ctrl-C stops it)
        try:
            for _ in items:         # a blocked get() still takes Ctrl-C and SIGTERM
                item, result = finished.get()
                results[item.index] = self.finish_tool(item, result)
        except BaseException:
            self.stop()
            for t in threads:
                t.join(5)
            self.cancel.clear()     # stopped: the caller settles the turn
            raise

    def approved(self, item):
        if self.cfg.deny and rule_matches(item, self.cfg.deny, deny=True):
            return False
        ok = self.cfg.always_approve or item.name in self.session_always
        if ok or arg_problem(item.name, item.args) or not needs_approval(item, self.read_dirs):
            return True     # (bad arguments: call_tool refuses them and runs nothing)
        answer = self.ui.approve(item)
        if answer == "always":
            self.session_always.add(item.name)
        return answer in ("yes", "always")

    def withdraw(self, name, reason):
        """A tool the server lacks: not offered again; later calls get this result, unsent."""
        text = "%s is unavailable: %s; withdrawn for the rest of this session" % (name, reason)
        with self.lock:
            if name not in self.withdrawn:
                self.withdrawn[name] = text
                self.notice(text)
        return ToolResult(text, ok=False)

    def call_tool(self, item):
        """The ToolResult, timed; safe to call from a worker thread (no UI)."""
        started = time.time()
        try:
            if self.cancel.is_set():        # the turn was cancelled after this call was approved
                raise Cancelled("cancelled")
            why = self.withdrawn.get(item.name) or arg_problem(item.name, item.args)     # not run
            env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
            ctx = ToolContext(item.cwd, item.sandbox, self.cfg.bash_timeout, self.procs, env,
                              self.cancel, self.ui.ask_user, self.search, self.withdraw)
            result = ToolResult(why, False) if why else self.tools()[item.name].run(item.args, ctx)
        except Cancelled:
            raise
        except Exception as e:      # a tool never raises into the loop
            result = ToolResult("error: %s failed: %s: %s" % (item.name, type(e).__name__, e), ok=False)
        result.started, result.finished = started, time.time()
        return result

    def finish_tool(self, item, result):
        result.output = scrub(result.output)
        self.tool_count += 1
        with self.ui_lock:
            self.ui.tool_end(item, result)
        return result

    def close(self):
        for server in self.mcp:     # all told to end (stdin closed), then given the same second
            with suppress(OSError, AttributeError):
                server.proc.stdin.close()
        deadline = time.time() + 1
        for server in self.mcp:
            server.close(deadline)


class Agent:
    """One conversation with the model: its session, turn loop, cancelling and compaction."""

    def __init__(self, cfg, ui=None, contract=MINIMAL, session=None, resume=False, cwd=None,
                 mcp=None, key=None):
        self.cfg, self.ui, self.contract, self.home = cfg, ui or UI(), contract, cwd or cfg.cwd
        self.ui_lock, self.cancel, self.said = threading.RLock(), threading.Event(), set()
        self.ledger = Ledger(cfg, self.once, lambda entry: self.session.append(entry))
        self.link = Link(cfg, contract, self.cancel, self.notice, self.ledger, key)
        self.runner = ToolRunner(cfg, self.ui, self.ui_lock, self.notice, self.link, self.stop, mcp)
        self.request, self.prompt_skills = None, find_skills(cfg.skills_dir)
        self.skills_seen = (None, self.prompt_skills)       # (stamp, skills) the model knows of
        self.open_session(session or Session(cfg.data_dir, warn=self.notice), resume)

    def open_session(self, session, resume=False):
        """Go on in `session`: a new one, or a saved one resumed with its history, cost and cwd."""
        if resume and os.path.isfile(session.path):
            session.append()    # the lock first: one process per session, nothing interleaves
        system, messages, cost, cwd = session.load() if resume else (None, [], 0.0, None)
        self.cwd = cwd if cwd and os.path.isdir(cwd) else self.home
        self.runner.start_mcp(self.cwd)       # the session is ours
        tools, skills = self.runner.tools(), self.prompt_skills     # the skills the model knows of
        system = system or build_system_prompt(self.cfg, self.contract, self.cwd, tools, skills)
        self.messages = [{"role": "system", "content": system}] + messages
        self.context_tokens = estimate_tokens(self.messages) if resume else 0
        self.runner.tool_count, self.ledger.cost_usd = sum(map(tool_calls_in, messages)), cost
        self.runner.session_always, self.step_no, self.last_usage = set(), 0, {}
        if not resume or session.legacy:    # a new session file, its header first
            if session.legacy:      # a bash grok's session is only read: it goes on in a new file
                session = Session(self.cfg.data_dir, warn=self.notice)
                self.notice("a session of the bash grok, continued as session %s" % session.id)
            session.header = dict(type="session", version=1, id=session.id, created=now_iso(), cwd=self.cwd,
                                  model=self.link.model, contract=self.contract.name, system=system)
            if messages:
                session.append({"type": "reset", "messages": messages})
        self.session, self.link.client.conv_id = session, session.id
        if resume:      # killed mid-turn (SIGKILL, a crash): close that turn as a cancel would have
            self.settle_cancelled("[interrupted: the session ended during this turn]")

    # -- bookkeeping ---------------------------------------------------------
    def notice(self, text):
        with self.ui_lock:         # tools running in threads may report retries
            self.ui.notice(scrub(text))

    def once(self, key, text, remember=False):
        """A notice given once a session; remember: once ever (the keys kept in the data dir)."""
        key, path = scrub(key), os.path.join(self.cfg.data_dir, "told")
        told = (remember and read_regular(path, 65536) or [b""])[0].decode("utf-8", "replace")
        if key not in self.said and key not in told.split("\n"):
            self.said.add(key)
            self.notice(text)
            if remember and not data_dir_problem(self.cfg.data_dir):
                with suppress(OSError):
                    append_private(path, key + "\n")

    def add(self, message):
        """A message; one grok writes itself has a "kind" ("note", "summary"): stored, not sent."""
        self.messages.append(message)
        self.session.append({"type": "message", "message": message})

    def reset(self, messages):
        """A new history after the system prompt; its tokens are not counted until the next call."""
        self.messages, self.context_tokens = self.messages[:1] + messages, 0
        self.skills_seen = (None, self.prompt_skills)       # a skills note may be gone: look again
        self.session.append({"type": "reset", "messages": messages})

    def note_skills(self):
        """A changed skills dir (names, mtimes) is told in a note: the system prompt is cached."""
        stamp = None
        with suppress(OSError):
            stamp = sorted((e.name, e.stat().st_mtime_ns) for e in os.scandir(self.cfg.skills_dir))
        if stamp == self.skills_seen[0]:
            return
        skills = find_skills(self.cfg.skills_dir)
        if skills != self.skills_seen[1]:
            listed = "\n".join("- %s: %s (%s)" % s for s in skills) or "(none)"
            text = "[skills] The skills directory changed; the skills now are:\n" + listed
            self.add({"role": "user", "kind": "note", "content": text})
        self.skills_seen = (stamp, skills)

    def set_cwd(self, path):
        self.cwd = path
        self.session.append({"type": "cwd", "cwd": path})

    def context_pct(self):
        return 100.0 * self.context_tokens / max(1, self.link.window)

    # -- one user turn -------------------------------------------------------
    def query(self):
        """The model's next reply (a ChatResult); its usage is counted here, and only here."""
        self.ledger.reserve()
        self.step_no += 1
        self.ui.step_start(self.step_no)
        started = time.time()
        try:
            result = self.link.chat(self.messages, self.runner.tools(), ui=self.ui)
        except ContextOverflow as e:
            result = self.after_overflow(e)
        self.ledger.count(result, self.link.model)
        self.last_usage = result.usage
        tokens = result.tokens["input"] + result.tokens["output"]
        self.context_tokens = tokens or estimate_tokens(self.messages)
        result.duration = time.time() - started
        return result

    def after_overflow(self, e):
        """The server said the context is full: take its window size, compact, and ask once more."""
        if e.window and not self.cfg.window_set:
            self.link.remember_window(e.window, "overflow error")
        self.notice("%s; compacting and asking once more" % e)
        try:
            if self.compact(to_request=True):
                return self.link.chat(self.messages, self.runner.tools(), ui=self.ui)
        except ContextOverflow as again:
            e = again
        asked = ("%d tokens (the server's count)" % e.asked if e.asked
                 else "about %d tokens" % estimate_tokens(self.messages))
        raise ContextOverflow("%s do not fit the server's context window (%d tokens), even "
                              "compacted as far as it goes: shorten the request, or give the "
                              "server a larger window" % (asked, e.window or self.link.window))

    def finish_step(self, result):
        info = {"finish_reason": result.finish_reason or "stop", "id": result.id,
                "tokens": result.tokens, "cost": result.cost, "duration": result.duration}
        self.ui.step_finish(self.step_no, info)

    def run_turn(self, text):
        """Send one user message and loop until the model is done; returns the answer."""
        self.ledger.turn, self.rounds, self.strikes = dict.fromkeys(TURN_KEYS, 0), 0, 0
        self.streak = (None, 0)     # the last round's calls and results, and rounds in a row
        self.note_skills()
        self.request = {"role": "user", "content": clean_text(text)}   # kept verbatim by compaction
        self.add(self.request)
        try:
            answer = None
            while answer is None:
                self.maybe_compact()
                answer = self.take(self.query())
            self.ui.answer(answer)
            return answer
        except (KeyboardInterrupt, Cancelled, Terminated) as e:     # Terminated: the process ends
            self.settle_cancelled()
            raise e if isinstance(e, Terminated) else Cancelled("cancelled")
        finally:
            self.request = None     # the turn is over: /compact has no request to keep verbatim

    def take(self, result):
        """Act on a reply: the turn's answer, or None when the model is to be asked again."""
        try:
            if result.problem:
                raise ContractError(result.problem)
            names = list(self.runner.tools()) + list(self.runner.withdrawn)
            reply = parse_reply(result.content, names, result.finish_reason)
        except ContractError as e:
            return self.strike(result, e)
        self.strikes, content, limit = 0, kept_reply(result.content, reply), self.cfg.max_iterations
        calls, answer = reply["tool_calls"], reply.get("response") or ""
        if calls and 0 < limit <= self.rounds and reply["done"] and answer.strip():
            self.notice("tool round limit reached: the answer ends the turn, its calls did not run")
            calls = reply["tool_calls"] = []
            content = json.dumps(reply)
        self.add({"role": "assistant", "content": content})
        self.ui.reply(reply, self.step_no)
        self.rounds += bool(calls)
        try:        # the model call is complete even when a tool is denied or cancelled
            if calls and 0 < limit < self.rounds:
                raise LimitReached("tool round limit reached: the model still wanted tools after "
                                   "%d round%s; its last calls were not run (GROK_MAX_ITERATIONS "
                                   "or --max-tool-rounds raise it, 0 = no limit)"
                                   % (limit, "" if limit == 1 else "s"), cause="rounds")
            results = self.runner.execute(calls, self.step_no, self.cwd) if calls else []
        finally:
            self.finish_step(result)
        if not calls:
            return answer
        note = LAST_ROUND % limit if self.rounds == limit else None
        same = self.seen(results)       # rounds in a row with these calls and results
        self.add({"role": "user", "content": tool_results_message(results, NUDGE.get(same, note))})
        if reply["done"] and answer.strip():     # done with calls: they ran; the answer ends it
            self.add(final_reply(answer))
            return answer
        return self.stop_loop(answer, same) if same >= LOOP_STOP else None

    def seen(self, results):
        """How many rounds in a row had these calls and results, in any order or number (0: off)."""
        key = sorted({json.dumps([i.name, i.args, r.output], sort_keys=True) for i, r in results})
        count = self.streak[1] + 1 if key == self.streak[0] else 1
        self.streak = (key, count * self.cfg.loop_detection)
        return self.streak[1]

    def stop_loop(self, answer, seen):
        """End a turn that goes round in circles: its response is the answer, else an error."""
        loop = "the model repeated the same tool calls and results %d rounds in a row" % seen
        if not answer.strip():
            raise AgentError(loop + ", without an answer (GROK_LOOP_DETECTION=0 lets it go on)")
        self.notice("loop stopped: %s; its response is the answer" % loop)
        self.add(final_reply(answer))
        return answer

    def strike(self, result, e):
        self.strikes += 1
        content = result.content or ""
        self.add({"role": "assistant", "content": content[:4000] + "...[truncated]" * (len(content) > 4000)})
        self.finish_step(result)
        self.ui.invalid(content)
        if self.strikes >= MAX_STRIKES:
            raise AgentError("the model broke the JSON contract %d times in a row (last: %s)"
                             % (self.strikes, e))
        self.notice("invalid reply from the model (%s); asking again" % e)
        self.add({"role": "user", "content": corrective_message(str(e))})

    def stop(self):
        """Cancel the running turn, from any thread: every front end stops a turn here."""
        self.cancel.set()
        self.link.client.abort()
        for proc in list(self.runner.procs):
            kill_group(proc)

    def settle_cancelled(self, note="[interrupted by the user]", unrun=UNRUN):
        """After a cancelled or failed turn: stop all; end the turn in the history (idempotent)."""
        self.stop()
        last = self.messages[-1]
        answered = last["role"] == "assistant" and not tool_calls_in(last)
        if len(self.messages) > 1 and not answered and last.get("kind") != "note":
            if last["role"] == "assistant":
                self.add({"role": "user", "content": unrun})
            elif self.link.partial.strip():
                note = self.link.partial.rstrip() + "\n\n" + note
            self.add(final_reply(note))
        self.cancel.clear()

    # -- compaction ----------------------------------------------------------
    def maybe_compact(self):
        """Compact when the last call's tokens and what came after its reply pass the threshold."""
        since = max([i for i, m in enumerate(self.messages) if m["role"] == "assistant"] + [0]) + 1
        tokens = self.context_tokens + estimate_tokens(self.messages[since:])
        if 0 < self.cfg.compact_threshold <= 100.0 * tokens / SMALL_WINDOW:     # the window matters
            self.link.learn_window()
        if 0 < self.cfg.compact_threshold <= 100.0 * tokens / max(1, self.link.window):
            self.compact()

    def compact(self, keep=6, to_request=False):
        """Summarise all but the recent tail (to_request: all if need be); False: too little."""
        self.link.learn_window()
        pct = self.cfg.compact_threshold or 75.0
        history, cut, room = self.messages[1:], None, self.link.window * pct / 200.0
        for i, m in enumerate(history[2:], 2):      # cut at a reply: results stay with calls
            over = i <= len(history) - keep or estimate_tokens(history[cut or 0:]) > room
            if m.get("role") == "assistant" and over:
                cut = i
        cut = len(history) if cut is None and to_request and len(history) > 1 else cut
        if cut is None:
            return False
        old, tail = history[:cut], history[cut:]
        summary, how = self.summarise(old)
        if self.request and not any(m is self.request for m in tail):
            request = self.request["content"]
            summary += "\n\n[The request being worked on, verbatim]\n" + request[:4000]
            summary += "\n[... the rest of the request is in the summary]" * (len(request) > 4000)
        before = estimate_tokens(self.messages)
        self.reset([{"role": "user", "kind": "summary", "content": summary}] + tail)
        self.context_tokens = estimate_tokens(self.messages)
        self.notice("%s (about %d -> %d tokens)" % (how, before, self.context_tokens))
        if self.context_pct() >= pct:
            self.notice("the recent messages still fill %.0f%% of the window" % self.context_pct())
        return True

    def summarise(self, old):
        """(the text for `old`, what was done): its summary, unless cut off or not smaller."""
        model, window = self.cfg.summary_model, self.link.window
        window = window if model == self.link.model else model_entry(WINDOWS, model, DEFAULT_WINDOW)
        text = "Conversation to summarise:\n\n" + transcript(old, window)
        request = [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": text}]
        old_tokens = estimate_tokens(old)
        limit = max(32, min(2000, old_tokens // 2, self.link.window // 4))
        try:
            result = self.link.chat(request, model=model, max_tokens=limit)
        except (UserError, TransientError) as e:
            raise type(e)("compacting the history failed (summary model %s, GROK_SUMMARY_MODEL): %s"
                          % (model, e))
        self.ledger.add_cost(result.usage, model, kind="compaction")
        text, cut_off = (result.content or "").strip(), result.finish_reason == "length"
        if text and not cut_off and len(text) // 4 < old_tokens:
            return ("[Summary of the earlier conversation, compacted]\n" + text,
                    "compacted %d older messages into a summary" % len(old))
        why = "cut off at %d tokens" % limit if cut_off else "not smaller"
        return ("[%d older messages were dropped to fit the context window]" % len(old),
                "dropped the %d oldest messages: the summary was %s" % (len(old), why))

    def close(self):
        self.link.client.close()
        self.session.close()
        self.runner.close()


def transcript(messages, window):
    """Messages as text for the summariser: each capped, the whole within its `window`."""
    text = "\n\n".join("[%s] %s" % (m["role"], str(m["content"])[:3000]) for m in messages)
    limit = max(1000, window - 3000)    # characters: fits even at a token each, beside the summary
    head, extra = limit // 3, len(text) - limit
    if extra <= 0:
        return text
    return "%s\n[... %d characters omitted ...]\n%s" % (text[:head], extra, text[head + extra:])


def final_reply(text):
    return dict(role="assistant", content=json.dumps(dict(tool_calls=[], response=text, done=True)))


def tool_calls_in(message):
    with suppress(ContractError, AttributeError):
        calls = extract_json_object(str(message["content"])).get("tool_calls")
        return len(calls) if isinstance(calls, list) and message["role"] == "assistant" else 0
    return 0


def tool_results_message(results, note=None):
    """The one user message that carries a round's results, in call order."""
    text = "Tool results:\n\n" + "\n\n".join(
        "[%d] %s %s\n%s" % (i.index + 1, i.name, i.shown, r.output) for i, r in results)
    failed = ["[%d] %s (%s)" % (item.index + 1, item.name, failure_reason(result.output))
              for item, result in results if not result.ok]
    if failed:
        text += ("\n\n[Self-correction] These tool calls failed: %s. Before you go on, work "
                 "out what went wrong and adjust: wrong arguments, a missing prerequisite, or "
                 "another tool." % "; ".join(failed))
    return text + "\n\n" + note if note else text


def failure_reason(output):
    """One short line saying why a tool call failed: bash's closing note, else the first line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()] or ["no output"]
    reason = lines[-1].strip("[]") if re.fullmatch(r"\[.*\]", lines[-1]) else lines[0]
    return reason if len(reason) <= 100 else reason[:97] + "..."


def find_window(obj, depth=0):
    """The context window in a server's self-description (a positive int under a known key)."""
    keys = "num_ctx n_ctx max_model_len context_length context_window max_context_length".split()
    for key, value in obj.items() if isinstance(obj, dict) else ():
        text = value if key == "parameters" and isinstance(value, str) else ""
        found = re.search(r"\bnum_ctx\s+(\d+)", text)
        if found or (str(key).split(".")[-1] in keys and type(value) is int and value > 0):
            return int(found.group(1)) if found else value
    children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ()
    return next(filter(None, (find_window(c, depth + 1) for c in children if depth < 3)), None)


def estimate_tokens(messages):
    return sum(len(str(m.get("content", ""))) for m in messages) // 4


def now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# --- Front end: the interactive REPL (minimal mode) ---

def ask_tty(prompt):
    """Read one answer from the controlling terminal; None when there is none, "" on Ctrl-D."""
    keys = EscKey.active
    if keys:
        keys.__exit__()     # as after the turn: no Esc watcher; the terminal edits lines again
    try:
        with suppress(OSError), open("/dev/tty", "r+b", buffering=0) as tty:  # a tty cannot seek
            try:
                tty.write(prompt.encode("utf-8", "replace"))
                return tty.readline().decode("utf-8", "replace").strip()
            except KeyboardInterrupt:
                tty.write(b"\n")        # the cancel notice then starts on its own line
                raise
    finally:
        if keys:
            keys.__enter__()        # and back in the turn, with a new watcher


class EscKey:
    """`with keys:` around a turn: a lone Esc cancels it as Ctrl-C does; typing is kept (take())."""
    active = None

    def __init__(self, fd):
        self.fd, self.typed, self.saved = fd, b"", None     # saved: the terminal as it is restored
        with suppress(termios.error):
            self.saved = fd is not None and termios.tcgetattr(fd)

    def __enter__(self):
        if self.saved:
            cbreak = self.saved[:6] + [list(self.saved[6])]     # each key as it comes, not echoed
            cbreak[3] &= ~(termios.ICANON | termios.ECHO)
            cbreak[6][termios.VMIN], cbreak[6][termios.VTIME] = 1, 0
            self.mode(cbreak)
            EscKey.active = self
            self.watcher = threading.Thread(target=self.watch, daemon=True)
            self.watcher.start()

    def __exit__(self, *exc):
        if EscKey.active is self:
            EscKey.active = None
            self.mode(self.saved)
            self.watcher.join()     # it has finished its last read (a line it took is kept)

    def mode(self, attrs):
        with suppress(termios.error):      # the terminal is gone (SIGHUP follows)
            termios.tcsetattr(self.fd, termios.TCSANOW, attrs)

    def watch(self):
        with suppress(OSError):     # the terminal is gone
            while EscKey.active is self:
                if not select.select([self.fd], [], [], 0.1)[0] or EscKey.active is not self:
                    continue
                data = os.read(self.fd, 1024)
                if data.endswith(b"\x1b") and not select.select([self.fd], [], [], 0.05)[0]:
                    data = data[:-1]        # a lone Esc, not the start of an arrow key
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                self.typed += data

    def take(self):
        """(the lines typed meanwhile or None, the unfinished rest), edited as a terminal would."""
        text = self.typed.decode("utf-8", "replace")
        text, n = re.sub(r"\x1b(\[[0-?]*[ -/]*[@-~]|O.)?|[^\n\t\x7f\b -\U0010ffff]", "", text), 1
        while n:        # a backspace deletes the character before it, never a line already entered
            text, n = re.subn(r"[^\n\x7f\b][\x7f\b]|(?:^|(?<=\n))[\x7f\b]", "", text)
        lines, sep, rest = text.rpartition("\n")        # all whole lines: one message (a paste)
        self.typed = rest.encode("utf-8") if sep else b""
        return (lines, "") if sep else (None, rest)


class TerminalUI(UI):
    """Minimal mode: one gray line per tool call, then the answer."""

    def __init__(self):
        self.out = sys.stdout
        self.color = self.out.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        self.streamed = self.open_line = False
        self.lock, self.waiter = threading.RLock(), None      # waiting(): a thread redraws its line

    def paint(self, code, text):
        return "\033[%sm%s\033[0m" % (code, text) if self.color else text

    def width(self):
        return max(40, terminal_width())

    def fitted(self, text, more="  "):
        """On a terminal, lines too long for it broken at spaces; a continued line indented more."""
        width = self.width() if self.out.isatty() else 1 << 30
        return "\n".join(line if len(line) <= width else "\n".join(textwrap.wrap(
            line, width, expand_tabs=False, replace_whitespace=False, break_on_hyphens=False,
            subsequent_indent=line[:len(line) - len(line.lstrip())] + more))
            for line in text.split("\n"))

    def line(self, code, text):
        return self.paint(code, self.fitted(visible(text, newlines=False))) + "\n"

    def write(self, text):
        self.wait_stop()
        self.raw(text)

    def raw(self, text):
        with self.lock:
            print(text, end="", file=self.out, flush=True)

    def waiting(self, text_of):
        """On a terminal: text_of(seconds waited) now and every second, until the next output."""
        self.wait_stop()
        if self.out.isatty() and os.environ.get("TERM") != "dumb":     # it moves the cursor
            self.waiter = threading.Event()
            threading.Thread(target=self.tick, args=(self.waiter, text_of), daemon=True).start()

    def tick(self, stop, text_of):
        started = time.time()
        while not stop.is_set():
            with self.lock:
                if not stop.is_set():
                    self.show_wait(text_of(int(time.time() - started)))
            stop.wait(1)

    def wait_stop(self):
        with self.lock:
            if self.waiter:
                self.waiter.set()
                self.waiter = None
                self.show_wait("")

    def pause(self):
        """Before a notice or a question: the waiting line goes, a streamed line is ended."""
        self.wait_stop()
        if self.open_line:      # the text stays shown: answer() must not print it again
            self.write("\n")
            self.open_line = False

    def show_wait(self, text):
        """The waiting line shows text; "" erases it."""
        self.raw("\r\033[K" + (text and self.paint("90", text)))

    def step_start(self, step):
        self.streamed = self.open_line = False
        self.waiting(lambda seconds: "..." + (" %ds" % seconds if seconds else ""))

    def stream_text(self, text, final_hint):
        self.write(("" if self.streamed else "\n") + visible(text))
        self.streamed = self.open_line = True

    def stream_reset(self):
        self.pause()
        self.streamed = False

    def tool_start(self, call):
        self.stream_reset()
        self.write(self.line("90", "[%s] %s" % (call.name, call.shown[:200])))

    def tool_end(self, call, result):
        if not result.ok:       # failed or denied
            why = "denied, not run" if result.output == DENIED % call.name else failure_reason(result.output)
            self.write(self.line("31", "✗ [%s] %s: %s" % (call.name, call.shown[:60], why)))

    def answer(self, text):
        ending = "\n\n" if self.open_line else "\n"     # after the streamed text: one blank line
        self.write(ending if self.streamed else "\n%s\n\n" % visible(text))
        self.streamed = self.open_line = False

    def notice(self, text):
        self.pause()
        print(self.paint("33", self.fitted(visible(text))), file=sys.stderr, flush=True)

    def approve(self, call):
        """Shows exactly what would run; asks until the answer is y, n (the default), a or s."""
        self.pause()
        full = False
        while True:
            text, hidden = approval_text(call, full)
            ask = "  run it? [y]es / [N]o / [a]lways%s:" % (" / [s]how all" if hidden else "")
            said = ask_tty("%s\n%s " % (self.paint("1", self.fitted(text)), self.fitted(ask)))
            if said is None:
                self.notice("no terminal to ask for approval: %s denied" % call.name
                            + " (use --always-approve / -y)")
                return "no"
            said = said.lower()
            answer = {"y": "yes", "a": "always", "n": "no", "": "no", "s": "show"}.get(said, said)
            if answer in ("yes", "no", "always"):
                return answer
            full = full or answer == "show"

    def ask_user(self, question, options):
        self.pause()
        lines = [self.paint("1", self.fitted(visible(question)))] + [self.fitted(
            "  %d) %s" % (i, visible(o, False)), "   ") for i, o in enumerate(options, 1)]
        answer = ask_tty("\n%s\n  answer (number or text): " % "\n".join(lines))
        number = int(answer) if answer and answer.isdecimal() else 0
        return options[number - 1] if 0 < number <= len(options) else answer


HELP = """commands:
  /clear        start a new conversation
  /model [NAME] show the model, or use NAME from the next request on
  /sessions     list saved sessions: id, date, cost, first message
  /mcp          the MCP servers and their tools
  /help         this help (also /?)
  /exit         quit (also /q, Ctrl-D)
End a line with \\ to go on on the next one; lines pasted together are one message.
Esc or Ctrl-C cancels the running turn; the conversation is kept."""


def setup_readline(data_dir):
    """readline (None without it), with the history kept in data_dir if that is safe."""
    with suppress(ImportError):
        import readline
        if os.environ.get("TERM") != "dumb":    # a paste is one message, however slowly it arrives
            readline.parse_and_bind("set enable-bracketed-paste on")
        with suppress(OSError):
            if not data_dir_problem(data_dir):
                readline.read_history_file(os.path.join(data_dir, "history"))
        readline.set_history_length(1000)
        return readline


def save_history(readline, data_dir):
    """Via a 0600 temp file and a rename: a symlink planted as history is replaced, not followed."""
    if readline is None or data_dir_problem(data_dir):
        return
    # A failed write leaves no temp file; after the rename, deleting it fails (and is suppressed).
    with suppress(OSError), tempfile.NamedTemporaryFile(dir=data_dir, prefix=".history-") as tmp:
        readline.write_history_file(tmp.name)
        os.replace(tmp.name, os.path.join(data_dir, "history"))


def read_line(keys, prompt="> "):
    """One message: a line typed during the turn, else input (joined after a \\ and in a paste)."""
    line, rest = keys.take()
    if line is not None:
        sys.stdout.write(prompt + line + "\n")
        return line.strip()
    # No-op SIGALRMs (4/s): readline handles a Ctrl-C or SIGTERM only when its select() returns.
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: None)
    signal.setitimer(signal.ITIMER_REAL, 0.25, 0.25)
    try:
        lines = [rest + input(prompt + rest)]     # an unfinished line typed meanwhile leads on
        with suppress(EOFError):        # Ctrl-D after a \ or in a paste: the message so far
            while lines[-1].endswith("\\") or select.select([sys.stdin], [], [], 0.01)[0]:
                more = lines[-1].endswith("\\")
                lines[-1] = lines[-1][:-1] if more else lines[-1]
                lines.append(input("... " if more else ""))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    text = "\n".join(lines)
    return text.rstrip().lstrip("\n") if "\n" in text else text.strip()


def switch_model(agent, ui, name):
    known = None
    with suppress(Exception):       # a server that cannot list its models: unchecked
        known = server_models(agent.link.client)
    if name and known and name not in known:
        ui.notice("%s is not among the server's models; using it anyway" % name)
    agent.link.use_model(name or agent.link.model)     # and its window
    known = ", ".join(known or sorted(PRICES))
    ui.write(ui.fitted("model: %s (known: %s)" % (agent.link.model, known)) + "\n")


def run_line(agent, ui, line, keys, commands, help_text):
    """Run one message or command; its exit code (0: fine). No Ctrl-C in it may end the REPL."""
    name, _, arg = line.partition(" ") if line.startswith("/") else ("", "", "")
    try:
        with keys:
            if not name:
                agent.run_turn(line)
            elif name in ("/help", "/?"):
                ui.write(ui.fitted(help_text, " " * 16) + "\n")
            elif name == "/sessions":
                ui.write(sessions_text(agent, ui.width()))
            elif name == "/clear":
                agent.reset([])
                ui.write("conversation cleared\n")
            elif name == "/model":
                switch_model(agent, ui, arg.strip())
            elif name == "/mcp":        # each server's state and tools
                text = "".join("%s: %s\n" % (s.name, s.state) + "".join("  %s: %s\n" % (n, t.doc)
                               for n, t in s.tools.items()) for s in agent.runner.mcp)
                ui.write(visible(text or "no MCP servers (see the README: MCP servers)\n"))
            elif name in commands:
                commands[name](arg.strip())
            else:
                ui.notice("unknown command %s (try /help)" % name)
    except (KeyboardInterrupt, Cancelled):
        if not name:
            agent.settle_cancelled()        # run_turn settles a cancel too; again is harmless
        ui.notice("(cancelled)")
        return 130
    except GrokError as e:
        cost = "/cost" in commands and isinstance(e, LimitReached) and e.cause == "cost"
        ui.notice("error: %s%s" % (e, " (raise it with /cost N)" if cost else ""))
        return 0 if name else e.exit_code
    return 0


def repl(agent, ui, commands=None, help_text=HELP, before_prompt=None, prog="grok", first=""):
    """grok's and grok-detailed's REPL; `first` goes first. Piped: the last failed turn's code."""
    interactive, rl, keys = sys.stdin.isatty(), None, EscKey(None)
    if interactive:
        rl, keys = setup_readline(agent.cfg.data_dir), EscKey(sys.stdin.fileno())
        head = "%s %s · %s · /help for commands, Ctrl-D to quit"
        ui.write(ui.fitted(head % (prog, __version__, agent.link.model), "") + "\n")
    status, line = 0, first
    try:
        while line.partition(" ")[0] not in ("/exit", "/quit", "/q"):
            if line.strip():
                status = run_line(agent, ui, line, keys, commands or {}, help_text) or status
            try:        # piped there is no prompt: before_prompt follows each turn
                if before_prompt and (interactive or line.strip() and not line.startswith("/")):
                    before_prompt()
                line = read_line(keys) if interactive else input().strip()
            except KeyboardInterrupt:      # at the prompt: a new one
                ui.write("\n")
                line = ""
    except EOFError:        # Ctrl-D at the prompt, or the end of piped input
        if interactive:
            ui.write("\n")
    finally:
        save_history(rl, agent.cfg.data_dir)
    return 0 if interactive else status


# --- Front end: headless ---

def silence(fd=1):
    """fd has lost its reader or never had one: later writes and the exit flush go to /dev/null."""
    with suppress(OSError):
        devnull = os.open(os.devnull, os.O_RDWR)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)


class QuietStderr:
    """sys.stderr, silenced when its reader goes away: a notice never fails the turn writing it."""

    def __init__(self, stream):
        self.stream = stream

    def __getattr__(self, name):
        method = getattr(self.stream, name)

        def quiet(*args):
            with suppress(OSError):
                return method(*args)
            silence(2)
        return quiet if name in ("write", "flush") else method


class HeadlessUI(UI):
    """`grok -p`: the answer (progress on stderr) or a format's EVENTS; hooks run on one thread."""
    EVENTS = {"json": "step_start text tool_use step_finish error",         # grok's own
              "streaming-json": "text thought tool_call tool_call_update usage end error",
              "result": "error"}

    def __init__(self, fmt, allow=()):
        self.json, self.events, self.result = (fmt == f for f in self.EVENTS)
        self.printing = self.EVENTS.get(fmt, "").split()
        self.allow, self.session_id, self.step, self.last = allow, None, 0, {}
        self.thoughts, self.announced = "", set()   # the reasoning (result); tool calls told of
        self.partial = False                    # a write was cut off mid-line (an interrupt)
        self.printed = self.attempt = ""        # the answer text shown; that of the stream going on
        self.held = []                          # notices that came while the answer's line was open
        self.shown = visible if sys.stdout.isatty() else str     # the answer on a terminal

    def write(self, text):
        text, self.partial = "\n" + text if self.partial else text, True
        try:
            print(text, end="", flush=True)
        except OSError as e:        # the reader went away (a quiet end), or a full disk: no retry
            silence()
            if isinstance(e, BrokenPipeError):
                raise OutputClosed("stdout was closed")
            raise UserError("cannot write to stdout: %s" % (e.strerror or e))
        self.partial = False

    def emit(self, event_type, **fields):
        if event_type not in self.printing:
            return
        event = {"type": event_type}
        if self.json:
            event["timestamp"] = int(time.time() * 1000)
            if self.session_id:
                event["sessionID"] = self.session_id
            if event_type != "error":
                event["stepNumber"] = self.step
        event.update(fields)
        # ASCII-only JSON: any stdout encoding works; lone surrogates from the model cannot fail it.
        self.write(strict_json(scrub(event), ensure_ascii=True, separators=(",", ":")) + "\n")

    def out(self, text):
        self.emit("text", data=text) if self.events else self.write(self.shown(text))

    def end(self, agent, answer):
        """xAI's CLI's last word: the `end` event, or the object of its --output-format json."""
        reason = STOP_REASONS.get(self.last.get("finish_reason"), "end_turn")
        fields = dict({"text": answer} if self.result else {}, stopReason=reason,
                      sessionId=self.session_id, requestId=self.last.get("id"))
        fields.update({"thought": self.thoughts} if self.thoughts else {})
        usage, cost = self.spend(agent.ledger.turn), agent.ledger.turn["cost"]
        model = {"inputTokens": usage["input_tokens"], "outputTokens": usage["output_tokens"],
                 "cacheReadInputTokens": usage["cache_read_input_tokens"],
                 "cacheCreationInputTokens": 0, "modelCalls": self.step}
        fields.update(usage=usage, num_turns=self.step, modelUsage={agent.link.model: model})
        if usage_cost(agent.link.model, agent.last_usage or {}, agent.cfg.prices)[1]:  # priced
            model["costUSD"] = cost
            fields.update(total_cost_usd=cost, total_cost_usd_ticks=int(round(cost * 1e10)))
        if not self.result:
            return self.emit("end", **fields)       # (printed in streaming-json only)
        self.write(json.dumps(scrub(fields), ensure_ascii=True, indent=2) + "\n")

    @staticmethod
    def spend(n):
        """usage_numbers() as xAI's CLI has them: input without its cached part, reasoning apart."""
        cached = int(min(n["cached"], n["input"]))
        return {"input_tokens": int(n["input"]) - cached, "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 0, "output_tokens": int(n["output"]),
                "reasoning_tokens": int(n["reasoning"]), "total_tokens": int(n["total"])}

    def thought(self, text):
        self.emit("thought", data=text)
        self.thoughts += text if self.result else ""

    def fail(self, message, code):
        """The run's last word: an `error` event (JSON formats), a line on stderr; returns code."""
        with suppress(OutputClosed):
            self.emit("error", message=message)
        self.printed = ""
        self.notice("grok: %s" % message)
        return code

    def step_start(self, step):
        self.step = step
        self.emit("step_start")

    def stream_reset(self):
        self.attempt = ""

    def stream_text(self, text, final_hint):
        # Shown as it comes once the reply calls no tools; a retried stream prints only what is new.
        if self.json or self.result or final_hint != "empty":
            return
        self.attempt += text
        if len(self.attempt) > len(self.printed) and self.attempt.startswith(self.printed):
            self.out(self.attempt[len(self.printed):])
            self.printed = self.attempt

    def reply(self, reply, step):
        text = reply.get("response")
        if self.json and text:
            self.emit("text", text=text)
        elif text and reply["tool_calls"]:
            self.notice(text)

    def tool_start(self, call, status="in_progress"):
        self.announced.add(call.id)
        fields = dict({"locations": []}, **acp_tool_fields(call.name, call.args, call.cwd, False))
        self.emit("tool_call", toolCallId=call.id, status=status, toolName=call.name, content=[], **fields)
        if not self.json:
            self.notice("[%s] %s" % (call.name, call.shown))

    def tool_end(self, call, result):
        if self.events and call.id not in self.announced:       # refused before it started
            self.tool_start(call, "pending")
        status = "completed" if result.ok else "failed"
        self.emit("tool_call_update", toolCallId=call.id, status=status,
                  content=text_content(result.output), rawOutput=None, locations=[])
        if not self.json and result.output.startswith("error: "):  # why a bad call did not run
            self.notice("✗ [%s] %s" % (call.name, failure_reason(result.output)))
        started, finished = int(result.started * 1000), int(result.finished * 1000)
        timing = {"startedAt": started, "finishedAt": finished, "durationMs": finished - started}
        outcome = {"id": call.id, "success": bool(result.ok), "output": result.output}
        server = {"server": call.name.split("__")[1]} if call.name not in TOOLS else {}
        self.emit("tool_use", toolCall=dict(server, id=call.id, name=call.name, args=call.args),
                  toolResult=outcome, timing=timing)

    def step_finish(self, step, info):
        self.last, n = info, info["tokens"]
        self.emit("usage", usage=self.spend(n))
        # Reasoning is billed as output; costUsdTicks are 1e-6 USD.
        usage = {"inputTokens": int(n["input"]), "outputTokens": int(n["output"] + n["reasoning"]),
                 "totalTokens": int(n["total"]), "costUsdTicks": int(round(info["cost"] * 1e6))}
        self.emit("step_finish", finishReason=info["finish_reason"], usage=usage)

    def answer(self, text):
        if self.json or self.result:
            return
        end = "" if self.events else "\n"
        if not text.startswith(self.printed):       # a reply off contract streamed other text
            self.notice("warning: text streamed to stdout was not the final answer, which follows")
            self.out(end + text + end)
        elif text[len(self.printed):] + end:
            self.out(text[len(self.printed):] + end)
        self.printed = ""
        self.notice()

    def notice(self, text=None):
        """A line on stderr (None: those held); held while the answer's line is open (2>&1)."""
        self.held += [] if text is None else [text]
        if not self.printed:        # (json mode streams no answer text)
            sys.stderr.write("".join(visible(scrub(t)) + "\n" for t in self.held))
            sys.stderr.flush()
            self.held = []

    def approve(self, call):
        if rule_matches(call, self.allow):     # (with -y the agent does not ask)
            return "yes"
        what = "command" if call.name == "bash" else "path" if call.name in TOOLS else "MCP tool"
        shown = call.shown[:200] + ("..." if len(call.shown) > 200 else "")
        raise AgentError("Tool `%s` denied: %s not in allowlist: %s (allow it with --allow PATTERN"
                         " or --always-approve)" % (call.name, what, shown))


def read_prompt(args, notice):
    """-p's prompt (`-`: stdin), then --prompt-file's, --prompt-json's and piped text, if any."""
    stdin = getattr(sys.stdin, "buffer", None)
    parts = [stdin.read().decode("utf-8", "replace") if args.prompt == "-" else args.prompt]
    got = args.prompt_file and read_regular(os.path.expanduser(args.prompt_file), PIPED_CAP)
    if args.prompt_file and not got:
        raise UserError("--prompt-file: cannot read %s (not a regular file)" % args.prompt_file)
    parts += [got[0].decode("utf-8", "replace")] if got else []
    try:
        parts += [acp_prompt_text(json.loads(args.prompt_json))] if args.prompt_json else []
    except (ValueError, RpcError) as e:
        raise UserError("--prompt-json: %s" % e)
    prompt = "\n\n".join(p for p in parts if p)
    if not prompt.strip():
        raise UserError("the prompt is empty")
    data = piped_input(stdin) if args.prompt != "-" and not args.output else b""
    if len(data) > PIPED_CAP:
        notice("note: the piped input was cut to its first %d bytes" % PIPED_CAP)
    text = data[:PIPED_CAP].decode("utf-8", "replace")
    return "%s\n\n%s" % (prompt, text) if text.strip() else prompt


def piped_input(stdin):
    """A pipe's or file's text; none from a pipe grok's parent holds open, idle for STDIN_WAIT s."""
    with suppress(OSError, ValueError, AttributeError):
        kind = stat.S_IFMT(os.fstat(stdin.fileno()).st_mode)
        if kind == stat.S_IFREG or (kind == stat.S_IFIFO and not parent_idle(stdin.fileno())):
            return stdin.read(PIPED_CAP + 1)
    return b""


def parent_idle(fd):
    """Whether grok's parent holds fd's pipe open for writing, silent for STDIN_WAIT s (Linux)."""
    with suppress(OSError, ValueError, IndexError):
        pipe, parent = os.readlink("/proc/self/fd/%d" % fd), "/proc/%d/" % os.getppid()
        for name in os.listdir(parent + "fd"):
            if os.readlink(parent + "fd/" + name) == pipe:
                with open(parent + "fdinfo/" + name) as f:
                    if int(f.read().split("flags:")[1].split()[0], 8) & (os.O_WRONLY | os.O_RDWR):
                        return not select.select([fd], [], [], STDIN_WAIT)[0]
    return False


def headless(args, cfg):
    if os.path.isdir(cfg.data_dir) and data_dir_problem(cfg.data_dir):  # open to planted sessions
        raise UserError(data_dir_problem(cfg.data_dir))
    ui = HeadlessUI(args.fmt, args.allow)
    prompt = read_prompt(args, ui.notice)
    agent = open_agent(cfg, ui, MINIMAL, args)
    ui.session_id = agent.session.id
    try:
        ui.end(agent, agent.run_turn(prompt))
        return 0
    except (Exception, KeyboardInterrupt, Terminated) as e:
        message, code, stop = turn_end(e)
        if code == 4 and os.environ.get("GROK_DEBUG"):
            raise
        if stop == "cancelled":
            agent.settle_cancelled()        # run_turn settled it; again is harmless
        else:       # a history that --resume can continue
            reason = "internal error" if code == 4 else str(e)
            agent.settle_cancelled("[the turn failed: %s]" % reason,
                                   "[the turn stopped before these tool calls ran: %s]" % reason)
        return 0 if isinstance(e, OutputClosed) else ui.fail(message, code)     # (the reader left)
    finally:
        agent.close()


def open_agent(cfg, ui, contract, args, new_if_busy=False):
    """A new agent (-s UUID: with that id) or one resuming -r ID / -c; busy and new_if_busy: new."""
    new_id = args.session_id
    if new_id and not re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", new_id):
        raise UserError("--session-id must be a UUID (got %r)" % new_id)
    if new_id and os.path.exists(os.path.join(cfg.data_dir, "sessions", new_id + ".jsonl")):
        raise UserError("session %s is already in use (--resume continues it)" % new_id)
    ask = None if isinstance(ui, HeadlessUI) else (
        lambda text: (ask_tty(text) or "").lower() in ("y", "yes"))
    mcp = mcp_config(cfg, args.mcp_config, ask, ui.notice)
    session_id = args.resume and find_session(cfg.data_dir, args.resume)
    if args.cont:       # the newest session typed into
        session_id = next((s[0] for s in list_sessions(cfg.data_dir) if s[2]), None)
        if not session_id:
            raise UserError("no session to continue in %s" % os.path.join(cfg.data_dir, "sessions"))
        ui.notice("continuing session %s" % session_id)
    try:
        session = Session(cfg.data_dir, session_id or new_id, warn=ui.notice)
        agent = Agent(cfg, ui, contract, session=session, resume=bool(session_id), mcp=mcp)
    except SessionBusy as e:
        if not new_if_busy:
            raise
        ui.notice("%s: starting a new session" % e)
        return Agent(cfg, ui, contract, mcp=mcp)
    if session_id and args.cwd:
        agent.set_cwd(cfg.cwd)
    return agent


# --- Front end: ACP server (Agent Client Protocol v1) ---
# Newline-delimited JSON-RPC 2.0 on stdin/stdout: the main thread reads; a worker runs each prompt.

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, AUTH_REQUIRED, RESOURCE_NOT_FOUND = -32603, -32000, -32002  # the last two: ACP's
TOOL_KINDS = {"bash": "execute", "read_file": "read", "write_file": "edit", "list_files": "search",
              "web_search": "fetch", "ask_user": "other"}
PERMISSION_OPTIONS = [{"optionId": k, "name": name, "kind": k} for k, name in (
    ("allow_once", "Allow once"), ("allow_always", "Always allow"), ("reject_once", "Reject"))]
APPROVALS = {"allow_once": "yes", "allow_always": "always"}     # what approve() answers; else "no"
DEFERRED = object()             # a request answered later, from a worker thread
AUTH_METHODS = {"cached_token": "API key from a .env file", "xai.api_key": "API key from the environment"}
AGENT_CAPABILITIES = {"loadSession": True, "mcpCapabilities": {"http": False, "sse": False},
                      "promptCapabilities": dict(image=False, audio=False, embeddedContext=True)}
ACP_INIT = {"protocolVersion": 1, "agentCapabilities": AGENT_CAPABILITIES,     # + authMethods
            "agentInfo": {"name": "grok", "title": "grok.py", "version": __version__}}


def bad_params(problem):
    return RpcError(INVALID_PARAMS, "Invalid params: " + problem)


def text_content(text):
    return [{"type": "content", "content": {"type": "text", "text": text}}]


def acp_tool_fields(name, args, cwd, diff=True):
    """title, kind, rawInput, locations and a diff for write_file (AcpServer.send scrubs them)."""
    title = ": ".join(filter(None, (name, key_arg(name, args))))
    fields = {"title": title[:200], "kind": TOOL_KINDS.get(name, "other"), "rawInput": args}
    if name not in ("read_file", "write_file") or arg_problem(name, args):
        return fields
    path = canonical(cwd, args["path"])
    fields["locations"] = [{"path": path}]
    if name == "write_file" and diff and isinstance(args.get("content"), str):
        fields["content"] = [dict(type="diff", path=path, oldText=old_text(path), newText=args["content"])]
    return fields


def old_text(path):
    """The text write_file replaces; None if the file is new, binary, not regular or too big."""
    data = (read_regular(path, READ_CAP) or (b"\x00",))[0]
    return None if len(data) > READ_CAP or b"\x00" in data else data.decode("utf-8", "replace")


def acp_prompt_text(blocks):
    """One user message from ACP content blocks: text as is, files as text."""
    if not isinstance(blocks, list) or not blocks:
        raise bad_params("prompt must be a non-empty array of content blocks")
    parts = []
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise bad_params("each prompt item must be a content block with a \"type\"")
        res = block.get("resource") if isinstance(block.get("resource"), dict) else {}
        if block["type"] == "text":
            if not isinstance(block.get("text"), str):
                raise bad_params("a text content block needs a \"text\" string")
            parts.append(block["text"])
        elif block["type"] == "resource_link":
            parts.append("[file: %s]" % uri_path(block.get("uri") or block.get("name")))
        elif block["type"] == "resource" and isinstance(res.get("text"), str):
            parts.append("[file: {0}]\n{1}\n[end of file: {0}]".format(uri_path(res.get("uri")), res["text"]))
        elif block["type"] == "resource":
            parts.append("[file: %s (binary, not included)]" % uri_path(res.get("uri")))
        else:
            raise bad_params("%s content blocks are not supported" % json.dumps(block["type"]))
    text = "\n\n".join(p for p in parts if p.strip())
    if not text.strip():
        raise bad_params("the prompt has no text")
    return text


def uri_path(uri):
    if isinstance(uri, str) and uri.startswith("file://"):
        return urllib_parse.unquote(urllib_parse.urlsplit(uri).path)
    return uri if isinstance(uri, str) else "(unnamed)"


def split_tool_results(text, calls):
    """[(call, {"content": its output} or {}, ok)], read back from the tool-results message."""
    text = text if text.startswith("Tool results:") else ""
    rest, cut, failed = text.rpartition("\n\n[Self-correction] ")
    rest, results = rest if cut else text, []
    for i, call in reversed(list(enumerate(calls, 1))):
        head = "\n\n[%d] %s %s\n" % (i, call["tool"], scrub(key_arg(call["tool"], call["args"])))
        before, found, output = rest.rpartition(head)
        ok = found and "[%d] %s (" % (i, call["tool"]) not in failed
        results.insert(0, (call, {"content": text_content(output)} if found else {}, ok))
        rest = before if found else rest
    return results


class AcpSession(UI):
    """One ACP session: its Agent, and UI hooks that send its turns as session/update messages."""

    def __init__(self, server, **agent_args):
        self.server, self.busy = server, False
        self.notice = server.log        # the UI hook: a line on stderr
        self.calls = itertools.count(1)     # numbers a replay's toolCallIds (a turn's: call_STEP_I)
        self.fields = {}        # the announced fields of the calls not run yet, by toolCallId
        self.streamed, self.said, self.finish_reason, self.request_id = False, False, None, None
        self.agent = Agent(server.cfg, self, key=server.key, **agent_args)
        self.id = self.agent.session.id

    def update(self, session_update, **fields):
        params = {"sessionId": self.id, "update": dict(sessionUpdate=session_update, **fields)}
        self.server.send({"jsonrpc": "2.0", "method": "session/update", "params": params})

    def say(self, reply, streamed=False):
        if isinstance(reply.get("thinking"), str) and reply["thinking"].strip():
            self.thought(reply["thinking"])
        if reply.get("response") and not streamed:
            self.message(reply["response"])

    def message(self, text, streamed=False):
        """Answer text; each round's starts a paragraph of its own (a stream's pieces join)."""
        gap = self.said and not (streamed and self.streamed)
        self.update("agent_message_chunk", content={"type": "text", "text": "\n\n" * gap + text})
        self.said, self.streamed = True, streamed

    def run_prompt(self, rpc_id, text):
        agent, ledger, note, error = self.agent, self.agent.ledger, {}, None
        self.finish_reason, self.request_id, self.said = None, None, False
        try:
            agent.run_turn(text)
            reason = STOP_REASONS.get(self.finish_reason, "end_turn")
        except Exception as e:
            reason = "cancelled" if agent.cancel.is_set() else turn_end(e)[2]
            note = {"message": str(e)} if reason == "max_turn_requests" else {}
            error = None if reason else self.server.rpc_error(e)
            if error and isinstance(e, LimitReached):      # the cost limit
                error.payload["data"] = {"reason": "cost_limit", "costUsd": ledger.cost_usd}
        ended = text_content("not run: the turn ended (%s)" % (reason or "error"))
        for call_id in self.fields:      # announced, never run
            self.update("tool_call_update", toolCallId=call_id, status="failed", content=ended)
        self.fields.clear()
        t = ledger.turn      # read before the next prompt starts a new count
        usage = {"inputTokens": t["input"], "outputTokens": t["output"], "totalTokens": t["total"],
                 "thoughtTokens": t["reasoning"], "cachedReadTokens": t["cached"]}
        meta = dict(usage, usage=dict(usage), costUsd=round(t["cost"], 8), model=agent.link.model,
                    sessionCostUsd=round(ledger.cost_usd, 8), requestId=self.request_id, **note)
        self.busy = False
        self.server.respond(rpc_id, error or {"stopReason": reason, "_meta": meta})

    # -- UI hooks, called from the worker thread that runs the turn
    def step_start(self, step):
        self.streamed = False

    def stream_text(self, text, final_hint):
        self.message(text, streamed=True)

    def thought(self, text):
        self.update("agent_thought_chunk", content={"type": "text", "text": text})

    def reply(self, reply, step):
        self.say(reply, self.streamed)
        for i, call in enumerate(reply["tool_calls"], 1):
            call_id = "call_%d_%d" % (step, i)       # the ToolCall.id ToolRunner.execute gives it
            self.fields[call_id] = acp_tool_fields(call["tool"], call["args"], self.agent.cwd)
            self.update("tool_call", toolCallId=call_id, status="pending", **self.fields[call_id])

    def approve(self, call):
        if self.agent.cancel.is_set():
            return "no"
        tool_call = dict(toolCallId=call.id, status="pending", **self.fields[call.id])
        asked = {"sessionId": self.id, "toolCall": tool_call, "options": PERMISSION_OPTIONS}
        answer = self.server.request("session/request_permission", asked, cancel=self.agent.cancel)
        if "error" in (answer or {}):
            self.notice("the permission request failed: %s" % json.dumps(answer["error"])[:200])
        with suppress(TypeError, KeyError):     # no answer (a cancel, no client), outcome or option
            outcome = answer["result"]["outcome"]
            return APPROVALS[outcome["optionId"]] if outcome["outcome"] == "selected" else "no"
        return "no"

    def tool_start(self, call):
        self.update("tool_call_update", toolCallId=call.id, status="in_progress")

    def tool_end(self, call, result):
        diff = self.fields.pop(call.id, {}).get("content", [])
        status, content = ("completed", diff) if result.ok else ("failed", [])
        self.update("tool_call_update", toolCallId=call.id, status=status,
                    content=content + text_content(result.output))

    def step_finish(self, step, info):
        self.finish_reason, self.request_id = info["finish_reason"], info["id"] or self.request_id

    def replay(self):
        """session/load: the history (checked on load) as the updates a live turn would send."""
        messages = self.agent.messages[1:]
        not_typed = ("Tool results:", corrective_message("").split(":")[0], "[the user cancelled")
        for message, after in zip(messages, messages[1:] + [{"content": ""}]):
            role, text, kind = message["role"], message["content"], message.get("kind")
            if role == "user" and kind != "note" and not text.startswith(not_typed):
                update = "agent_thought_chunk" if kind == "summary" else "user_message_chunk"
                self.update(update, content={"type": "text", "text": text})
                self.said = False       # typed by a person, or a summary: its answer needs no gap
            if role != "assistant":
                continue
            with suppress(ContractError):       # an invalid reply the model was asked to redo
                reply = parse_reply(text, list(TOOLS) + list(self.agent.runner.tools()))
                self.say(reply)
                for call, shown, ok in split_tool_results(after["content"], reply["tool_calls"]):
                    fields = acp_tool_fields(call["tool"], call["args"], self.agent.cwd, diff=False)
                    self.update("tool_call", toolCallId="call_%d" % next(self.calls),
                                status="completed" if ok else "failed", **fields, **shown)


class AcpServer:
    """The JSON-RPC side: answers requests (acp_main reads them), keeps the sessions."""

    def __init__(self, cfg, out):
        self.cfg, self.out, self.sessions, self.workers = cfg, out, {}, []
        self.key, self.mcp = (cfg.api_key, cfg.key_source), {}     # the key may come later (.env)
        self.request_ids = itertools.count(1)   # next() and the dict's get/pop are atomic: no lock
        self.pending = {}               # id of a request we sent -> the queue its answer goes in
        self.out_lock, self.closed = threading.Lock(), threading.Event()  # closed: nobody answers
        self.methods = {"initialize": self.initialize, "authenticate": self.authenticate,
                        "session/new": self.new_session, "session/load": self.load_session,
                        "session/prompt": self.prompt, "session/cancel": self.cancel}

    # -- the wire
    def send(self, message):
        data = (strict_json(scrub(message), ensure_ascii=False) + "\n").encode(errors="replace")
        with self.out_lock:
            if self.out is None:
                return
            try:
                self.out.write(data)
                self.out.flush()
            except (OSError, ValueError):
                self.out = None
                self.log("stdout is closed: cancelling running turns")
                self.stop_all()

    def respond(self, request_id, result):
        """Answer a request with result, or with the error an RpcError result stands for."""
        answer = {"error": result.payload} if isinstance(result, RpcError) else {"result": result}
        self.send(dict(jsonrpc="2.0", id=request_id, **answer))

    def request(self, method, params, cancel):
        """Ask the client and wait for its answer message; None if cancelled or closed."""
        request_id = next(self.request_ids)
        answers = self.pending[request_id] = queue.SimpleQueue()
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            while not (self.closed.is_set() or cancel.is_set()):
                with suppress(queue.Empty):
                    return answers.get(timeout=0.05)
        finally:
            self.pending.pop(request_id, None)

    def log(self, text):
        sys.stderr.write(visible(scrub(text)) + "\n")     # QuietStderr: never raises
        sys.stderr.flush()

    def handle(self, line):
        """A request (always answered), a notification (never) or an answer to a request of ours."""
        try:
            message = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError) as e:      # not UTF-8, not JSON, or nested too deep
            return self.respond(None, RpcError(PARSE_ERROR, "Parse error: %s" % e))
        if not isinstance(message, dict) or message.get("jsonrpc", "2.0") != "2.0":
            message = {"id": None}      # answered as an invalid request
        method, request_id = message.get("method"), message.get("id")
        if method is None and "id" in message and ("result" in message or "error" in message):
            with suppress(KeyError, TypeError):     # else not (or no longer) awaited, or unhashable
                self.pending[request_id].put(message)       # wakes the thread waiting for it
        elif "id" in message or not isinstance(method, str):
            self.call(method, request_id, message.get("params"))
        elif method == "session/cancel" and isinstance(message.get("params"), dict):
            self.cancel(message["params"])

    def call(self, method, request_id, params):
        if type(request_id) not in (str, int, type(None)):
            request_id, method = None, None     # answered with no id, as an invalid request
        try:
            if not isinstance(method, str):
                raise RpcError(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request")
            if method not in self.methods:
                raise RpcError(METHOD_NOT_FOUND, "Method not found: %s" % method)
            if not isinstance(params, (dict, type(None))):
                raise bad_params("params must be an object")
            result = self.methods[method](params or {}, request_id)
        except Exception as e:
            result = self.rpc_error(e)
        if result is not DEFERRED:
            self.respond(request_id, result)

    def rpc_error(self, e):
        """The RpcError for e (from its except block); a bug is logged (GROK_DEBUG: a traceback)."""
        if isinstance(e, RpcError):
            return e
        message, code, _ = turn_end(e)
        if code == 4:       # a bug
            self.log(traceback.format_exc() if os.environ.get("GROK_DEBUG") else message)
        return RpcError(INTERNAL_ERROR, message)

    # -- the methods, and what they share
    def need_key(self):
        if not self.key[0]:     # one put in a .env file since the start: scrubbed as configured
            self.key = find_api_key()
            SECRETS.update(filter(None, [self.key[0]]))
        if not self.key[0]:
            raise RpcError(AUTH_REQUIRED, "no API key: set GROK_API_KEY or XAI_API_KEY where the "
                           "client starts grok, or put GROK_API_KEY=... in " + ", ".join(ENV_FILES))

    def session_setup(self, params, optional=False):
        """The cwd (None: load got none) and stdio MCP servers of session/new or /load; the key."""
        cwd, servers = params.get("cwd"), params.get("mcpServers", [])
        directory = isinstance(cwd, str) and os.path.isabs(cwd) and os.path.isdir(cwd)
        if not (directory or optional and cwd is None):
            raise bad_params("cwd must be an absolute directory path, not %s" % json.dumps(cwd))
        if not isinstance(servers, list):
            raise bad_params("mcpServers must be an array")
        try:
            table = {s["name"]: dict(s, env={e["name"]: e["value"] for e in s.get("env") or ()})
                     for s in servers}
        except (TypeError, KeyError, AttributeError):
            raise bad_params("an mcpServer with no name or a bad env")
        self.need_key()
        return cwd and os.path.normpath(cwd), mcp_specs(table, "mcpServers", self.log)

    def start(self, cwd, mcp, **resume):
        """A new AcpSession whose Agent works in cwd with these MCP servers; resume: its session."""
        session = AcpSession(self, cwd=cwd, mcp=dict(self.mcp, **mcp), **resume)
        self.sessions[session.id] = session
        return session

    def initialize(self, params, request_id):
        if type(params.get("protocolVersion")) is not int:
            raise bad_params("protocolVersion must be an integer")
        auth = []       # methods xAI's CLI's clients look for; authenticate checks the key again
        with suppress(RpcError):        # no key (yet): no method
            self.need_key()
            kind = "xai.api_key" if self.key[1].startswith("$") else "cached_token"
            auth = [dict(id=kind, name=AUTH_METHODS[kind], description="the key in " + self.key[1])]
        return dict(ACP_INIT, authMethods=auth)

    def authenticate(self, params, request_id):
        method = params.get("methodId")
        if not isinstance(method, str) or method not in AUTH_METHODS:
            known = ", ".join(AUTH_METHODS)
            raise bad_params("unknown methodId %s (known: %s)" % (json.dumps(method), known))
        self.need_key()
        return {}

    def new_session(self, params, request_id):
        cwd, mcp = self.session_setup(params)
        return {"sessionId": self.start(cwd, mcp).id}

    def load_session(self, params, request_id):
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise bad_params("sessionId must be a string")
        cwd, mcp = self.session_setup(params, optional=True)
        session = self.sessions.get(session_id)
        if session is None:         # not held by this process yet: open its file
            store = Session(self.cfg.data_dir, session_id, warn=self.log)
            try:        # (isfile is False for a path that holds a NUL)
                if os.sep in session_id or session_id[0] == "." or not os.path.isfile(store.path):
                    raise UserError("no session %s in %s" % (json.dumps(session_id), store.dir))
                session = self.start(cwd, mcp, session=store, resume=True)
            except UserError as e:
                raise RpcError(RESOURCE_NOT_FOUND, str(e))
        if session.busy:
            raise RpcError(INVALID_REQUEST, "session %s is running a prompt" % session_id)
        if cwd and cwd != session.agent.cwd:
            session.agent.set_cwd(cwd)
        session.replay()
        return {}

    def prompt(self, params, request_id):
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise bad_params("sessionId must be a string")
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, "unknown session %s (start it with session/new or "
                           "session/load)" % json.dumps(session_id))
        text = acp_prompt_text(params.get("prompt"))
        if session.busy:        # set here, on the main thread; cleared only by the turn's worker
            raise RpcError(INVALID_REQUEST, "session %s is running a prompt" % session.id)
        session.busy = True
        session.agent.cancel.clear()    # a stop from now on cancels this prompt
        worker = threading.Thread(target=session.run_prompt, args=(request_id, text), daemon=True)
        self.workers = [w for w in self.workers if w.is_alive()] + [worker]
        worker.start()
        return DEFERRED

    def cancel(self, params, request_id=None):
        with suppress(KeyError):        # no such session; str: never unhashable
            self.sessions[str(params.get("sessionId"))].agent.stop()

    def stop_all(self):
        """Cancel every running turn: its model call, running tools, a pending approval."""
        self.closed.set()
        for session in list(self.sessions.values()):
            session.agent.stop()


def acp_main(cfg, mcp_files):
    """Serve ACP until stdin closes; exit 0. No .mcp.json: the editor sends its MCP servers."""
    server = AcpServer(cfg, os.fdopen(os.dup(1), "wb"))
    os.dup2(2, 1)       # from here a stray print or child writes to stderr; stdout is protocol only
    sys.stdout = sys.stderr
    server.mcp = mcp_config(cfg, mcp_files, False, server.log)
    try:
        for line in filter(bytes.strip, sys.stdin.buffer):      # each non-blank line
            server.handle(line)
        server.stop_all()     # the client is gone: cancel what runs, start nothing more
        for worker in list(server.workers):       # in-flight prompts still get their answers
            worker.join()
    finally:
        server.stop_all()
        for session in list(server.sessions.values()):
            session.agent.close()
    return 0


# --- main ---

OUTPUT_FORMATS = {"plain": "plain", "json": "result", "streaming-json": "streaming-json"}
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")     # as xAI's CLI
MODES_HERE = (None, "default", "dontAsk", "bypassPermissions")      # the --permission-mode grok has
# xAI CLI flags grok lacks ({flag: nargs}): accepted, named in a notice; quiet ("q") if done anyway
XAI_FLAGS = {"--check": 0, "--experimental-memory": 0, "--restore-code": 0, "--oauth": 0,
             "--fork-session": 0, "--include-partial-messages": 0, "--leader": 0, "--reauth": 0,
             "--agent-profile": None, "--agent": None, "--agents": None, "--worktree": "?",
             "--worktree-ref": None, "--ref": None, "--no-plan": "q", "--no-subagents": "q",
             "--no-memory": "q", "--verbatim": "q", "--no-auto-update": "q", "--no-alt-screen": "q",
             "--no-leader": "q"}
XAI_TOOLS = {"run_terminal_command": "bash", "run_terminal_cmd": "bash", "list_dir": "list_files",
             "write": "write_file", "search_replace": "write_file", "ask_user_question": "ask_user"}
ENV_HELP = """environment:
  GROK_API_KEY / XAI_API_KEY   API key (else read from ~/.grok/.env, ~/.claude/.env, then ./.env)
  GROK_BASE_URL                OpenAI-compatible API (default %s)
  GROK_MODEL                   model id (default %s)
  COST_LIMIT                   USD per session, 0 = none (default 10.00)
  GROK_SKILLS_DIR              skills folder (default <script dir>/skills)
  GROK_DATA_DIR                sessions and history (default ~/.local/share/grok-agent)
  GROK_PRICES                  IN,CACHED,OUT USD per million tokens, for servers other than xAI's
  also (see the README): GROK_CONTEXT_WINDOW, GROK_TEMPERATURE, GROK_TIMEOUT, GROK_MAX_RETRIES,
  GROK_RETRY_BACKOFF, GROK_MAX_ITERATIONS, GROK_LOOP_DETECTION, GROK_MAX_TOKENS, GROK_BASH_TIMEOUT,
  GROK_SUMMARY_MODEL, GROK_STREAM, GROK_ALWAYS_APPROVE, GROK_DEBUG, COMPACT_THRESHOLD, HTTPS_PROXY /
  HTTP_PROXY / NO_PROXY, NO_COLOR, GROK_SANDBOX, GROK_SANDBOX_BACKEND

other commands: grok models [--json]   the server's models (the default marked)

exit codes: 0 ok, 1 user error, 2 network/server, 3 agent or tool error, 4 internal error"""


def arg_parser(prog="grok", description="A minimal agent harness for xAI's Grok models."):
    """argparse (imported when needed) with both scripts' flags; a bad flag: UserError, exit 1."""

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            self.print_usage(sys.stderr)
            flag = re.search(r"(?:unrecognized arguments|ambiguous option): (--?[^\s=]+)", message)
            near = flag and difflib.get_close_matches(flag[1], self._option_string_actions, 1, 0.7)
            raise UserError(message + ("; did you mean %s?" % near[0] if near else ""))
    width = terminal_width() - 2    # once: argparse would import shutil (2.5 ms) and ask ~50 times
    p = Parser(prog=prog, description=description, epilog=ENV_HELP % (DEFAULT_BASE_URL, DEFAULT_MODEL),
               formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=width))
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    p.add_argument("-m", "--model", help="model id (default $GROK_MODEL or %s)" % DEFAULT_MODEL)
    p.add_argument("--reasoning-effort", "--effort", dest="effort", choices=EFFORTS, metavar="E",
                   help="%s: sent as reasoning_effort (unless refused)" % ", ".join(EFFORTS))
    p.add_argument("--cwd", metavar="DIR", help="working directory for the tools")
    p.add_argument("-y", "--always-approve", "--yolo", action="store_true", help="skip approvals")
    p.add_argument("--sandbox", choices=("workspace", "read-only", "off"), help="see README")
    p.add_argument("--sandbox-network", choices=("on", "off"), help="off: commands get no network")
    p.add_argument("--mcp-config", action="append", default=[], metavar="FILE",
                   help="start the MCP servers of this .mcp.json-style file (repeatable)")
    which = p.add_mutually_exclusive_group()      # which session
    which.add_argument("-r", "--resume", metavar="ID", help="continue a saved session")
    which.add_argument("-c", "--continue", dest="cont", action="store_true", help="latest session")
    which.add_argument("-s", "--session-id", metavar="UUID", help="a new session with this id")
    p.add_argument("message", nargs="*", help="start the chat with this message")
    return p


def terminal_width():
    """$COLUMNS, else the width of the terminal on stdout, else 80 (as shutil.get_terminal_size)."""
    with suppress(KeyError, ValueError):
        if int(os.environ["COLUMNS"]) > 0:
            return int(os.environ["COLUMNS"])
    with suppress(AttributeError, ValueError, OSError):
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    return 80


def parse_args(argv):
    if argv[:1] == ["agent"]:       # xAI's CLI's command line: `grok agent [...] stdio` is --acp
        if "stdio" not in argv[1:]:
            raise UserError("usage: grok agent [--always-approve] [--model M] stdio")
        argv = ["--acp"] + [a for a in argv[1:] if a != "stdio"]
    p, hide = arg_parser(), argparse.SUPPRESS
    p.add_argument("-p", "--prompt", "--single", help="run one prompt headless ('-' reads stdin)")
    p.add_argument("--prompt-file", metavar="PATH", help="headless: (more of) the prompt")
    p.add_argument("--prompt-json", metavar="JSON", help="headless: (more of) the prompt as blocks")
    p.add_argument("--format", choices=("text", "json", "streaming-json"), default="text",
                   help="headless output (default text)")
    p.add_argument("--output-format", dest="output", choices=OUTPUT_FORMATS, help="as xAI's CLI")
    p.add_argument("--max-tool-rounds", "--max-turns", type=int, metavar="N", help=(
        "headless: stop after N tool rounds, exit 3 (0 = no limit; default $GROK_MAX_ITERATIONS)"))
    p.add_argument("--allow", "--allowedTools", action="append", metavar="PATTERN", default=[],
                   help="headless: allow bash commands / write_file paths it matches (repeatable)")
    p.add_argument("--deny", "--disallowedTools", action="append", metavar="RULE", default=[])
    p.add_argument("--tools", help="only these tools (comma-separated)")
    p.add_argument("--disallowed-tools", metavar="TOOLS", help="not these tools (comma-separated)")
    p.add_argument("--disable-web-search", action="store_true", help="no web_search tool")
    p.add_argument("--rules", metavar="TEXT", help="rules added to the system prompt")
    p.add_argument("--system-prompt-override", "--system-prompt", metavar="TEXT", help="see README")
    p.add_argument("--permission-mode", metavar="MODE", help=hide)
    p.add_argument("--acp", action="store_true", help="serve the Agent Client Protocol on stdio")

    class Accepted(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            namespace.ignored = namespace.ignored + self.const      # the flag, unless quiet
    for flag, n in XAI_FLAGS.items():
        p.add_argument(flag, nargs=0 if n == "q" else n, action=Accepted, dest="ignored",
                       const=[] if n == "q" else [flag], default=[], help=hide)
    args = p.parse_args(argv)
    args.headless = args.prompt is not None or bool(args.prompt_file or args.prompt_json)
    args.fmt = OUTPUT_FORMATS.get(args.output) or args.format
    if args.max_tool_rounds is not None and args.max_tool_rounds < 0:
        p.error("--max-tool-rounds must be 0 or more")
    if (args.format != "text" or args.output) and not args.headless:
        p.error("--format %s needs -p PROMPT (the chat has no JSON output)" % args.fmt)
    if args.message and (args.headless or args.acp):
        p.error("unrecognized arguments: %s (a prompt goes in -p)" % " ".join(args.message))
    return args


def xai_settings(args):
    """The settings of the xAI CLI flags grok honours; one notice names those it only accepts."""
    def names(text):
        return [XAI_TOOLS.get(n.strip(), n.strip()) for n in (text or "").split(",") if n.strip()]
    only = names(args.tools)
    without = names(args.disallowed_tools) + ["web_search"] * args.disable_web_search
    mode = args.permission_mode
    ignored = args.ignored + ["--permission-mode %s" % mode] * (mode not in MODES_HERE) + [
        "tool " + n for n in only + without if n not in TOOLS]
    if ignored:
        sys.stderr.write("grok: accepted, but not supported here: %s\n" % ", ".join(ignored))
    return dict(tools=[t for t in TOOLS if (args.tools is None or t in only) and t not in without],
                deny=args.deny, rules=args.rules, system_prompt=args.system_prompt_override,
                always_approve=args.always_approve or args.permission_mode == "bypassPermissions",
                max_iterations=args.max_tool_rounds if args.headless else None)


def on_signal(signum, frame):
    for other in (signal.SIGTERM, signal.SIGHUP):       # a second signal ends the clean-up at once
        signal.signal(other, lambda signum, frame: os._exit(128 + signum))
    raise Terminated(signum)


def guarded(prog, body, on_error=lambda message: None):
    """body(), each failure a message on stderr and an exit code (also to on_error(message))."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        if getattr(sys, name) is None:      # its fd was closed from the start (`grok -p hi >&-`)
            silence(fd)
            setattr(sys, name, open(fd, "w" if fd else "r", closefd=False))
        if fd:      # "?" for what it cannot encode: a lone surrogate, non-ASCII on an ASCII terminal
            with suppress(AttributeError, ValueError, OSError):
                getattr(sys, name).reconfigure(errors="replace")
    sys.stderr = QuietStderr(sys.stderr)
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, on_signal)
        return body()
    except BrokenPipeError:
        silence()
        return 0
    except (Exception, KeyboardInterrupt, Terminated) as e:
        message, code, stop = turn_end(e)
        if code == 4 and os.environ.get("GROK_DEBUG"):
            raise
        if stop != "cancelled":     # (a signal's end is quiet)
            sys.stderr.write("%s: %s\n" % (prog, visible(scrub(message))))
        elif isinstance(e, KeyboardInterrupt):
            sys.stderr.write("\n")      # after the ^C the terminal shows
    on_error(message)
    return code


def json_requested(argv):
    """The JSON output (json, streaming-json, result) argv asks for, or None: before flags parse."""
    fmt = None
    for i, arg in enumerate(argv[:argv.index("--")] if "--" in argv else argv):
        name, eq, value = arg.partition("=")
        value = value if eq else (argv[i + 1:] or [None])[0]
        if len(name) >= 3 and ("--format".startswith(name) or "--output-format".startswith(name)):
            fmt = OUTPUT_FORMATS.get(value) if name.startswith("--o") else value    # --form too
    return fmt if fmt in HeadlessUI.EVENTS else None


def server_models(client):
    """The ids of the models the server lists ({base}/models); an exception if it cannot."""
    ids = [m["id"] for m in client.get(client.prefix + "/models")["data"]]
    return [i for i in ids if i.isprintable() and " " not in i]


def list_models(argv):
    """`grok models [--json]`: the server's models ({base}/models), else the built-in table."""
    if set(argv) - {"--json"}:
        raise UserError("usage: grok models [--json]")
    cfg = Config(require_key=False)
    client = Client(cfg.base_url, cfg.api_key, min(cfg.timeout or 15, 15))     # (redirects refused)
    ids = list(WINDOWS)
    try:
        ids = server_models(client) or ids
    except Exception as e:          # unreachable, refused, not a model list: the built-in table
        why = (str(e) or type(e).__name__)[:200]       # a RetryableFault's str() is its problem
        note = "cannot list the models of %s (%s); the built-in list follows" % (cfg.base_url, why)
        sys.stderr.write(visible(scrub("grok: " + note)) + "\n")
    ids = ids if cfg.model in ids else [cfg.model] + ids
    rows = [{"id": i, "default": i == cfg.model} for i in ids]
    lines = ["* %s (default)" % i if i == cfg.model else "- " + i for i in ids]
    if "grok-build" not in ids:    # xAI's CLI's clients ask for it: the default
        rows.append({"id": "grok-build", "default": False, "aliasOf": cfg.model})
        lines.append("- grok-build (alias of %s)" % cfg.model)
    print(json.dumps({"models": rows}) if "--json" in argv else "\n".join(lines))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:       # as argparse would, without importing it
        print("grok " + __version__)
        return 0
    if argv[:1] == ["models"]:      # before the flags: the prompt words may be positional
        return guarded("grok", lambda: list_models(argv[1:]))
    json_errors = [json_requested(argv)]    # errors outside the run (bad flag, no key) too

    def on_error(message):
        if json_errors[0]:
            with suppress(GrokError):       # stdout is gone too (write() silenced it)
                HeadlessUI(json_errors[0]).emit("error", message=message)

    def body():
        args = parse_args(argv)
        json_errors[0] = args.headless and not args.acp and json_requested(["--format", args.fmt])
        cfg = Config(model=args.model, cwd=args.cwd, effort=args.effort, require_key=not args.acp,
                     sandbox=args.sandbox, net=args.sandbox_network, **xai_settings(args))
        if args.acp:        # a missing key is reported at session/new
            return acp_main(cfg, args.mcp_config)
        if args.headless:
            return headless(args, cfg)
        ui = TerminalUI()
        agent = open_agent(cfg, ui, MINIMAL, args, new_if_busy=True)
        try:
            return repl(agent, ui, first=" ".join(args.message))
        finally:
            if len(agent.messages) > 1 and sys.stdin.isatty():
                ui.write(ui.line("90", "session {0} (grok --resume {0})".format(agent.session.id)))
            agent.close()
    return guarded("grok", body, on_error)


if __name__ == "__main__":
    raise SystemExit(main())
