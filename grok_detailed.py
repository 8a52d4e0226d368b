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

# --- The detailed contract: the reply fields the debugging view shows ---

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
        "5 words max), goal and exit_conditions (set both in your first reply, then keep them), "
        "progress over the exit conditions {completed: [], current: \"\", remaining: []}, "
        "blockers (string or null), confidence (95+ = verified with a tool, 80-94 = high "
        "certainty, below 80 = uncertain: use a tool first). done true only when every exit "
        "condition is met."),
    max_tokens=8000)


# --- The detailed display and its REPL commands ---

GLYPH_NAMES = ("rule", "top", "side", "bottom", "open", "close", "then",
               "done", "now", "todo", "fail", "more", "dot", "bullet")
GLYPHS = dict(zip(GLYPH_NAMES, "─ ╭ │ ╰ ┌ └ ↳ ✓ ▸ ○ ✗ … · •".split()))
ASCII_GLYPHS = dict(zip(GLYPH_NAMES, "- + | + + + -> + > o x ... | *".split()))
NO_BLOCKERS = ("", "none", "null", "no", "n/a", "nothing")


def cells(text):
    """Terminal columns of a string: wide East Asian characters take two, combining marks none."""
    if text.isascii():
        return len(text)
    import unicodedata
    combining, width = unicodedata.combining, unicodedata.east_asian_width
    return sum(0 if combining(c) else 2 if width(c) in "WF" else 1 for c in text)


def fit(text, width):
    """How many characters of text fit in width columns."""
    used = 0
    for i, ch in enumerate(text):
        used += cells(ch)
        if used > width:
            return i
    return len(text)


def wrap(text, width):
    """Lines of at most `width` columns broken at spaces; indentation is kept, long words cut."""
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
                cut = fit(joined, width)
                out.append(joined[:cut])
                joined = indent + joined[cut:]
            line = joined
        out.append(line)
    return out


def as_text(value):
    """A reply field as one clean string, whatever type the model sent; escapes made visible."""
    if value is None:
        return ""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    return g.visible(value).replace("\t", "    ").strip()


def as_list(value):
    return [t for t in map(as_text, value if isinstance(value, list) else [value]) if t]


def confidence_part(reply):
    """[(confidence N%, green from 80 / yellow from 50 / red)] or []; takes 85, "85%", 0.85."""
    c = reply.get("confidence")
    if isinstance(c, str):
        try:
            c = float(c.strip().rstrip("%"))
        except ValueError:
            return []
    if isinstance(c, bool) or not isinstance(c, (int, float)) or c != c:
        return []
    if isinstance(c, float) and 0 < c < 1:
        c *= 100
    c = int(round(max(0.0, min(100.0, c))))
    return [("confidence %d%%" % c, "32" if c >= 80 else "33" if c >= 50 else "31")]


def progress_of(reply):
    """(completed, current, remaining) from the reply's progress object."""
    p = reply.get("progress")
    if not isinstance(p, dict):
        return [], as_text(p) if isinstance(p, str) else "", []
    return as_list(p.get("completed")), as_text(p.get("current")), as_list(p.get("remaining"))


def num(n):
    try:
        return "{:,}".format(int(n or 0))
    except (TypeError, ValueError):
        return "?"


def home_short(path):
    home = os.path.expanduser("~")
    if home in ("", "/") or not (path + "/").startswith(home + "/"):
        return path
    return "~" + path[len(home):]


