#!/usr/bin/env python3
"""grok-detailed: the debugging view of grok, and agent mode.

Standard library only, Python 3.8+. The engine is grok.py (installed as `grok`) in
the same directory as this file; it is loaded from there, nothing is duplicated.

    grok-detailed                 interactive chat with session/cost/context header,
                                  task, goal, progress, thinking, confidence
    grok-detailed --agent [GOAL]  plan -> execute -> review through markdown files
"""

import os
import sys


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

class DetailedUI(g.TerminalUI):
    """Placeholder: shows what minimal mode shows."""


def interactive(args, cfg):
    ui = DetailedUI()
    agent = g.open_agent(cfg, ui, DETAILED, args)
    try:
        return g.repl(agent, ui)
    finally:
        agent.close()


# --------------------------------------------------------------------------
# Agent mode: plan -> execute -> review through markdown files (seed 001, issue 9)
# --------------------------------------------------------------------------

import json
import time

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
# step -> (file it writes, role named in the prompts and the display)
STEP_FILES = {"goal": "goal.md", "planner": "planner.md", "executor": "executor.md", "result": "result.md",
              "reviewer": "reviewer.md", "final_report": "final_report.md"}
STEP_ROLES = {"goal": "interviewer", "planner": "planner", "executor": "executor", "result": "execution",
              "reviewer": "reviewer", "final_report": "reporter"}
LOOP_STEPS = ("planner", "executor", "result", "reviewer")
VERDICTS = ("complete", "continue", "unsafe")
INCLUDE_CAP = 40000         # characters of one workspace file quoted in a step prompt
PARTIAL_MARK = "<!-- grok-agent: partial report: the maximum of %d loop(s) was reached before the goal was complete -->"

LANGUAGE_RULE = (
    "LANGUAGE: write the file and every message in the language of the user's own words quoted below "
    "(the user's latest input), never in English unless the user wrote English; keep the user's terms. "
    "Only the VERDICT keywords stay in English.")
REPLY_RULE = ("OUTPUT: reply with tool_calls [], done true, and `response` = the complete markdown of %s "
              "(no code fence around it, nothing else).")


class AgentStopped(g.AgentError):
    """The workflow stops on purpose: unsafe verdict or a refused tool (seed 001 section 6.4)."""


def agent_dir():
    return os.path.abspath(os.path.expanduser(os.environ.get("GROK_AGENT_DIR") or "~/.grok_agent"))


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
            raise g.UserError("cannot create the agent workspace %s: %s" % (self.dir, e.strerror or e))
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
        import tempfile
        path = self.path(name)
        parent = os.path.dirname(path)
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=".grok-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as e:
            raise g.UserError("cannot write %s: %s" % (path, e.strerror or e))

    def remove(self, *names):
        try:
            os.unlink(self.path(*names))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise g.UserError("cannot delete %s: %s" % (self.path(*names), e.strerror or e))

    def generated(self):
        names = list(STEP_FILES.values()) + ["meta.json"]
        return [n for n in names if self.exists(n)] + (["loops"] if os.path.isdir(self.path("loops")) else [])

    def reset(self):
        """Goal Reset Policy: delete the generated files; the static prompts stay."""
        import shutil
        for name in list(STEP_FILES.values()) + ["meta.json"]:
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
        ok = (isinstance(meta, dict) and meta.get("version") == 1 and isinstance(meta.get("goal"), str)
              and meta["goal"].strip() and meta.get("goal_hash") == goal_hash(meta["goal"])
              and isinstance(meta.get("loop"), int) and meta["loop"] >= 1
              and isinstance(meta.get("steps"), dict) and all(isinstance(v, dict) for v in meta["steps"].values())
              and isinstance(meta.get("loops"), list) and isinstance(meta.get("sessions"), list))
        return (meta, None) if ok else (None, "missing or wrong fields")

    def save_meta(self, meta):
        meta["updated"] = g.now_iso()
        self.write("meta.json", json.dumps(meta, indent=2, ensure_ascii=False) + "\n")


