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