class DetailedUI(g.TerminalUI):
    """The debugging view: every field of each reply, each tool call as a block, the answer in a
    box, a status line before each prompt; all fit the terminal width (40 columns or more)."""

    LABEL = 10

    def __init__(self):
        g.TerminalUI.__init__(self)
        encoding = getattr(self.out, "encoding", None) or "ascii"
        try:
            "".join(GLYPHS.values()).encode(encoding)
            self.glyph = GLYPHS
        except (UnicodeEncodeError, LookupError):
            self.glyph = ASCII_GLYPHS
        self.agent = self.goal = None       # the goal: the last one shown
        self.iteration, self.last_reply = 0, {}
        self.reasoning = ""                 # the model's reasoning_content for this reply
        self.turn_started = time.time()
        self.last_open = None               # the tool call whose opening line was written last
        # The live area (waiting line, answer text as it streams) is erased before anything else
        # is printed; it moves the cursor, so only on a colour terminal, and only what fits on it.
        self.live_on = self.color
        self.live_rows = self.live_col = 0
        self.live_active = self.live_full = False

    # -- layout --------------------------------------------------------------
    def paint(self, code, text):
        return g.TerminalUI.paint(self, code, text) if code else text

    def clipped(self, text, width):
        """The text, or as much of it as fits in width columns and then "…"."""
        more = self.glyph["more"]
        return text if cells(text) <= width else text[:fit(text, width - cells(more))] + more

    def write(self, text):
        """Write whole lines, after erasing the live area."""
        with self.lock:
            self.wait_stop()
            self.live_clear()
            self.last_open = None
            self.raw(text)

    def painted(self, parts):
        """(plain width, painted text) of [(text, colour code or None)] joined by dots."""
        sep = " %s " % self.glyph["dot"]
        plain = sep.join(t for t, _ in parts)
        return cells(plain), self.paint("2", sep).join(self.paint(c, t) for t, c in parts)

    def rule(self, title, right=(), corner=None, code="36"):
        """'── title ──── right ──' across the width; title and right parts: (text, colour)."""
        r, width = self.glyph["rule"], self.width()
        head = (corner or r) + r + " "
        if width < 60:
            right = [p for p in right if p[1] != "2"]       # narrow: no clock times
        rw, rtext = self.painted(list(right)) if right else (0, "")
        tail = 2 + (rw + 2 if right else 0)
        text, tcode = title
        text = self.clipped(text, width - cells(head) - tail - 3)
        fill = width - cells(head) - cells(text) - 1 - tail
        line = self.paint(code, head) + self.paint(tcode, text) + " " + self.paint(code, r * fill)
        if right:
            line += " " + rtext + " "
        return line + self.paint(code, r * 2) + "\n"

    def field_lines(self, label, text, code=None):
        lines = wrap(text, self.width() - self.LABEL - 3)
        first = "  %s %s\n" % (self.paint("2", label.ljust(self.LABEL)), self.paint(code, lines[0]))
        pad = " " * (self.LABEL + 3)
        return first + "".join(pad + self.paint(code, line) + "\n" for line in lines[1:])

    def box(self, title, text, right=(), code="32"):
        """An open-right box: ╭─ title ── right ─ / │ text / ╰────."""
        side = self.paint(code, self.glyph["side"])
        out = [self.rule((title, "1;" + code), right, corner=self.glyph["top"], code=code)]
        for line in wrap(as_text(text) or "(no response)", self.width() - 2):
            out.append(side + (" " + line if line else "") + "\n")
        bottom = self.glyph["bottom"] + self.glyph["rule"] * (self.width() - 1)
        self.write("".join(out) + self.paint(code, bottom) + "\n")

    def status_forms(self, a):
        """The forms of the status line, widest first: (the width it needs, [(text, colour)])."""
        limit, spent, pct = a.ledger.limit, a.ledger.cost_usd, a.context_pct()
        sid, short = (a.session.id, "1"), (a.session.id.rsplit("-", 1)[-1], "1")
        known = a.link.window_known      # else a default window: a percentage would mislead
        used = num(a.context_tokens)
        warn = "31" if 0 < limit <= spent else "33" if 0 < limit * 0.8 <= spent else None
        cost = ("$%.4f/%s" % (spent, "$%.2f" % limit if limit > 0 else "no limit"), warn)
        full = "33" if 0 < a.cfg.compact_threshold * 0.8 <= pct else None
        ctx = ("context %.1f%%" % pct if known else "window unknown", full)
        detail = ("%s tokens, window unknown: set GROK_CONTEXT_WINDOW" % used, full)
        if known:
            detail = (ctx[0] + " (%s/%s)" % (used, num(a.link.window)), full)
        tiny = [("$%.4f" % spent, warn), ("ctx %.0f%%" % pct if known else "ctx ?", full)]
        model, tools = (a.link.model, None), ("tools %d" % a.runner.tool_count, None)
        cached = ("cached %s" % num(g.usage_numbers(a.last_usage)["cached"]), None)
        return ((110, [sid, model, cost, detail, tools, cached]),
                (96, [sid, model, cost, ctx, tools, cached]),
                (80, [short, model, cost, ctx, tools, cached]),
                (60, [short, model] + tiny + [tools, cached]),
                (0, [short] + tiny + [tools]))

    def status_line(self):
        """session · model · cost / limit · context % · tool calls · cached tokens · cwd. The width
        alone picks the form (unless the numbers grow past it); the cwd gets what is left."""
        a, width = self.agent, self.width()
        if a is None:
            return
        for least, parts in self.status_forms(a):
            if least <= width and self.painted(parts)[0] <= width:
                break
        sandbox = a.cfg.sandbox and "sandbox: " + a.cfg.sandbox.label
        if sandbox and self.painted(parts + [(sandbox, "")])[0] <= width:
            parts.append((sandbox, "33"))       # what bash commands run under: shown while it fits
        room = width - self.painted(parts)[0] - 3
        if room >= 8:
            cwd = as_text(home_short(a.cwd))
            parts.append((self.clipped(cwd[::-1], room)[::-1], "2"))
        self.write(self.painted(parts)[1] + "\n")

    # -- the live area -------------------------------------------------------
    def live(self, text):
        if not self.live_on or self.live_full:
            return
        with self.lock:
            size = shutil.get_terminal_size((80, 24))
            cols, limit = max(1, size.columns), max(2, size.lines - 3)
            out = []
            for ch in g.visible(text).replace("\t", " "):
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
                self.raw(self.paint("2", "".join(out)))

    def live_clear(self):
        with self.lock:
            if self.live_active:
                self.raw("\r" + ("\033[%dA" % self.live_rows if self.live_rows else "") + "\033[J")
            self.live_active = self.live_full = False
            self.live_rows = self.live_col = 0

    def show_wait(self, text):
        self.live_clear()
        if text:
            self.live(text + "\n")

    def pause(self):
        self.wait_stop()
        self.live_clear()

    # -- the engine's hooks --------------------------------------------------
    def between_turns(self):
        """Before the prompt: the status line; a new or cleared conversation forgets the goal."""
        self.iteration = 0
        if self.agent is not None and len(self.agent.messages) <= 1:
            self.goal = None
        self.status_line()

    def step_start(self, step):
        if self.iteration == 0:
            self.turn_started = time.time()
        self.iteration += 1
        self.reasoning = ""
        n, more = self.iteration, self.glyph["more"]
        self.waiting(lambda seconds: "%s step %d: waiting for the model%s"
                     % (more, n, " · %ds" % seconds * bool(seconds)))

    def stream_text(self, text, final_hint):
        self.wait_stop()
        self.live(text)

    def stream_reset(self):
        self.reasoning = ""
        self.live_clear()

    def thought(self, text):
        self.reasoning += text
        self.stream_text(text, None)

    def marked(self, glyph, items):
        return ["%s %s" % (self.glyph[glyph], t) for t in items if t]

    def reply(self, reply, step):
        """A rule (step, task, progress count, confidence, clock), then each field with text."""
        self.last_reply = reply
        done, current, remaining = progress_of(reply)
        progress = self.marked("done", done) + self.marked("now", [current])
        progress += self.marked("todo", remaining)
        title = "[%d] %s" % (self.iteration, as_text(reply.get("task")) or "(no task)")
        if progress:
            title += " %s %d/%d" % (self.glyph["dot"], len(done), len(progress))
        right = confidence_part(reply) if reply["tool_calls"] else []
        out = [self.rule((title, "1"), right + [(time.strftime("%H:%M:%S"), "2")])]
        goal = as_text(reply.get("goal"))
        if goal and goal != self.goal:
            self.goal = goal
            out.append(self.field_lines("goal", goal, "1"))
        fields = self.fields(reply, progress)
        out += [self.field_lines(label, text, code) for label, text, code in fields if text]
        self.write("".join(out))

    def fields(self, reply, progress):
        """(label, text, colour) of the reply's fields under its rule, in order; "" says nothing."""
        blockers = as_list(reply.get("blockers"))
        if blockers and blockers[0].lower() in NO_BLOCKERS:
            blockers = []                       # "none", "n/a": nothing blocks
        thinking = (as_text(self.reasoning), as_text(reply.get("thinking")))
        exits = self.marked("bullet", as_list(reply.get("exit_conditions")))
        return (("exit", "  ".join(exits), None),
                ("progress", "  ".join(progress), None),
                ("thinking", " ".join(t for t in thinking if t), "2;3"),
                ("blockers", "; ".join(blockers), "31"),
                ("says", as_text(reply.get("response")) if reply["tool_calls"] else "", None))

    def invalid(self, content):
        """A reply that broke the contract: what the model said (capped), before the why."""
        text = as_text(content) or "(nothing)"
        more = " %s [%d characters]" % (self.glyph["more"], len(text)) if len(text) > 600 else ""
        self.write(self.field_lines("invalid", text[:600] + more, "31"))

    def tool_line(self, call):
        """The opening line of a tool call's block."""
        detail = as_text(call.shown)
        if call.name == "write_file":
            detail += " (%d bytes)" % len(str(call.args.get("content", "")).encode("utf-8"))
        name = "[%d] %s " % (call.index + 1, call.name)
        detail = self.clipped(detail, self.width() - cells(name) - 5)
        return "  %s %s%s\n" % (self.glyph["open"], self.paint("36", name), detail)

    def tool_start(self, call):
        with self.lock:
            skill = self.paint("35", "Skill:")
            for name in self.skills_read(call):
                self.write("  %s %s\n" % (skill, self.paint("1", as_text(name))))
            self.write(self.tool_line(call))
            self.last_open = call.id

    def skills_read(self, call):
        """The names of the skills whose instructions the call reads."""
        a = self.agent
        if not a or call.name != "read_file":
            return []
        path = g.canonical(a.cwd, call.args.get("path"))
        return [name for name, _, skill in a.skills_seen[1] if os.path.realpath(skill) == path]

    def tool_end(self, call, result):
        """The first lines of the output, then └ [n] name ✓/✗ and the time the call took."""
        with self.lock:
            # denied, or other lines came after its opening line: open it again
            out = [self.tool_line(call)] if call.id != self.last_open else []
            lines = as_text(result.output).splitlines()
            shown = [self.clipped(line, self.width() - 5) for line in lines[:3]]
            if len(lines) > 3:
                shown.append("%s %d more lines" % (self.glyph["more"], len(lines) - 3))
            out += ["  %s %s\n" % (self.glyph["side"], self.paint("2", line)) for line in shown]
            took = max(0.0, result.finished - result.started)
            took = "%.2fs" % took if took < 10 else "%.1fs" % took
            code, mark = ("32", "done") if result.ok else ("31", "fail")
            name = "[%d] %s" % (call.index + 1, call.name)
            out.append("  %s %s %s %s\n" % (self.glyph["close"], self.paint("36", name),
                                            self.paint(code, self.glyph[mark]), took))
            self.write("".join(out))

    def step_finish(self, step, info):
        """Under the step, dim: tokens in and out, reasoning, cost, time, an unusual finish."""
        n, a = info["tokens"], self.agent
        guess = "~" if a and not n["total"] and not n["input"] else ""    # no usage: estimated here
        if guess:
            n = dict(n, input=a.context_tokens, output=g.estimate_tokens(a.messages[-1:]))
        cached = " (%s cached)" % num(n["cached"]) if n["cached"] else ""
        parts = ["in %s%s%s" % (guess, num(n["input"]), cached), "out " + guess + num(n["output"])]
        parts += ["estimated: the server reports no usage"] if guess else []
        if n["reasoning"]:
            parts.append("reasoning %s" % num(n["reasoning"]))
        parts += ["$%.4f" % info.get("cost", 0.0), "%.1fs" % info.get("duration", 0.0)]
        if info.get("finish_reason") not in (None, "stop"):
            parts.append("finish %s" % info["finish_reason"])
        text = "%s %s" % (self.glyph["then"], (" %s " % self.glyph["dot"]).join(parts))
        lines = wrap(text, self.width() - 4)
        self.write("".join("  " + self.paint("2", line) + "\n" for line in lines))

    def answer(self, text):
        took = "%.1fs" % (time.time() - self.turn_started)
        right = [(time.strftime("%H:%M:%S"), "2"), (took, "2")] + confidence_part(self.last_reply)
        self.box("answer", text, right)
        self.last_reply = {}
        self.iteration = 0

    def resumed(self, agent):
        """What a resumed session holds: size, cost, working dir, the last answer."""
        self.write("resumed session %s: %d messages, $%.4f spent, working dir %s\n" % (
            agent.session.id, len(agent.messages) - 1, agent.ledger.cost_usd, as_text(agent.cwd)))
        said = [m.get("content") for m in agent.messages[1:] if m.get("role") == "assistant"]
        try:
            last = g.extract_json_object(str(said[-1])).get("response") if said else ""
        except (g.ContractError, AttributeError):       # not a reply object: shown as it is
            last = said[-1]
        last = " ".join(as_text(last).split())
        if last:
            self.write(self.paint("2", self.clipped("last answer: " + last, self.width())) + "\n")