def new_meta(goal):
    now = g.now_iso()
    return {"version": 1, "goal_hash": goal_hash(goal), "goal": goal.strip(), "loop": 1, "max_loops": 0,
            "step": "goal", "status": "running", "created": now, "updated": now, "cost_usd": 0.0,
            "steps": {}, "loops": [], "sessions": []}


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
            raise AgentStopped("unsafe: the %s call %s was refused, so the workflow stops (seed 001: unsafe "
                               "content). Run `grok-detailed --agent` again to retry the step (-y allows the "
                               "tools), or give a new goal." % (call.name, json.dumps(call.shown[:200])))
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
        self.meta = None
        self.agent = None

    # -- the goal and the state ------------------------------------------------
    def open(self):
        self.ws.prepare(self.ui.notice)
        given = (self.args.agent or "").strip()
        meta, problem = self.ws.load_meta()
        if problem:
            self.ui.notice("warning: %s is invalid (%s): recreating it" % (self.ws.path("meta.json"), problem))
        if meta is None and self.ws.generated():
            meta = self.recover()
            if meta is None:
                self.ui.notice("no usable goal.md to recover from: starting over")
                self.ws.reset()
        if given and meta is not None and meta["goal_hash"] != goal_hash(given):
            self.ui.notice("a new goal: deleting the generated files of the previous one in %s" % self.ws.dir)
            self.ws.reset()
            meta = None
        if meta is None:
            meta = new_meta(given or self.ask_goal())
        meta["max_loops"] = self.max_loops
        self.meta = meta
        self.save()

    def ask_goal(self):
        if sys.stdin.isatty():
            self.ui.write(self.ui.paint("1", "What should the agent do?") + " (describe the goal; Ctrl-D cancels)\n")
            try:
                text = input("goal> ")
            except EOFError:
                text = ""
        else:
            text = sys.stdin.read()
        if not text.strip():
            raise g.UserError('no goal: run grok-detailed --agent "GOAL" (or pipe the goal on stdin)')
        return text.strip()

    def recover(self):
        """meta.json rebuilt from the files present: goal.md's quoted words, archived loops,
        then the loop files up to the first missing one."""
        words = unquote_block(self.ws.read("goal.md"))
        if not words:
            return None
        meta = new_meta(words)

        def done(step, loop):
            mtime = os.path.getmtime(self.ws.path(STEP_FILES[step]))
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(mtime))
            meta["steps"][step] = {"loop": loop, "started": stamp, "finished": stamp, "recovered": True}

        loop = 1
        while self.ws.exists("loops", str(loop), "reviewer.md"):
            loop += 1
        meta["loop"] = loop
        done("goal", loop)
        for step in LOOP_STEPS:
            if not self.ws.exists(STEP_FILES[step]):
                break
            done(step, loop)
        else:
            meta["steps"]["reviewer"]["verdict"] = parse_verdict(self.ws.read("reviewer.md"))
            if self.ws.exists("final_report.md"):
                done("final_report", loop)
        todo = [s for s in ("goal",) + LOOP_STEPS + ("final_report",) if s not in meta["steps"]]
        self.ui.notice("recovered the state from the files present: loop %d, next step %s"
                       % (loop, todo[0] if todo else "none (finished)"))
        return meta

    def save(self):
        if self.agent is not None:
            self.meta["cost_usd"] = round(self.agent.cost_usd, 8)
        self.ws.save_meta(self.meta)

    # -- the run -----------------------------------------------------------------
    def run(self):
        self.open()
        contract = g.Contract(DETAILED.name, DETAILED.extra_properties,
                              DETAILED.extra_prompt + "\n\nAGENT MODE: you work under this controller "
                              "(Agents.md from the workspace):\n\n" + self.ws.read("Agents.md"),
                              DETAILED.max_tokens)
        self.agent = g.Agent(self.cfg, self.ui, contract)
        self.agent.cost_usd = float(self.meta.get("cost_usd") or 0.0)     # COST_LIMIT covers the whole goal
        self.meta["sessions"].append(self.agent.session.id)
        try:
            return self.drive()
        except (KeyboardInterrupt, g.Cancelled):
            self.meta["status"] = "interrupted"
            self.save()
            self.ui.notice("interrupted at %s (loop %d): run `grok-detailed --agent` to resume there"
                           % (self.meta["step"], self.meta["loop"]))
            return 130
        except g.GrokError as e:
            self.meta["status"] = "stopped" if isinstance(e, AgentStopped) else "failed"
            self.meta["error"] = g.scrub(str(e), (self.cfg.api_key,))
            self.save()
            if not isinstance(e, AgentStopped):
                self.ui.notice("agent mode failed at %s (loop %d); run `grok-detailed --agent` again to resume "
                               "there" % (self.meta["step"], self.meta["loop"]))
            raise
        finally:
            self.agent.close()

    def drive(self):
        m = self.meta
        self.ui.write(self.ui.paint("1", "agent mode") + " · %s · up to %d loops · %s\n"
                      % (self.ws.dir, self.max_loops, self.agent.model))
        self.ui.write("goal: %s\n" % " ".join(m["goal"].split())[:160])
        todo = [s for s in ("goal",) + LOOP_STEPS + ("final_report",) if not self.done(s)]
        if m["steps"] and todo:
            self.ui.write("resuming: loop %d, at %s\n" % (m["loop"], STEP_ROLES[todo[0]]))
        self.ensure("goal")
        while True:
            for step in LOOP_STEPS:
                self.ensure(step)
            verdict = self.verdict()
            if verdict == "unsafe":
                raise AgentStopped("unsafe: the reviewer judged the work unsafe in loop %d, so the workflow stops "
                                   "and nothing more is run. Read %s; give a new goal to start over."
                                   % (m["loop"], self.ws.path("reviewer.md")))
            if verdict == "complete" or m["loop"] >= self.max_loops:
                partial = verdict != "complete"
                self.ensure("final_report", partial=partial)
                m["status"] = "max_loops" if partial else "complete"
                m.pop("error", None)
                self.save()
                return self.show_report(partial)
            self.next_loop(verdict)

    def done(self, step):
        rec = self.meta["steps"].get(step)
        return bool(rec and rec.get("finished") and (step == "goal" or rec.get("loop") == self.meta["loop"])
                    and self.ws.exists(STEP_FILES[step]))

    def ensure(self, step, **kw):
        """Run the step unless it is complete: its file written and meta.json recording it."""
        if self.done(step):
            return
        name = STEP_FILES[step]
        old = self.meta["steps"].get(step)
        if old and old.get("finished") and (step == "goal" or old.get("loop") == self.meta["loop"]):
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
        size = len(text.encode("utf-8"))
        self.ui.write(self.ui.paint("32", "✓ %s" % name) + self.ui.paint("90", " · %d bytes · $%.4f\n"
                                                                        % (size, self.agent.cost_usd)))

    def header(self, step):
        where = "loop %d/%d · " % (self.meta["loop"], self.max_loops) if step in LOOP_STEPS else ""
        line = "── agent · %s%s → %s · $%.4f · context %.1f%% ──" % (
            where, STEP_ROLES[step], STEP_FILES[step], self.agent.cost_usd, self.agent.context_pct())
        self.ui.write("\n" + self.ui.paint("1;36", line) + "\n")

    def verdict(self):
        rec = self.meta["steps"]["reviewer"]
        verdict = rec.get("verdict") or parse_verdict(self.ws.read("reviewer.md"))
        if verdict not in VERDICTS:
            self.ui.notice("reviewer.md has no VERDICT line: taking it as `continue`")
            verdict = "continue"
        return verdict

    def next_loop(self, verdict):
        """Archive this loop's files in loops/N/, then start loop N+1 (crash-safe: copy,
        record, then delete)."""
        m = self.meta
        n = m["loop"]
        for step in LOOP_STEPS:
            text = self.ws.read(STEP_FILES[step])
            if text is not None:
                self.ws.write(os.path.join("loops", str(n), STEP_FILES[step]), text)
        steps = {s: m["steps"].pop(s) for s in LOOP_STEPS + ("final_report",) if s in m["steps"]}
        m["loops"].append({"loop": n, "verdict": verdict, "steps": steps})
        m["loop"] = n + 1
        m["step"] = "planner"
        self.save()
        for step in LOOP_STEPS + ("final_report",):
            self.ws.remove(STEP_FILES[step])

    def show_report(self, partial):
        path = self.ws.path("final_report.md")
        text = self.ws.read("final_report.md") or ""
        note = " (partial: the maximum of %d loops was reached)" % self.max_loops if partial else ""
        self.ui.write("\n%s%s\n\n%s\n" % (self.ui.paint("1", "final report: " + path), note, text.rstrip("\n")))
        return 3 if partial else 0

    # -- the step prompts ----------------------------------------------------------
    def prompt(self, step, body):
        """A step message: what runs, the language rule, the user's words verbatim, the inputs."""
        where = " · loop %d of %d" % (self.meta["loop"], self.max_loops) if step in LOOP_STEPS else ""
        parts = ["[agent mode] step: %s%s · writes %s" % (STEP_ROLES[step], where, STEP_FILES[step]),
                 "Play the %s role of Agents.md." % STEP_ROLES[step], LANGUAGE_RULE,
                 "THE USER'S WORDS (verbatim):\n<<<\n%s\n>>>" % self.meta["goal"]]
        return "\n\n".join(parts + body)

    def include(self, label, *names):
        text = self.ws.read(*names)
        if text is None:
            return "===== %s: missing =====" % label
        if len(text) > INCLUDE_CAP:
            text = text[:INCLUDE_CAP] + "\n[... %d more characters not shown]" % (len(text) - INCLUDE_CAP)
        return "===== %s =====\n%s\n===== end of %s =====" % (label, text.strip("\n"), label)

    def generate(self, step, body):
        """One fresh conversation per step, built from the files only: a resumed step sees
        what it would have seen without the interruption."""
        self.agent.reset([])
        self.ui.calls = []
        return strip_fence(self.agent.run_turn(self.prompt(step, body)))

    def make_goal(self, rec):
        if self.ui.can_ask:
            questions = ("QUESTIONS: the user is at the terminal. Ask with ask_user only what you must know "
                         "(see interview.md); none if the request is clear.")
        else:
            questions = ("QUESTIONS: nobody can answer now (no terminal). Do not call ask_user: assume, and "
                         "list the assumptions in goal.md.")
        text = self.generate("goal", [self.include("interview.md", "interview.md"), questions,
                                      REPLY_RULE % "goal.md"])
        # The user's words lead goal.md, so a lost meta.json can be rebuilt from the files.
        return "%s\n\n%s\n" % (quote_block(self.meta["goal"]), text)

    def make_planner(self, rec):
        body = [self.include("goal.md", "goal.md")]
        prev = str(self.meta["loop"] - 1)
        if self.meta["loop"] > 1:
            body += [self.include("the plan of loop %s" % prev, "loops", prev, "planner.md"),
                     self.include("the review of loop %s" % prev, "loops", prev, "reviewer.md"),
                     "Update the tasks for this loop from that review."]
        return self.generate("planner", body + [REPLY_RULE % "planner.md"]) + "\n"

    def make_executor(self, rec):
        return self.generate("executor", [self.include("goal.md", "goal.md"), self.include("planner.md", "planner.md"),
                                          REPLY_RULE % "executor.md"]) + "\n"

    def make_result(self, rec):
        """The execution: a normal engine turn with tools and approvals; result.md is its raw output."""
        body = ["Do the work that executor.md below describes, with your tools, now. When you are done or "
                "blocked, reply with tool_calls [], done true, and `response` = what you did, what you found, "
                "what changed and what is left.", self.include("executor.md", "executor.md")]
        self.agent.reset([])
        self.ui.calls = []
        error = None
        try:
            answer = self.agent.run_turn(self.prompt("result", body))
        except AgentStopped:
            raise
        except g.AgentError as e:
            if 0 < self.cfg.cost_limit <= self.agent.cost_usd:
                raise
            # The turn broke down (contract, tool rounds): the reviewer judges what is there.
            answer, error = "", g.scrub(str(e), (self.cfg.api_key,))
            self.ui.notice("the execution ended early: %s" % error)
        rec["empty"] = not answer.strip() and not self.ui.calls
        parts = [answer.strip()]
        for i, (name, shown, output, ok) in enumerate(self.ui.calls):
            parts.append("### [%d] %s %s %s\n\n%s" % (i + 1, "✓" if ok else "✗", name, shown[:300], fenced(output)))
        if error:
            parts.append("⚠ %s" % error)
        return "\n\n---\n\n".join(p for p in parts if p) + "\n"

    def make_reviewer(self, rec):
        body = [self.include("goal.md", "goal.md"), self.include("planner.md", "planner.md"),
                self.include("result.md", "result.md")]
        result = self.ws.read("result.md") or ""
        if self.meta["steps"]["result"].get("empty") or not result.strip():
            body.append("NOTE: the result is EMPTY: the execution produced no answer and no tool output. "
                        "Say so in the review.")
        body.append("End with the verdict line: `VERDICT: complete`, `VERDICT: continue` or `VERDICT: unsafe` "
                    "(this is loop %d of %d)." % (self.meta["loop"], self.max_loops))
        text = self.generate("reviewer", body + [REPLY_RULE % "reviewer.md"])
        rec["verdict"] = parse_verdict(text)
        return text + "\n"

    def make_final_report(self, rec, partial=False):
        body = [self.include("goal.md", "goal.md")]
        for old in self.meta["loops"]:
            n = str(old["loop"])
            body.append(self.include("the review of loop %s" % n, "loops", n, "reviewer.md"))
        body += [self.include("planner.md (the last loop)", "planner.md"),
                 self.include("result.md (the last loop)", "result.md"),
                 self.include("reviewer.md (the last loop)", "reviewer.md")]
        if partial:
            body.append("PARTIAL: the maximum of %d loop(s) was reached before the goal was complete. Say so at "
                        "the top of the report (in the user's language) and say what is missing." % self.max_loops)
        rec["partial"] = partial
        text = self.generate("final_report", body + [REPLY_RULE % "final_report.md"])
        return (PARTIAL_MARK % self.max_loops + "\n\n" if partial else "") + text + "\n"


def run_agent_mode(args, cfg):
    if args.max_loops < 1:
        raise g.UserError("--max-loops must be 1 or more")
    if args.resume or args.cont:
        raise g.UserError("--resume/--continue do not apply to --agent: it resumes from its workspace")
    return AgentRun(args, cfg, Workspace(agent_dir())).run()


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
