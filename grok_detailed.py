#!/usr/bin/env python3
"""grok-detailed: the debugging view of grok, and agent mode.

Standard library only, Python 3.8+. The engine is grok.py (installed as `grok`) in
the same directory as this file; it is loaded from there, nothing is duplicated.

    grok-detailed                 interactive chat with session/cost/context header,
                                  task, goal, progress, thinking, confidence
    grok-detailed --agent [GOAL]  plan -> execute -> review through markdown files
"""

import json
import os
import shutil
import sys
import threading
import time


def load_engine():
    """Load grok.py (or `grok`) from beside this file, after resolving symlinks."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.realpath(__file__))
    for name in ("grok.py", "grok"):
        path = os.path.join(here, name)
        if os.path.isfile(path):
            loader = importlib.machinery.SourceFileLoader("grok", path)
            spec = importlib.util.spec_from_loader("grok", loader)
            module = importlib.util.module_from_spec(spec)
            sys.modules["grok"] = module
            loader.exec_module(module)
            return module
    sys.stderr.write("grok-detailed: cannot find grok.py or grok next to %s\n" % here)
    raise SystemExit(1)


g = load_engine()
__version__ = g.__version__

# --------------------------------------------------------------------------
# The detailed contract (seed 000 "Detailed Mode Additional Fields")
# --------------------------------------------------------------------------

DETAILED = g.Contract(
    "grok_detailed_reply",
    extra_properties={
        "thinking": {"type": "string"},
        "task": {"type": "string"},
        "goal": {"type": "string"},
        "exit_conditions": {"type": "array", "items": {"type": "string"}},
        "progress": {"type": "object", "properties": {
            "completed": {"type": "array", "items": {"type": "string"}},
            "current": {"type": "string"},
            "remaining": {"type": "array", "items": {"type": "string"}}}},
        "blockers": {"type": ["string", "null"]},
        "confidence": {"type": "integer"},
    },
    extra_prompt=(
        "Also fill in, in every reply: thinking (brief strategic reasoning), task (current action, "
        "5 words max), goal (the high-level objective), exit_conditions (list), progress "
        "{completed: [], current: \"\", remaining: []}, blockers (string or null), confidence (0-100)."),
    max_tokens=8000)


# --------------------------------------------------------------------------
# Detailed display and REPL commands (issue 3)
# --------------------------------------------------------------------------

GLYPHS = {"rule": "─", "top": "╭", "side": "│", "bottom": "╰", "open": "┌", "close": "└", "then": "↳",
          "done": "✓", "now": "▸", "todo": "○", "fail": "✗", "more": "…", "dot": "·", "bullet": "•"}
ASCII_GLYPHS = {"rule": "-", "top": "+", "side": "|", "bottom": "+", "open": "+", "close": "+", "then": "->",
                "done": "+", "now": ">", "todo": "o", "fail": "x", "more": "...", "dot": "|", "bullet": "*"}
# C0/C1 control characters (terminal escapes from a model or a tool) are shown as "?"; tab and newline stay.
CONTROL = dict.fromkeys([c for c in range(32) if c not in (9, 10)] + list(range(127, 160)), "?")
NO_BLOCKERS = ("", "none", "null", "no", "n/a", "nothing")


def cells(text):
    """Terminal columns a string takes: wide East Asian characters count twice, combining marks not."""
    if text.isascii():
        return len(text)
    import unicodedata
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def clip(text, width, more="…"):
    if cells(text) <= width:
        return text
    out, used = [], cells(more)
    for ch in text:
        used += cells(ch)
        if used > width:
            break
        out.append(ch)
    return "".join(out) + more


def wrap(text, width):
    """Lines of at most `width` columns, broken at spaces; indentation is kept, long words are cut."""
    out = []
    for para in text.splitlines() or [""]:
        if cells(para) <= width:
            out.append(para)
            continue
        indent = para[:len(para) - len(para.lstrip(" "))]
        indent = indent if cells(indent) < width // 2 else ""
        line = indent
        for word in para.split():
            joined = line + (" " if line.strip() else "") + word
            if cells(joined) > width and line.strip():
                out.append(line)
                joined = indent + word
            while cells(joined) > width:
                used, cut = 0, 0
                for cut, ch in enumerate(joined):
                    used += cells(ch)
                    if used > width:
                        break
                out.append(joined[:cut])
                joined = indent + joined[cut:]
            line = joined
        out.append(line)
    return out


def as_text(value):
    """A reply field as one clean string, whatever type the model sent."""
    if value is None:
        return ""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    return value.translate(CONTROL).replace("\t", "    ").strip()


def as_list(value):
    if value is None or value == "":
        return []
    if not isinstance(value, list):
        value = [value]
    return [t for t in (as_text(v) for v in value) if t]


def confidence_of(reply):
    """0-100, or None; accepts 85, 85.0, "85%", and 0.85."""
    c = reply.get("confidence")
    if isinstance(c, str):
        try:
            c = float(c.strip().rstrip("%"))
        except ValueError:
            return None
    if isinstance(c, bool) or not isinstance(c, (int, float)) or c != c:
        return None
    if isinstance(c, float) and 0 < c < 1:
        c *= 100
    return int(round(max(0.0, min(100.0, c))))


def progress_of(reply):
    """(completed, current, remaining) from the reply's progress object."""
    p = reply.get("progress")
    if not isinstance(p, dict):
        return [], as_text(p) if isinstance(p, str) else "", []
    return as_list(p.get("completed")), as_text(p.get("current")), as_list(p.get("remaining"))