HELP = """commands:
  /clear        start a new conversation (same session file)
  /cd DIR       change the working directory; the model is told
  /sessions     list saved sessions: id, date, cost, first message
  /resume ID    continue a saved session (the start of its id, or its last part, is enough)
  /compact      summarise older history now (automatic at COMPACT_THRESHOLD % of the window)
  /cost [N]     show the cost, or set the session's limit to N USD (0 = no limit)
  /model [NAME] show the model, or use NAME from the next request on
  /tools        list the tools
  /mcp          the MCP servers: state, tools
  /help         this help (also /?)
  /exit         quit (also /q, Ctrl-D)
End a line with \\ to go on on the next one; lines pasted together are one message.
Esc or Ctrl-C cancels the running turn or tool; the conversation is kept."""


class Commands:
    """The REPL commands of grok-detailed."""

    def __init__(self, agent, ui):
        self.agent, self.ui = agent, ui

    def table(self):
        names = ("/cd", "/resume", "/compact", "/cost", "/tools")
        return {name: getattr(self, name[1:]) for name in names}

    def cd(self, arg):
        a = self.agent
        if not arg:
            return self.ui.write("working directory: %s\n" % a.cwd)
        path = os.path.abspath(os.path.join(a.cwd, os.path.expanduser(arg)))
        if not os.path.isdir(path):
            raise g.UserError("/cd: no such directory: %s" % path)
        a.set_cwd(path)
        # The system prompt stays as it is (the provider caches it); the model learns from a note.
        note = ("[/cd] The user changed the working directory to %s. Tools run there now and "
                "relative paths resolve against it." % path)
        for rules_path, text in g.find_project_rules(path):
            marker = "PROJECT RULES from %s:" % rules_path
            if not any(marker in str(m.get("content")) for m in a.messages):
                note += "\n\n%s\n%s" % (marker, text)
        a.add({"role": "user", "kind": "note", "content": note})
        self.ui.write("working directory: %s (the model is told)\n" % path)

    def resume(self, arg):
        if not arg:
            raise g.UserError("usage: /resume ID (see /sessions)")
        a = self.agent
        sid = g.find_session(a.cfg.data_dir, arg)
        if sid == a.session.id:
            return self.ui.write("already in session %s\n" % sid)
        a.session.close()
        a.open_session(g.Session(a.cfg.data_dir, sid, warn=self.ui.notice), resume=True)
        self.ui.goal = None
        self.ui.resumed(a)

    def compact(self, arg):
        if not self.agent.compact(keep=2):      # asked for: keep only the last exchange verbatim
            self.ui.write("nothing to compact: the history is already short\n")

    def cost(self, arg):
        ledger = self.agent.ledger
        if arg:
            try:
                limit = float(arg.lstrip("$"))
            except ValueError:
                limit = -1
            if not limit >= 0:
                raise g.UserError("usage: /cost N (a limit in USD; 0 = no limit)")
            ledger.limit = limit
        self.ui.write("cost: $%.4f spent, limit %s\n" % (
            ledger.cost_usd, "$%.2f" % ledger.limit if ledger.limit > 0 else "none"))

    def tools(self, arg):
        for name, tool in self.agent.runner.tools().items():
            ask = name in g.NEEDS_APPROVAL or name not in g.TOOLS     # an MCP tool asks too
            ask = ask and not self.agent.cfg.always_approve
            doc = g.tool_line(name, self.agent.cfg.bash_timeout, tool).partition(" ")[2]
            doc += " [asks first]" if ask else ""
            self.ui.write(self.ui.field_lines(name, as_text(doc)))


def interactive(args, cfg):
    ui = DetailedUI()
    agent = g.open_agent(cfg, ui, DETAILED, args, new_if_busy=True)
    ui.agent = agent
    if args.resume or args.cont:
        ui.resumed(agent)
    commands = Commands(agent, ui).table()
    try:
        return g.repl(agent, ui, commands=commands, help_text=HELP, before_prompt=ui.between_turns,
                      prog="grok-detailed", first=" ".join(args.message))
    finally:
        s, n, dot = agent.session, agent.runner.tool_count, ui.glyph["dot"]
        saved = len(agent.messages) > 1 and not s.disabled
        lines = ["Session saved: " + home_short(s.path)] * saved
        tools = "%d tool%s" % (n, "s" * (n != 1))
        lines.append("Session %s %s $%.4f %s %s" % (s.id, dot, agent.ledger.cost_usd, dot, tools))
        lines = [part for line in lines for part in wrap(line, ui.width())]
        ui.write("".join(ui.paint("2", line) + "\n" for line in lines))
        agent.close()


# --- Agent mode: plan -> execute -> review through markdown files ---

AGENTS_MD = """\
# Agents.md: the agent controller

You play one role at a time in a plan -> execute -> review loop run by the grok agent harness
(`grok-detailed --agent`). The harness keeps the state in markdown files in its workspace and
sends you one step at a time. Each step message names the step, the loop and the file your reply
becomes, quotes the user's own words verbatim and gives you the files you need. You never write
the workspace files yourself: the `response` of your final reply is the file.

## The workspace

| file | written by | holds |
|---|---|---|
| Agents.md | harness, once; the user may edit it | this controller: the loop, the roles, the rules |
| interview.md | harness, once; the user may edit it | how to turn the user's request into a goal |
| goal.md | interviewer | the goal: outcome, scope, constraints, done criteria, assumptions |
| planner.md | planner | the task breakdown of this loop |
| executor.md | executor | the prompt the execution step runs |
| result.md | harness | raw output of the execution: the answer, every tool call and its output |
| reviewer.md | reviewer | analysis of the result and the verdict |
| final_report.md | reporter | the final deliverable for the user |
| meta.json | harness | goal hash, loop, step, status, timestamps |
| loops/N/ | harness | the files of earlier loops |

## The loop

1. Initialization: the harness creates the workspace and the static prompts.
2. Load or update the goal: the interviewer writes goal.md from the user's words (interview.md).
3. A new goal resets: the generated files are deleted and the loop starts over. The same goal
   resumes at the step that was interrupted; finished steps are not redone.
4. One loop: planner -> planner.md, executor -> executor.md, execution -> result.md,
   reviewer -> reviewer.md.
5. Verdict `complete`: the reporter writes final_report.md. Verdict `continue`: the next loop's
   planner gets the review and updates the tasks. Verdict `unsafe`: the workflow stops.
6. When the last allowed loop ends without `complete`, the reporter writes a partial
   final_report.md.

## The roles

### interviewer -> goal.md
Follow interview.md.

### planner -> planner.md
Break the goal into a short ordered list of concrete tasks that can be done with the tools
(bash, read_file, write_file, list_files, web_search, ask_user) in the user's working directory.
For each task: what to do and how to check that it worked. Risks and open questions last.
From the second loop on you get the previous plan and its review: keep what is done, fix what
the review found, add what is missing, and mark every task as done or to do.

### executor -> executor.md
Write the prompt the execution step will run: a self-contained instruction to an agent with
tools that covers the open tasks of planner.md in order, with the exact files, commands and
checks, what to avoid, and what to report at the end. Do no work in this step.

### execution -> result.md
Do the work of executor.md with the tools and check it. Your final answer says what you did,
what you found, what changed and what is left. The harness stores it, with every tool call
and its output, as result.md.

### reviewer -> reviewer.md
Compare result.md with goal.md and planner.md: what was done, what is verified, what is wrong
or missing, what the next loop must do. Judge from the evidence (tool output), not from claims.
If the result is empty, say so: nothing was executed. The last line is the verdict, exactly one
of these, with the keyword in English:
- `VERDICT: complete`: the done criteria of goal.md are met and verified.
- `VERDICT: continue`: more work is needed and it can be done safely.
- `VERDICT: unsafe`: going on would be harmful, destructive, illegal or against the user's
  interest, or the goal asks for such a thing.

### reporter -> final_report.md
The deliverable for the user: the answer or outcome first, then what was done (files,
commands, results), how it was verified, and what is left open. When the loops ran out before
the goal was complete, say so at the top: the report is partial, and what is missing.

## Rules

- Language: write every file and every message in the language of the user's own words, which
  every step message quotes verbatim (the user's latest input). Never switch to English unless
  the user wrote English. Only the VERDICT keywords stay in English.
- Reply: in every step except the execution, end with tool_calls [] and done true, and put the
  complete markdown of the step's file in `response`: no code fence around it, no comment on it.
- Only the execution step changes anything. In the other steps you may use read-only tools
  (read_file, list_files, web_search) when they help; never bash or write_file.
- Do not read or write the workspace files with tools: the step message holds what you need.
- Safety: no destructive or irreversible action the goal does not clearly ask for; no secrets in
  files. A tool call the user refuses stops the workflow.
- Be concrete and brief: files, commands, numbers. No filler.
"""