def band(confidence):
    """The colour of a confidence: green from 80, yellow from 50, red below."""
    return "32" if confidence >= 80 else "33" if confidence >= 50 else "31"


def num(n):
    try:
        return "{:,}".format(int(n or 0))
    except (TypeError, ValueError):
        return "?"


def dig(obj, *keys):
    """obj[k1][k2]... or None, whatever shape a server's usage object has."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def home_short(path):
    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home not in ("", "/") and (path + "/").startswith(home + "/") else path


class DetailedUI(g.TerminalUI):
    """The debugging view: every field of each reply, each tool call as a block, the answer
    in a box, and a status line (session, cost, context, tools, cache) before each prompt.

    For other front ends (agent mode): attach(agent), status_line(), banner(title, right),
    field(label, text), box(title, text, right), emit(text); all fit the terminal width."""

    LABEL = 10

    def __init__(self, out=None):
        g.TerminalUI.__init__(self, out)
        try:
            "".join(GLYPHS.values()).encode(getattr(self.out, "encoding", None) or "ascii")
            self.glyph = GLYPHS
        except (UnicodeEncodeError, LookupError):
            self.glyph = ASCII_GLYPHS
        self.lock = threading.RLock()       # tool_end arrives from worker threads
        self.agent = None
        self.goal = None
        self.iteration = 0
        self.last_reply = {}
        self.turn_started = time.time()
        self.opened = set()                 # tool calls whose block header is on screen
        # The live area (waiting line, answer text as it streams) is erased before anything else
        # is printed; it moves the cursor, so only on a colour terminal, and only what fits on it.
        self.live_on = self.color
        self.live_rows = self.live_col = 0
        self.live_active = self.live_full = False

    # -- layout --------------------------------------------------------------
    def paint(self, code, text):
        return g.TerminalUI.paint(self, code, text) if code else text

    def attach(self, agent):
        self.agent = agent

    def width(self):
        return max(80, shutil.get_terminal_size((80, 24)).columns)

    def emit(self, text):
        """Write whole lines, after erasing the live area."""
        with self.lock:
            self.live_clear()
            self.write(text)

    def painted(self, parts, sep=None):
        """(plain width, painted text) of [(text, colour code or None)] joined by sep."""
        sep = sep if sep is not None else " %s " % self.glyph["dot"]
        plain = sep.join(t for t, _ in parts)
        text = self.paint("2", sep).join(self.paint(c, t) if c else t for t, c in parts)
        return cells(plain), text

    def rule(self, title, right=(), corner=None, code="36"):
        """'── title ─────── right ──' across the width; title is (text, colour), right a list of them."""
        r = self.glyph["rule"]
        head = (corner or r) + r + " "
        rw, rtext = self.painted(list(right)) if right else (0, "")
        tail = 2 + (rw + 2 if right else 0)
        text, tcode = title
        text = clip(text, self.width() - cells(head) - tail - 3, self.glyph["more"])
        fill = self.width() - cells(head) - cells(text) - 1 - tail
        line = self.paint(code, head) + self.paint(tcode, text) + " " + self.paint(code, r * fill)
        if right:
            line += " " + rtext + " "
        return line + self.paint(code, r * 2) + "\n"

    def banner(self, title, right="", code="36"):
        """A section banner (agent mode: planner, executor, reviewer, ...)."""
        self.emit(self.rule((title, "1"), [(right, "2")] if right else (), code=code))

    def field_lines(self, label, text, code=None):
        lines = wrap(text, self.width() - self.LABEL - 3)
        pad = " " * (self.LABEL + 3)
        out = "  " + self.paint("2", label.ljust(self.LABEL)) + " " + self.paint(code, lines[0]) + "\n"
        return out + "".join(pad + self.paint(code, line) + "\n" for line in lines[1:])

    def field(self, label, text, code=None):
        self.emit(self.field_lines(label, as_text(text), code))

    def box(self, title, text, right=(), code="32"):
        """An open-right box: ╭─ title ── right ─ / │ text / ╰────."""
        side = self.paint(code, self.glyph["side"])
        out = [self.rule((title, "1;" + code), right, corner=self.glyph["top"], code=code)]
        for line in wrap(as_text(text) or "(no response)", self.width() - 2):
            out.append(side + (" " + line if line else "") + "\n")
        out.append(self.paint(code, self.glyph["bottom"] + self.glyph["rule"] * (self.width() - 1)) + "\n")
        self.emit("".join(out))

    def status_line(self):
        """session · cost / limit · context % of the window · tool calls · cached tokens · cwd."""
        a = self.agent
        if a is None:
            return
        limit, spent = a.cfg.cost_limit, a.cost_usd
        cost = "$%.4f/%s" % (spent, "$%.2f" % limit if limit > 0 else "no limit")
        pct = a.context_pct()
        cached = dig(a.last_usage, "prompt_tokens_details", "cached_tokens")
        cost_code = "31" if 0 < limit <= spent else "33" if 0 < limit * 0.8 <= spent else None
        ctx_code = "33" if 0 < a.cfg.compact_threshold * 0.8 <= pct else None
        detail = " (%s/%s)" % (num(a.context_tokens), num(a.cfg.context_window))
        for more_ctx, cwd in ((True, True), (False, True), (True, False), (False, False)):
            parts = [(a.session.id, "1"), (cost, cost_code),
                     ("context %.1f%%" % pct + (detail if more_ctx else ""), ctx_code),
                     ("tools %d" % a.tool_count, None), ("cached %s" % num(cached), None)]
            if cwd:
                parts.append((home_short(a.cwd), "2"))
            if self.painted(parts)[0] <= self.width():
                break
        self.emit(self.painted(parts)[1] + "\n")

    # -- the live area -------------------------------------------------------
    def live(self, text):
        if not self.live_on:
            return
        with self.lock:
            size = shutil.get_terminal_size((80, 24))
            cols, limit = max(1, size.columns), max(2, size.lines - 3)
            out = []
            for ch in text.translate(CONTROL).replace("\t", " "):
                if self.live_full:
                    break
                w = 0 if ch == "\n" else cells(ch)
                if ch == "\n" or self.live_col + w > cols:
                    if self.live_rows + 1 >= limit:
                        self.live_full = True       # the rest would scroll away: it is not erasable
                        break
                    self.live_rows, self.live_col = self.live_rows + 1, 0
                self.live_col += w
                out.append(ch)
            if out:
                self.live_active = True
                self.write(self.paint("2", "".join(out)))

    def live_clear(self):
        with self.lock:
            if self.live_active:
                self.write("\r" + ("\033[%dA" % self.live_rows if self.live_rows else "") + "\033[J")
            self.live_active = self.live_full = False
            self.live_rows = self.live_col = 0

    # -- the engine's hooks --------------------------------------------------
    def turn_start(self):
        """Before a user turn: numbering restarts (answer() does that too), the goal is
        forgotten if the conversation is new or cleared."""
        self.iteration = 0
        if self.agent is not None and len(self.agent.messages) <= 1:
            self.goal = None

    def step_start(self, step):
        if self.iteration == 0:
            self.turn_started = time.time()
        self.iteration += 1
        self.live("%s step %d: waiting for the model\n" % (self.glyph["more"], self.iteration))

    def stream_text(self, text, final_hint):
        self.live(text)

    def stream_reset(self):
        self.live_clear()

    def reply(self, reply, step):
        self.last_reply = reply
        done, current, remaining = progress_of(reply)
        total = len(done) + bool(current) + len(remaining)
        title = "[%d] %s" % (self.iteration, as_text(reply.get("task")) or "(no task)")
        if total:
            title += " %s %d/%d" % (self.glyph["dot"], len(done), total)
        right = []
        conf = confidence_of(reply)
        if conf is not None and reply["tool_calls"]:
            right.append(("confidence %d%%" % conf, band(conf)))
        right.append((time.strftime("%H:%M:%S"), "2"))
        out = [self.rule((title, "1"), right)]
        goal = as_text(reply.get("goal"))
        if goal and goal != self.goal:
            self.goal = goal
            out.append(self.field_lines("goal", goal, "1"))
        exits = as_list(reply.get("exit_conditions"))
        if exits:
            out.append(self.field_lines("exit", "  ".join("%s %s" % (self.glyph["bullet"], e) for e in exits)))
        if total:
            items = (["%s %s" % (self.glyph["done"], t) for t in done]
                     + (["%s %s" % (self.glyph["now"], current)] if current else [])
                     + ["%s %s" % (self.glyph["todo"], t) for t in remaining])
            out.append(self.field_lines("progress", "  ".join(items)))
        thinking = as_text(reply.get("thinking"))
        if thinking:
            out.append(self.field_lines("thinking", thinking, "2;3"))
        blockers = as_list(reply.get("blockers"))
        if blockers and blockers[0].lower() not in NO_BLOCKERS:
            out.append(self.field_lines("blockers", "; ".join(blockers), "31"))
        if reply["tool_calls"] and as_text(reply.get("response")):
            out.append(self.field_lines("says", as_text(reply["response"])))
        self.emit("".join(out))

    def tool_line(self, call):
        detail = as_text(call.shown)
        if call.name == "write_file":
            detail += " (%d bytes)" % len(str(call.args.get("content", "")).encode("utf-8"))
        name = "[%d] %s " % (call.index + 1, call.name)
        return self.paint("36", name) + clip(detail, self.width() - cells(name) - 5, self.glyph["more"])

    def tool_start(self, call):
        with self.lock:
            self.opened.add(call.id)
            self.emit("  %s %s\n" % (self.glyph["open"], self.tool_line(call)))

    def tool_end(self, call, result):
        with self.lock:
            out = []
            if call.id not in self.opened:       # denied before it started
                out.append("  %s %s\n" % (self.glyph["open"], self.tool_line(call)))
            self.opened.discard(call.id)
            lines = as_text(result.output).splitlines()
            side = "  %s " % self.glyph["side"]
            for line in lines[:3]:
                out.append(side + self.paint("2", clip(line, self.width() - 5, self.glyph["more"])) + "\n")
            if len(lines) > 3:
                out.append(side + self.paint("2", "%s %d more lines" % (self.glyph["more"], len(lines) - 3)) + "\n")
            took = max(0.0, result.finished - result.started)
            mark = self.paint("32", self.glyph["done"]) if result.ok else self.paint("31", self.glyph["fail"])
            out.append("  %s %s %s %s\n" % (self.glyph["close"], self.paint("36", "[%d] %s" % (call.index + 1, call.name)),
                                           mark, "%.2fs" % took if took < 10 else "%.1fs" % took))
            self.emit("".join(out))

    def step_finish(self, step, info):
        usage = info.get("usage")
        cached = dig(usage, "prompt_tokens_details", "cached_tokens")
        reasoning = dig(usage, "completion_tokens_details", "reasoning_tokens")
        parts = ["in %s" % num(dig(usage, "prompt_tokens")) + (" (%s cached)" % num(cached) if cached else ""),
                 "out %s" % num(dig(usage, "completion_tokens"))]
        if reasoning:
            parts.append("reasoning %s" % num(reasoning))
        parts += ["$%.4f" % info.get("cost", 0.0), "%.1fs" % info.get("duration", 0.0)]
        if info.get("finish_reason") not in (None, "stop"):
            parts.append("finish %s" % info["finish_reason"])
        self.emit("  " + self.paint("2", "%s %s" % (self.glyph["then"], (" %s " % self.glyph["dot"]).join(parts))) + "\n")

    def answer(self, text):
        right = [(time.strftime("%H:%M:%S"), "2"), ("%.1fs" % (time.time() - self.turn_started), "2")]
        conf = confidence_of(self.last_reply)
        if conf is not None:
            right.append(("confidence %d%%" % conf, band(conf)))
        self.box("answer", text, right)
        self.last_reply = {}
        self.iteration = 0

    def notice(self, text):
        with self.lock:
            self.live_clear()
            sys.stderr.write(self.paint("33", text) + "\n")
            sys.stderr.flush()

    def approve(self, call):
        self.live_clear()
        return g.TerminalUI.approve(self, call)

    def ask_user(self, question, options):
        self.live_clear()
        return g.TerminalUI.ask_user(self, question, options)

    def resumed(self, agent):
        """What a resumed session holds: size, cost, working dir, the last answer."""
        last = ""
        for m in reversed(agent.messages[1:]):
            if m.get("role") == "assistant":
                try:
                    last = as_text(g.extract_json_object(str(m.get("content"))).get("response"))
                except g.ContractError:
                    last = as_text(m.get("content"))
                break
        self.emit("resumed session %s: %d messages, $%.4f spent, working dir %s\n"
                  % (agent.session.id, len(agent.messages) - 1, agent.cost_usd, agent.cwd))
        if last:
            self.emit(self.paint("2", clip("last answer: " + " ".join(last.split()), self.width(), self.glyph["more"])) + "\n")


class AgentHandle:
    """What repl() holds: it forwards to the agent in use, so /resume can swap in another
    one, and it marks where each turn starts for the display."""

    def __init__(self, agent, ui):
        object.__setattr__(self, "_agent", agent)
        object.__setattr__(self, "_ui", ui)

    def __getattr__(self, name):
        return getattr(self._agent, name)

    def __setattr__(self, name, value):
        setattr(self._agent, name, value)

    def swap(self, agent):
        old = self._agent
        object.__setattr__(self, "_agent", agent)
        old.close()

    def run_turn(self, text):
        self._ui.turn_start()
        try:
            return self._agent.run_turn(text)
        finally:
            if not sys.stdin.isatty():      # no prompt, so no status line before it: show it after the turn
                self._ui.status_line()


HELP = """commands:
  /clear        start a new conversation (same session file)
  /cd DIR       change the working directory; the model is told
  /sessions     list saved sessions: id, date, cost, first message
  /resume ID    continue a saved session (an unambiguous id prefix is enough)
  /compact      summarise older history now (automatic at COMPACT_THRESHOLD % of the window)
  /cost [N]     show the cost, or set the session's limit to N USD (0 = no limit)
  /tools        list the tools
  /help         this help
  /exit         quit (also Ctrl-D)