INTERVIEW_MD = """\
# interview.md: the goal generator

Turn the user's request into goal.md: a clear, safe goal the planner can work from.

1. Read the user's words (quoted verbatim in the step message). Find what is unclear and
   matters for the result: the scope, the files or systems concerned, the expected output,
   constraints, what "done" means.
2. Ask only what you cannot reasonably assume, and only when the step message says the user
   can answer: at most 3 questions, one ask_user call each, with 2 to 5 short options (they are
   shown numbered; the user may also answer in their own words). Ask in the user's language.
   When nobody can answer, ask nothing: assume, and list the assumptions.
3. Safety: if the request is harmful, illegal or destructive beyond what the user clearly
   wants, say so in goal.md and narrow the goal to what is safe.
4. Write goal.md in the user's language, with these parts:
   - the goal, in one or two sentences;
   - context and scope: what is in, what is out;
   - constraints;
   - done criteria: a list that can be checked;
   - assumptions, and the user's answers to your questions.
"""

STATIC_PROMPTS = (("Agents.md", AGENTS_MD), ("interview.md", INTERVIEW_MD))
# step -> the role named in the prompts and the display; a step writes the file STEP.md
STEP_ROLES = {"goal": "interviewer", "planner": "planner", "executor": "executor",
              "result": "execution", "reviewer": "reviewer", "final_report": "reporter"}
STEPS = tuple(STEP_ROLES)
LOOP_STEPS = ("planner", "executor", "result", "reviewer")
GENERATED = [step + ".md" for step in STEPS] + ["meta.json"]
INCLUDE_CAP = 40000         # characters of one workspace file quoted in a step prompt


def capped(text):
    """A workspace file as quoted in a prompt: at most INCLUDE_CAP characters, saying so."""
    if len(text) <= INCLUDE_CAP:
        return text
    return text[:INCLUDE_CAP] + "\n[... %d more characters not shown]" % (len(text) - INCLUDE_CAP)


PARTIAL_MARK = ("<!-- grok-agent: partial report: the maximum of %d loop(s) was reached "
                "before the goal was complete -->")

LANGUAGE_RULE = (
    "LANGUAGE: write the file and every message in the language of the user's own words quoted "
    "below (the user's latest input), never in English unless the user wrote English; keep the "
    "user's terms. Only the VERDICT keywords stay in English.")
REPLY_RULE = ("OUTPUT: reply with tool_calls [], done true, and `response` = the complete markdown "
              "of %s (no code fence around it, nothing else).")
EXECUTE = ("Do the work that executor.md below describes, with your tools, now. When you are done "
           "or blocked, reply with tool_calls [], done true, and `response` = what you did, what "
           "you found, what changed and what is left.")
QUESTIONS = {
    True: "QUESTIONS: the user is at the terminal. Ask with ask_user only what you must know "
          "(see interview.md); none if the request is clear.",
    False: "QUESTIONS: nobody can answer now (no terminal). Do not call ask_user: assume, and "
           "list the assumptions in goal.md."}


class AgentStopped(g.AgentError):
    """The workflow stops on purpose: an unsafe verdict or a refused tool."""


def goal_hash(text):
    """sha256 of the goal, normalised: Unicode NFC, whitespace collapsed, case folded."""
    import hashlib
    import unicodedata
    norm = " ".join(unicodedata.normalize("NFC", text).split()).casefold()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def quote_block(text):
    return "\n".join(("> " + line) if line else ">" for line in text.strip().splitlines())


def unquote_block(text):
    """The user's words from goal.md's leading blockquote (the harness writes it), or None."""
    lines = []
    for line in (text or "").splitlines():
        if not line.startswith(">"):
            break
        lines.append(line[2:] if line.startswith("> ") else line[1:])
    return "\n".join(lines).strip() or None


def parse_verdict(text):
    """The last `VERDICT: complete|continue|unsafe` in a review, or None."""
    import re
    found = re.findall(r"verdict\W{0,12}(complete|continue|unsafe)\b", text or "", re.I)
    return found[-1].lower() if found else None


def strip_fence(text):
    """A whole reply wrapped in one ```markdown fence, unwrapped."""
    lines = text.strip().splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1])
    return text.strip()


def fenced(text):
    fence = "```"
    while fence in text:
        fence += "`"
    return "%s\n%s\n%s" % (fence, text.rstrip("\n"), fence)


def result_text(answer, calls, error):
    """result.md: the answer, each tool call with its output, why the execution ended early."""
    parts = [answer.strip()]
    for i, (name, shown, output, ok) in enumerate(calls, 1):
        mark = "✓" if ok else "✗"
        parts.append("### [%d] %s %s %s\n\n%s" % (i, mark, name, shown[:300], fenced(output)))
    if error:
        parts.append("⚠ %s" % error)
    return "\n\n---\n\n".join(p for p in parts if p) + "\n"


class Workspace:
    """GROK_AGENT_DIR: the static prompts, the generated files and meta.json."""

    def __init__(self, path):
        self.dir = path

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def prepare(self, notice):
        """Create the directory (0700) and any missing static prompt."""
        existed = os.path.isdir(self.dir)
        try:
            if not existed:
                os.makedirs(self.dir, mode=0o700)
                os.chmod(self.dir, 0o700)
        except OSError as e:
            why = e.strerror or e
            raise g.UserError("cannot create the agent workspace %s: %s" % (self.dir, why))
        for name, text in STATIC_PROMPTS:
            if self.read(name) is None:
                self.write(name, text)
                if existed:
                    notice("%s was missing: recreated it" % self.path(name))

    def read(self, *names):
        try:
            with open(self.path(*names), encoding="utf-8", errors="replace") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise g.UserError("cannot read %s: %s" % (self.path(*names), e.strerror or e))

    def exists(self, *names):
        return os.path.isfile(self.path(*names))

    def write(self, name, text):
        """Atomic: a crash leaves the old file or the new one, never half of one."""
        path = self.path(name)
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            g.atomic_write(path, text.encode("utf-8"))
        except OSError as e:
            raise g.UserError("cannot write %s: %s" % (path, e.strerror or e))

    def remove(self, *names):
        try:
            os.unlink(self.path(*names))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise g.UserError("cannot delete %s: %s" % (self.path(*names), e.strerror or e))

    def has_generated(self):
        return any(self.exists(n) for n in GENERATED) or os.path.isdir(self.path("loops"))

    def reset(self):
        """A new goal: delete the generated files; the static prompts stay."""
        for name in GENERATED:
            self.remove(name)
        shutil.rmtree(self.path("loops"), ignore_errors=True)

    def load_meta(self):
        """(meta, problem); (None, None) when there is no meta.json."""
        text = self.read("meta.json")
        if text is None:
            return None, None
        try:
            meta = json.loads(text)
        except ValueError as e:
            return None, "not JSON: %s" % e
        return (meta, None) if meta_ok(meta) else (None, "missing or wrong fields")

    def save_meta(self, meta):
        meta["updated"] = g.now_iso()
        self.write("meta.json", json.dumps(meta, indent=2, ensure_ascii=False) + "\n")


def list_of(value, kind):
    return isinstance(value, list) and all(isinstance(x, kind) for x in value)


def meta_ok(meta):
    """meta.json has every field, of the type the harness writes, and the hash of its goal."""
    if not isinstance(meta, dict) or meta.get("version") != 1:
        return False
    goal, loop, cost = meta.get("goal"), meta.get("loop"), meta.get("cost_usd", 0)
    steps = meta.get("steps")
    records = list(steps.values()) if isinstance(steps, dict) else None
    return all((isinstance(goal, str) and goal.strip() and meta.get("goal_hash") == goal_hash(goal),
                isinstance(loop, int) and loop >= 1,
                isinstance(cost, (int, float)) and 0 <= cost < 1e6,
                list_of(records, dict) and list_of([r.get("verdict", "") for r in records], str),
                list_of(meta.get("loops"), dict),
                list_of(meta.get("sessions"), str)))


def new_meta(goal):
    now = g.now_iso()
    return {"version": 1, "goal_hash": goal_hash(goal), "goal": goal.strip(), "loop": 1,
            "max_loops": 0, "step": "goal", "status": "running", "created": now, "updated": now,
            "cost_usd": 0.0, "steps": {}, "loops": [], "sessions": []}


class AgentModeUI(DetailedUI):
    """The detailed display plus what agent mode needs: tool calls kept for result.md,
    a refused tool stops the workflow, questions only where someone can answer them."""

    def __init__(self, can_ask):
        DetailedUI.__init__(self)
        self.can_ask = can_ask
        self.calls = []

    def tool_end(self, call, result):
        self.calls.append((call.name, call.shown, result.output, result.ok))
        DetailedUI.tool_end(self, call, result)

    def approve(self, call):
        answer = DetailedUI.approve(self, call)
        if answer not in ("yes", "always"):
            raise AgentStopped(
                "unsafe: the %s call %s was refused, so the workflow stops. Run `grok-detailed "
                "--agent` again to retry the step (-y allows the tools), or give a new goal."
                % (call.name, json.dumps(call.shown[:200])))
        return answer

    def ask_user(self, question, options):
        return DetailedUI.ask_user(self, question, options) if self.can_ask else None