Ctrl-C cancels the running turn or tool; the conversation is kept."""


class Commands:
    """The REPL commands of grok-detailed, on the AgentHandle."""

    def __init__(self, agent, ui):
        self.agent, self.ui = agent, ui

    def table(self):
        return {name: self.guarded(getattr(self, name[1:])) for name in
                ("/cd", "/sessions", "/resume", "/compact", "/cost", "/tools")}

    @staticmethod
    def guarded(command):
        def run(arg):
            try:
                command(arg)
            except KeyboardInterrupt:
                raise g.Cancelled("cancelled")
        return run

    def cd(self, arg):
        a = self.agent
        if not arg:
            return self.ui.emit("working directory: %s\n" % a.cwd)
        path = os.path.abspath(os.path.join(a.cwd, os.path.expanduser(arg)))
        if not os.path.isdir(path):
            raise g.UserError("/cd: no such directory: %s" % path)
        a.set_cwd(path)
        # The system prompt stays as it is (the provider caches it); the model learns from a note.
        note = ("[/cd] The user changed the working directory to %s. Tools run there now and relative "
                "paths resolve against it." % path)
        for rules_path, text in g.find_project_rules(path):
            marker = "PROJECT RULES from %s:" % rules_path
            if not any(marker in str(m.get("content")) for m in a.messages):
                note += "\n\n%s\n%s" % (marker, text)
        a.add({"role": "user", "content": note})
        self.ui.emit("working directory: %s (the model is told)\n" % path)

    def sessions(self, arg):
        here = self.agent.session.id
        # A session nobody typed into (each start opens one) is not worth resuming.
        found = [s for s in g.list_sessions(self.agent.cfg.data_dir) if s[2] or s[0] == here]
        if not found:
            return self.ui.emit("no saved sessions in %s\n" % os.path.join(self.agent.cfg.data_dir, "sessions"))
        for sid, mtime, first, cost in found[:30]:
            mark = "*" if sid == here else " "
            line = "%s %s  %s  $%.4f  %s" % (mark, sid, time.strftime("%Y-%m-%d %H:%M", time.localtime(mtime)),
                                             cost, as_text(first) or "(empty)")
            self.ui.emit(clip(line, self.ui.width(), self.ui.glyph["more"]) + "\n")
        if len(found) > 30:
            self.ui.emit("  (%d older sessions not shown)\n" % (len(found) - 30))

    def find_session(self, arg):
        if not arg:
            raise g.UserError("usage: /resume ID (see /sessions)")
        ids = [s[0] for s in g.list_sessions(self.agent.cfg.data_dir)]
        matches = [i for i in ids if i == arg] or [i for i in ids if i.startswith(arg)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise g.UserError("no session %r (see /sessions)" % arg)
        raise g.UserError("%r matches %d sessions; give more of the id" % (arg, len(matches)))

    def resume(self, arg):
        sid = self.find_session(arg)
        if sid == self.agent.session.id:
            return self.ui.emit("already in session %s\n" % sid)
        cfg = self.agent.cfg
        fresh = g.Agent(cfg, self.ui, DETAILED, session=g.Session(cfg.data_dir, sid, warn=self.ui.notice),
                        resume=True)
        self.agent.swap(fresh)
        self.ui.goal = None
        self.ui.resumed(fresh)

    def compact(self, arg):
        a = self.agent
        count, tokens = len(a.messages), g.estimate_tokens(a.messages)
        if not a.compact(keep=2):       # asked for: keep only the last exchange verbatim
            return self.ui.emit("nothing to compact: the history is already short\n")
        self.ui.emit("compacted: %d -> %d messages, about %s -> %s tokens\n"
                     % (count, len(a.messages), num(tokens), num(g.estimate_tokens(a.messages))))

    def cost(self, arg):
        cfg = self.agent.cfg
        if arg:
            try:
                limit = float(arg.lstrip("$"))
            except ValueError:
                limit = -1
            if not limit >= 0:
                raise g.UserError("usage: /cost N (a limit in USD; 0 = no limit)")
            cfg.cost_limit = limit
        self.ui.emit("cost: $%.4f spent, limit %s\n" % (
            self.agent.cost_usd, "$%.2f" % cfg.cost_limit if cfg.cost_limit > 0 else "none"))

    def tools(self, arg):
        docs = {}
        for line in g.TOOL_DOCS.replace("%d", str(int(self.agent.cfg.bash_timeout))).splitlines():
            name, _, doc = line.lstrip("- ").partition(" ")
            docs[name] = doc
        for name in self.agent.tool_names:
            ask = name in g.NEEDS_APPROVAL and not self.agent.cfg.always_approve
            self.ui.field(name, docs.get(name, "(no description)") + (" [asks first]" if ask else ""))


def interactive(args, cfg):
    ui = DetailedUI()
    agent = AgentHandle(g.open_agent(cfg, ui, DETAILED, args), ui)
    ui.attach(agent)
    if args.resume or args.cont:
        ui.resumed(agent)
    try:
        return g.repl(agent, ui, commands=Commands(agent, ui).table(), help_text=HELP,
                      before_prompt=ui.status_line)
    finally:
        agent.close()


# --------------------------------------------------------------------------
# Agent mode: plan -> execute -> review through markdown files (seed 001, issue 9)
# --------------------------------------------------------------------------

def run_agent_mode(args, cfg):
    raise g.UserError("--agent is not available yet")


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv

    def body():
        p = g.ArgParser.build(prog="grok-detailed",
                              description="grok's debugging view: every field of the JSON contract, "
                                          "session, cost and context; and agent mode.")
        p.add_argument("--agent", nargs="?", const="", metavar="GOAL",
                       help="agent mode: plan, execute and review GOAL through markdown files "
                            "in $GROK_AGENT_DIR (default ~/.grok_agent)")
        p.add_argument("--max-loops", type=int, default=5, metavar="N", help="agent mode: at most N loops (default 5)")
        args = p.parse_args(argv)
        cfg = g.Config(model=args.model, cwd=args.cwd, always_approve=args.always_approve)
        if args.agent is not None:
            return run_agent_mode(args, cfg)
        return interactive(args, cfg)

    return g.guarded("grok-detailed", body)


if __name__ == "__main__":
    raise SystemExit(main())