class AgentRun:
    """One `grok-detailed --agent` run: the goal, then planner -> executor -> execution
    -> reviewer loops, then the final report. State lives in the workspace files and
    meta.json; every step is skipped when its file and its meta.json record exist."""

    def __init__(self, args, cfg, ws):
        self.args, self.cfg, self.ws = args, cfg, ws
        self.max_loops = args.max_loops
        self.ui = AgentModeUI(can_ask=sys.stdin.isatty())
        self.meta = self.agent = None

    # -- the goal and the state ------------------------------------------------
    def open(self):
        """meta.json as it is, rebuilt from the files, or new: a new goal starts over."""
        self.ws.prepare(self.ui.notice)
        given = (self.args.agent or "").strip()
        meta, problem = self.ws.load_meta()
        if problem:
            where = self.ws.path("meta.json")
            self.ui.notice("warning: %s is invalid (%s): recreating it" % (where, problem))
        if meta is None and self.ws.has_generated():
            meta = self.recover()
        if given and meta is not None and meta["goal_hash"] != goal_hash(given):
            self.ui.notice("a new goal: deleting the generated files of the previous one in %s"
                           % self.ws.dir)
            self.ws.reset()
            meta = None
        self.meta = meta or new_meta(given or self.ask_goal())
        self.meta["max_loops"] = self.max_loops
        self.save()

    def ask_goal(self):
        if sys.stdin.isatty():
            ask = self.ui.paint("1", "What should the agent do?")
            self.ui.write(ask + " (describe the goal; Ctrl-D cancels)\n")
            try:
                text = input("goal> ")
            except EOFError:
                text = ""
        else:
            text = sys.stdin.read()
        if not text.strip():
            raise g.UserError('no goal: run grok-detailed --agent "GOAL" '
                              '(or pipe the goal on stdin)')
        return text.strip()

    def recover(self):
        """meta.json rebuilt from the files present: goal.md's quoted words, archived loops,
        then the loop files up to the first missing one; None (and the files go) without them."""
        words = unquote_block(self.ws.read("goal.md"))
        if not words:
            self.ui.notice("no usable goal.md to recover from: starting over")
            self.ws.reset()
            return None
        meta = new_meta(words)
        loop = 1
        while self.ws.exists("loops", str(loop), "reviewer.md"):
            loop += 1
        meta["loop"] = loop
        for step in STEPS:              # the goal, then each step whose file is there, in order
            if not self.ws.exists(step + ".md"):
                break
            mtime = os.path.getmtime(self.ws.path(step + ".md"))
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(mtime))
            meta["steps"][step] = dict(loop=loop, started=stamp, finished=stamp, recovered=True)
        if "reviewer" in meta["steps"]:
            meta["steps"]["reviewer"]["verdict"] = parse_verdict(self.ws.read("reviewer.md"))
        todo = [s for s in STEPS if s not in meta["steps"]]
        self.ui.notice("recovered the state from the files present: loop %d, next step %s"
                       % (loop, todo[0] if todo else "none (finished)"))
        return meta

    def save(self):
        if self.agent is not None:
            self.meta["cost_usd"] = round(self.agent.ledger.cost_usd, 8)
        self.ws.save_meta(self.meta)

    # -- the run -----------------------------------------------------------------
    def run(self):
        self.open()
        controller = ("\n\nAGENT MODE: you work under this controller (Agents.md from the "
                      "workspace):\n\n" + capped(self.ws.read("Agents.md")))
        contract = DETAILED._replace(extra_prompt=DETAILED.extra_prompt + controller)
        self.agent = self.ui.agent = g.Agent(self.cfg, self.ui, contract)   # the ui reads it too
        self.agent.runner.read_dirs.append(self.ws.dir)     # read_file/list_files there: unasked
        # COST_LIMIT covers the whole goal
        self.agent.ledger.cost_usd = float(self.meta.get("cost_usd") or 0.0)
        self.meta["sessions"].append(self.agent.session.id)
        try:
            return self.drive()
        except (KeyboardInterrupt, g.Cancelled, g.Terminated) as e:
            self.meta["status"] = "interrupted"
            self.save()
            how, code, _ = g.turn_end(e)     # "interrupted: ..." or "terminated by signal N"
            self.ui.notice("%s at %s (loop %d): run `grok-detailed --agent` to resume there"
                           % (how.partition(":")[0], self.meta["step"], self.meta["loop"]))
            if isinstance(e, g.Terminated):
                raise
            return code
        except g.GrokError as e:
            self.meta["status"] = "stopped" if isinstance(e, AgentStopped) else "failed"
            self.meta["error"] = g.scrub(str(e))
            self.save()
            if not isinstance(e, AgentStopped):
                self.ui.notice("agent mode failed at %s (loop %d); run `grok-detailed --agent` "
                               "again to resume there" % (self.meta["step"], self.meta["loop"]))
            raise
        finally:
            self.agent.close()

    def drive(self):
        m = self.meta
        self.ui.write(self.ui.paint("1", "agent mode") + " · %s · up to %d loops · %s\n"
                      % (self.ws.dir, self.max_loops, self.agent.link.model))
        self.ui.write("goal: %s\n" % as_text(" ".join(m["goal"].split())[:160]))
        todo = [s for s in STEPS if not self.done(s)]
        if m["steps"] and todo:
            self.ui.write("resuming: loop %d, at %s\n" % (m["loop"], STEP_ROLES[todo[0]]))
        self.ensure("goal")
        while True:
            for step in LOOP_STEPS:
                self.ensure(step)
            verdict = self.verdict()
            if verdict == "unsafe":
                raise AgentStopped(
                    "unsafe: the reviewer judged the work unsafe in loop %d, so the workflow stops "
                    "and nothing more is run. Read %s; give a new goal to start over."
                    % (m["loop"], self.ws.path("reviewer.md")))
            if verdict == "complete" or m["loop"] >= self.max_loops:
                return self.finish(partial=verdict != "complete")
            self.next_loop(verdict)

    def recorded(self, step):
        """meta.json says the step finished (in this loop, for a loop step)."""
        rec = self.meta["steps"].get(step) or {}
        this_loop = step == "goal" or rec.get("loop") == self.meta["loop"]
        return bool(rec.get("finished") and this_loop)

    def done(self, step):
        return self.recorded(step) and self.ws.exists(step + ".md")

    def ensure(self, step, **kw):
        """Run the step unless it is complete: its file written and meta.json recording it."""
        if self.done(step):
            return
        name = step + ".md"
        if self.recorded(step):
            self.ui.notice("%s is missing: regenerating it" % name)
        rec = {"loop": self.meta["loop"], "started": g.now_iso()}
        self.meta["steps"][step] = rec
        self.meta.update(step=step, status="running")
        self.save()
        self.header(step)
        text = getattr(self, "make_" + step)(rec, **kw)
        self.ws.write(name, text)
        rec["finished"] = g.now_iso()
        self.save()
        size = " · %d bytes · $%.4f\n" % (len(text.encode("utf-8")), self.agent.ledger.cost_usd)
        self.ui.write(self.ui.paint("32", "✓ %s" % name) + self.ui.paint("90", size))

    def header(self, step):
        where = "loop %d/%d · " % (self.meta["loop"], self.max_loops) if step in LOOP_STEPS else ""
        a = self.agent
        ctx = "context %.1f%%" % a.context_pct() if a.link.window_known else "window unknown"
        line = "── agent · %s%s → %s · $%.4f · %s ──" % (where, STEP_ROLES[step], step + ".md",
                                                        a.ledger.cost_usd, ctx)
        self.ui.write("\n" + self.ui.paint("1;36", line) + "\n")

    def verdict(self):
        rec = self.meta["steps"]["reviewer"]
        verdict = rec.get("verdict") or parse_verdict(self.ws.read("reviewer.md"))
        if verdict not in ("complete", "continue", "unsafe"):
            self.ui.notice("reviewer.md has no VERDICT line: taking it as `continue`")
            verdict = "continue"
        return verdict

    def next_loop(self, verdict):
        """Archive this loop in loops/N/ and start loop N+1; crash-safe: copy, record, delete."""
        m = self.meta
        n = m["loop"]
        for step in LOOP_STEPS:
            text = self.ws.read(step + ".md")
            if text is not None:
                self.ws.write(os.path.join("loops", str(n), step + ".md"), text)
        steps = {s: m["steps"].pop(s) for s in STEPS[1:] if s in m["steps"]}
        m["loops"].append({"loop": n, "verdict": verdict, "steps": steps})
        m["loop"] = n + 1
        m["step"] = "planner"
        self.save()
        for step in STEPS[1:]:
            self.ws.remove(step + ".md")

    def finish(self, partial):
        """The final report, written and shown; the exit code: 3 if it is partial."""
        self.ensure("final_report", partial=partial)
        self.meta["status"] = "max_loops" if partial else "complete"
        self.meta.pop("error", None)
        self.save()
        path = self.ws.path("final_report.md")
        text = g.visible((self.ws.read("final_report.md") or "").rstrip())
        note = " (partial: the maximum of %d loops was reached)" % self.max_loops if partial else ""
        self.ui.write("\n%s%s\n\n%s\n" % (self.ui.paint("1", "final report: " + path), note, text))
        return 3 if partial else 0

    # -- the step prompts ----------------------------------------------------------
    def prompt(self, step, body):
        """A step message: what runs, the language rule, the user's words verbatim, the inputs."""
        m = self.meta
        where = " · loop %d of %d" % (m["loop"], self.max_loops) if step in LOOP_STEPS else ""
        parts = ["[agent mode] step: %s%s · writes %s" % (STEP_ROLES[step], where, step + ".md"),
                 "Play the %s role of Agents.md." % STEP_ROLES[step], LANGUAGE_RULE,
                 "THE USER'S WORDS (verbatim):\n<<<\n%s\n>>>" % m["goal"]]
        return "\n\n".join(parts + body)

    def include(self, *names, label=None):
        """A workspace file quoted in a step prompt, under its label (its name by default)."""
        label = label or names[-1]
        text = self.ws.read(*names)
        if text is None:
            return "===== %s: missing =====" % label
        text = capped(text).strip("\n")
        return "===== %s =====\n%s\n===== end of %s =====" % (label, text, label)

    def converse(self, step, body):
        """One fresh conversation per step, built from the files only: a resumed step sees
        what it would have seen without the interruption."""
        self.agent.reset([])
        self.ui.calls = []
        return self.agent.run_turn(self.prompt(step, body))

    def generate(self, step, body):
        """A step whose reply is its file."""
        return strip_fence(self.converse(step, body + [REPLY_RULE % (step + ".md")]))

    def make_goal(self, rec):
        self.agent.runner.tool_names = ["ask_user"]        # the interview runs no tools
        try:
            text = self.generate("goal", [self.include("interview.md"), QUESTIONS[self.ui.can_ask]])
        finally:
            self.agent.runner.tool_names = list(g.TOOLS)
        # The user's words lead goal.md, so a lost meta.json can be rebuilt from the files.
        return "%s\n\n%s\n" % (quote_block(self.meta["goal"]), text)

    def make_planner(self, rec):
        body = [self.include("goal.md")]
        prev = str(self.meta["loop"] - 1)
        if self.meta["loop"] > 1:
            body += [self.include("loops", prev, "planner.md", label="the plan of loop " + prev),
                     self.include("loops", prev, "reviewer.md", label="the review of loop " + prev),
                     "Update the tasks for this loop from that review."]
        return self.generate("planner", body) + "\n"

    def make_executor(self, rec):
        body = [self.include("goal.md"), self.include("planner.md")]
        return self.generate("executor", body) + "\n"

    def make_result(self, rec):
        """The execution: an engine turn with tools and approvals; result.md is its raw output."""
        error = None
        try:
            answer = self.converse("result", [EXECUTE, self.include("executor.md")])
        except AgentStopped:
            raise
        except g.AgentError as e:
            if isinstance(e, g.LimitReached) and e.cause == "cost":
                raise
            # The turn broke down (contract, tool rounds): the reviewer judges what is there.
            answer, error = "", g.scrub(str(e))
            self.ui.notice("the execution ended early: %s" % error)
        rec["empty"] = not answer.strip() and not self.ui.calls
        return result_text(answer, self.ui.calls, error)

    def make_reviewer(self, rec):
        body = [self.include("goal.md"), self.include("planner.md"), self.include("result.md")]
        result = self.ws.read("result.md") or ""
        if self.meta["steps"]["result"].get("empty") or not result.strip():
            body.append("NOTE: the result is EMPTY: the execution produced no answer and no tool "
                        "output. Say so in the review.")
        body.append("End with the verdict line: `VERDICT: complete`, `VERDICT: continue` or "
                    "`VERDICT: unsafe` (this is loop %d of %d)."
                    % (self.meta["loop"], self.max_loops))
        text = self.generate("reviewer", body)
        rec["verdict"] = parse_verdict(text)
        return text + "\n"

    def make_final_report(self, rec, partial=False):
        body = [self.include("goal.md")]
        for n in (str(old["loop"]) for old in self.meta["loops"]):
            body.append(self.include("loops", n, "reviewer.md", label="the review of loop " + n))
        body += [self.include(name, label=name + " (the last loop)")
                 for name in ("planner.md", "result.md", "reviewer.md")]
        if partial:
            body.append("PARTIAL: the maximum of %d loop(s) was reached before the goal was "
                        "complete. Say so at the top of the report (in the user's language) and "
                        "say what is missing." % self.max_loops)
        rec["partial"] = partial
        text = self.generate("final_report", body)
        return (PARTIAL_MARK % self.max_loops + "\n\n" if partial else "") + text + "\n"


def run_agent_mode(args, cfg):
    if args.max_loops < 1:
        raise g.UserError("--max-loops must be 1 or more")
    if args.resume or args.cont:
        raise g.UserError("--resume/--continue do not apply to --agent: "
                          "it resumes from its workspace")
    where = os.environ.get("GROK_AGENT_DIR") or "~/.grok_agent"
    ws = Workspace(os.path.abspath(os.path.expanduser(where)))
    return AgentRun(args, cfg, ws).run()


# --- main ---

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["models"]:
        return g.guarded("grok-detailed", lambda: g.list_models(argv[1:]))

    def body():
        p = g.arg_parser(prog="grok-detailed",
                         description="grok's debugging view: every field of the JSON contract, "
                                     "session, cost and context; and agent mode.")
        p.add_argument("--agent", nargs="?", const="", metavar="GOAL",
                       help="agent mode: plan, execute and review GOAL through markdown files "
                            "in $GROK_AGENT_DIR (default ~/.grok_agent)")
        p.add_argument("--max-loops", type=int, default=5, metavar="N",
                       help="agent mode: at most N loops (default 5)")
        args = p.parse_args(argv)
        cfg = g.Config(model=args.model, cwd=args.cwd, always_approve=args.always_approve,
                       effort=args.effort, sandbox=args.sandbox, net=args.sandbox_network)
        if args.agent is not None:
            return run_agent_mode(args, cfg)
        return interactive(args, cfg)

    return g.guarded("grok-detailed", body)


if __name__ == "__main__":
    raise SystemExit(main())
