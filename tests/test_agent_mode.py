"""Agent mode (`grok-detailed --agent`): plan -> execute -> review through
markdown files, restart-safe. Every test drives the real script against the fake API
and asserts on the requests it sent and the workspace files it left."""
import hashlib
import json
import re
import signal
import stat
import subprocess
import sys

import pytest

from conftest import GROK_DETAILED
from fakeapi import answer, drop, error, hang, reply, tools
from ptyrun import PtyProcess, default_sigint

GOAL = "Count the files in the work directory"
GOAL_REPLY = answer("# Goal\nCount the files; done when the number is reported.")
REPORT = answer("# Report\nThere are 3 files.")


def loop_replies(verdict, n=1):
    """The five chat replies of one loop: planner, executor, execution (a tool round and
    the answer), reviewer. The bash call appends to runs.txt, so executions can be counted."""
    return [answer("# Plan %d\n1. count the files" % n),
            answer("# Execution prompt %d\nRun ls and count." % n),
            tools(("bash", {"command": "echo ran >> runs.txt; echo tool-output-%d" % n})),
            answer("Counted: 3 files (loop %d)" % n),
            answer("Review of loop %d: the count is verified.\n\nVERDICT: %s" % (n, verdict))]


def full_run():
    return [GOAL_REPLY] + loop_replies("complete") + [REPORT]


@pytest.fixture
def agent(run, isolated_env):
    """agent(goal, *flags, env=None, input=None) runs `grok-detailed --agent [goal] flags`
    in its own session (no controlling terminal: nothing can block on /dev/tty)."""

    def _agent(goal=None, *flags, env=None, input=None, timeout=60):
        argv = [sys.executable, str(GROK_DETAILED), "--agent"] + ([goal] if goal else []) + list(flags)
        kw = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run(argv, env=run.env(**(env or {})), capture_output=True, text=True,
                              errors="replace", timeout=timeout, start_new_session=True, **kw)

    return _agent


@pytest.fixture
def ws(isolated_env):
    return isolated_env.home / ".grok_agent"


def meta_of(ws):
    return json.loads((ws / "meta.json").read_text())


def runs(isolated_env):
    p = isolated_env.work / "runs.txt"
    return len(p.read_text().splitlines()) if p.exists() else 0


def steps_sent(fake, start=0):
    """The step of every request that opened a step's conversation ([system, step prompt])."""
    out = []
    for r in fake.chat_requests()[start:]:
        if len(r.messages) == 2:
            m = re.match(r"\[agent mode\] step: (\w+)(?: · loop (\d+))?", r.messages[1]["content"])
            assert m, r.messages[1]["content"][:200]
            out.append(m.group(1) + (m.group(2) or ""))
    return out


ONE_LOOP = ["interviewer", "planner1", "executor1", "execution1", "reviewer1", "reporter"]
# The step each request of full_run() belongs to (the execution takes two requests).
REQUEST_STEPS = ["interviewer", "planner1", "executor1", "execution1", "execution1", "reviewer1", "reporter"]
META_STEP = {"interviewer": "goal", "planner1": "planner", "executor1": "executor", "execution1": "result",
             "reviewer1": "reviewer", "reporter": "final_report"}


def step_prompt(fake, step, start=0):
    for r in fake.chat_requests()[start:]:
        if len(r.messages) == 2 and r.messages[1]["content"].startswith("[agent mode] step: " + step):
            return r.messages[1]["content"]
    raise AssertionError("no %s step was sent" % step)


# ---------------------------------------------------------------- a whole run
def test_full_run_writes_every_file_and_prints_the_report(agent, fake, ws, isolated_env):
    fake.add(*full_run())
    r = agent(GOAL, "-y")
    assert r.returncode == 0, r.stderr
    assert steps_sent(fake) == ONE_LOOP and fake.pending() == 0
    for name in ("Agents.md", "interview.md", "goal.md", "planner.md", "executor.md", "result.md",
                 "reviewer.md", "final_report.md", "meta.json"):
        assert (ws / name).is_file(), name
    assert stat.S_IMODE(ws.stat().st_mode) == 0o700
    # Each file is the `response` of its step, and feeds the next step.
    assert (ws / "planner.md").read_text() == "# Plan 1\n1. count the files\n"
    assert "# Plan 1" in step_prompt(fake, "executor")
    assert "Run ls and count." in step_prompt(fake, "execution")
    assert (ws / "goal.md").read_text().startswith("> " + GOAL + "\n\n# Goal\n")
    # result.md: the raw output of a normal engine turn: the answer, the tool call, its output.
    result = (ws / "result.md").read_text()
    assert "Counted: 3 files (loop 1)" in result and "bash echo ran >> runs.txt" in result
    assert "tool-output-1" in result and runs(isolated_env) == 1
    assert fake.chat_requests()[4].last_user.startswith("Tool results")
    assert "tool-output-1" in step_prompt(fake, "reviewer")
    meta = meta_of(ws)
    norm = " ".join(GOAL.split()).casefold()
    assert meta["goal_hash"] == hashlib.sha256(norm.encode()).hexdigest()
    assert meta["status"] == "complete" and meta["loop"] == 1 and meta["step"] == "final_report"
    assert meta["steps"]["reviewer"]["verdict"] == "complete"
    for step in ("goal", "planner", "executor", "result", "reviewer", "final_report"):
        assert meta["steps"][step]["started"] <= meta["steps"][step]["finished"]
    assert meta["cost_usd"] > 0
    # The display: a header per step with loop, step, cost and context; then the report.
    assert "── agent · loop 1/5 · planner → planner.md · $" in r.stdout
    assert re.search(r"execution → result\.md · \$0\.\d{4} · context \d+\.\d%", r.stdout)
    assert r.stdout.rstrip().endswith("final report: %s\n\n# Report\nThere are 3 files." % (ws / "final_report.md"))


def test_one_agent_runs_all_steps_with_the_controller_as_system_prompt(agent, fake, ws):
    fake.add(*full_run())
    assert agent(GOAL, "-y").returncode == 0
    reqs = fake.chat_requests()
    systems = {q.messages[0]["content"] for q in reqs}
    assert len(systems) == 1 and "Agents.md: the agent controller" in systems.pop()
    assert len({q.headers["x-grok-conv-id"] for q in reqs}) == 1
    assert all(q.json["response_format"]["json_schema"]["name"] == "grok_detailed_reply" for q in reqs)
    assert fake.connections == 1


def test_review_continue_then_complete_runs_two_loops(agent, fake, ws, isolated_env):
    fake.add(GOAL_REPLY, *loop_replies("continue", 1) + loop_replies("complete", 2) + [REPORT])
    r = agent(GOAL, "-y")
    assert r.returncode == 0, r.stderr
    assert steps_sent(fake) == ["interviewer", "planner1", "executor1", "execution1", "reviewer1",
                                "planner2", "executor2", "execution2", "reviewer2", "reporter"]
    assert runs(isolated_env) == 2
    # The next planner gets the review and the previous plan; loop 1 is archived.
    second_plan = step_prompt(fake, "planner · loop 2")
    assert "Review of loop 1" in second_plan and "# Plan 1" in second_plan
    for name in ("planner.md", "executor.md", "result.md", "reviewer.md"):
        assert (ws / "loops" / "1" / name).is_file()
    assert "tool-output-1" in (ws / "loops" / "1" / "result.md").read_text()
    assert "tool-output-2" in (ws / "result.md").read_text()
    meta = meta_of(ws)
    assert meta["loop"] == 2 and meta["status"] == "complete"
    assert [h["verdict"] for h in meta["loops"]] == ["continue"]
    assert "Review of loop 1" in step_prompt(fake, "reporter")


def test_max_loops_reached_gives_a_partial_report_and_exit_3(agent, fake, ws):
    fake.add(GOAL_REPLY, *loop_replies("continue", 1) + loop_replies("continue", 2)
             + [answer("# Teilbericht\nnoch offen")])
    r = agent(GOAL, "-y", "--max-loops", "2")
    assert r.returncode == 3, r.stderr
    assert steps_sent(fake)[-2:] == ["reviewer2", "reporter"]
    assert "PARTIAL: the maximum of 2 loop(s) was reached" in step_prompt(fake, "reporter")
    report = (ws / "final_report.md").read_text()
    assert report.startswith("<!-- grok-agent: partial report: the maximum of 2 loop(s) was reached")
    assert "# Teilbericht" in report
    assert "(partial: the maximum of 2 loops was reached)" in r.stdout and "# Teilbericht" in r.stdout
    assert meta_of(ws)["status"] == "max_loops"
    # Deterministic: the same run again asks nothing and ends the same way ...
    n = len(fake.requests)
    again = agent(GOAL, "-y", "--max-loops", "2")
    assert again.returncode == 3 and len(fake.requests) == n and "# Teilbericht" in again.stdout
    # ... and more loops continue where it stopped.
    fake.add(*loop_replies("complete", 3) + [REPORT])
    more = agent(None, "-y", "--max-loops", "3")
    assert more.returncode == 0, more.stderr
    assert steps_sent(fake, n) == ["planner3", "executor3", "execution3", "reviewer3", "reporter"]
    assert (ws / "final_report.md").read_text() == "# Report\nThere are 3 files.\n"


# ----------------------------------------------------------- restart safety
@pytest.mark.parametrize("k", range(len(REQUEST_STEPS)))
def test_failure_at_any_step_then_rerun_resumes_without_repeating_a_step(agent, fake, ws, isolated_env, k):
    replies = full_run()
    fake.add(*replies[:k] + [error(400)])
    first = agent(GOAL, "-y")
    assert first.returncode == 1 and "HTTP 400" in first.stderr
    assert "run `grok-detailed --agent` again to resume" in first.stderr
    failed = REQUEST_STEPS[k]
    meta = meta_of(ws)
    assert meta["status"] == "failed" and meta["step"] == META_STEP[failed]
    assert "finished" not in meta["steps"][META_STEP[failed]]
    sent_first = len(fake.requests)
    fake.add(*replies[REQUEST_STEPS.index(failed):])
    second = agent(None, "-y")              # no goal: resumes the one in the workspace
    assert second.returncode == 0, second.stderr
    assert fake.pending() == 0
    # Every step was sent once, but the interrupted one twice; nothing before it again.
    expected = list(ONE_LOOP)
    expected.insert(expected.index(failed), failed)
    assert steps_sent(fake) == expected
    assert steps_sent(fake, sent_first)[0] == failed
    # The tool ran again only when the execution itself was interrupted after running it.
    assert runs(isolated_env) == (2 if k == 4 else 1)
    assert meta_of(ws)["status"] == "complete"


def test_dropped_connection_fails_with_exit_2_and_resumes(agent, fake, ws):
    replies = full_run()
    fake.add(*replies[:5] + [drop(), drop()])      # the first drop only makes the client reconnect
    first = agent(GOAL, "-y", env={"GROK_MAX_RETRIES": "0"})
    assert first.returncode == 2 and "dropped" in first.stderr and meta_of(ws)["step"] == "reviewer"
    n = len(fake.requests)
    fake.add(*replies[5:])
    assert agent(GOAL, "-y").returncode == 0
    assert steps_sent(fake, n) == ["reviewer1", "reporter"]


def signalled(run, fake, goal, signum):
    """(exit code, stderr) of `grok-detailed --agent GOAL -y`, sent signum once its second request arrives."""
    proc = subprocess.Popen([sys.executable, str(GROK_DETAILED), "--agent", goal, "-y"], env=run.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=default_sigint)
    try:
        assert fake.wait_for_requests(2)
        proc.send_signal(signum)
        err = proc.communicate(timeout=30)[1]
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_ctrl_c_during_a_step_exits_130_and_resumes_there(run, fake, ws):
    replies = full_run()
    fake.add(replies[0], hang(30))
    code, err = signalled(run, fake, GOAL, signal.SIGINT)
    assert code == 130, err
    assert "interrupted at planner (loop 1)" in err and "Traceback" not in err
    meta = meta_of(ws)
    assert meta["status"] == "interrupted" and meta["step"] == "planner"
    fake.add(*replies[1:])
    again = subprocess.run([sys.executable, str(GROK_DETAILED), "--agent", "-y"], env=run.env(),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                           start_new_session=True)
    assert again.returncode == 0, again.stderr
    assert steps_sent(fake) == ["interviewer", "planner1"] + ONE_LOOP[1:]


def test_same_goal_or_no_goal_after_completion_redoes_nothing(agent, fake, ws):
    fake.add(*full_run())
    assert agent(GOAL, "-y").returncode == 0
    n = len(fake.requests)
    same = agent("  count THE files   in the work directory ", "-y")   # normalised: same hash
    none = agent(None, "-y")
    assert same.returncode == none.returncode == 0 and len(fake.requests) == n
    assert "There are 3 files." in same.stdout and "There are 3 files." in none.stdout


def test_a_new_goal_deletes_the_generated_files_and_starts_over(agent, fake, ws):
    fake.add(GOAL_REPLY, *loop_replies("continue", 1) + loop_replies("complete", 2) + [REPORT])
    assert agent(GOAL, "-y").returncode == 0
    (ws / "Agents.md").write_text((ws / "Agents.md").read_text() + "\nEDITED-BY-USER\n")
    n = len(fake.requests)
    fake.add(answer("# Goal B"), *loop_replies("complete") + [answer("# Report B")])
    r = agent("List the largest file", "-y")
    assert r.returncode == 0, r.stderr
    assert "a new goal: deleting the generated files" in r.stderr
    assert steps_sent(fake, n) == ONE_LOOP
    assert "List the largest file" in step_prompt(fake, "interviewer", n)
    assert not (ws / "loops").exists()                       # loop 2 of the old goal is gone
    meta = meta_of(ws)
    assert meta["goal"] == "List the largest file" and meta["loop"] == 1 and meta["loops"] == []
    assert (ws / "goal.md").read_text().startswith("> List the largest file\n\n# Goal B")
    assert "EDITED-BY-USER" in (ws / "Agents.md").read_text()     # static prompts are kept


# ----------------------------------------------------------- error handling
def test_missing_file_is_regenerated_alone(agent, fake, ws, isolated_env):
    fake.add(*full_run())
    assert agent(GOAL, "-y").returncode == 0
    (ws / "planner.md").unlink()
    n = len(fake.requests)
    fake.add(answer("# Plan again"))
    r = agent(None, "-y")
    assert r.returncode == 0, r.stderr
    assert "planner.md is missing: regenerating it" in r.stderr
    assert steps_sent(fake, n) == ["planner1"] and fake.pending() == 0
    assert (ws / "planner.md").read_text() == "# Plan again\n" and runs(isolated_env) == 1


def test_corrupted_meta_json_is_recreated_from_the_files(agent, fake, ws, isolated_env):
    replies = full_run()
    fake.add(*replies[:5] + [error(400)])                   # stops at the reviewer
    assert agent(GOAL, "-y").returncode == 1
    (ws / "meta.json").write_text('{"version": 1, "goal": ')
    n = len(fake.requests)
    fake.add(*replies[5:])
    r = agent(None, "-y")
    assert r.returncode == 0, r.stderr
    assert "meta.json is invalid" in r.stderr
    assert "recovered the state from the files present: loop 1, next step reviewer" in r.stderr
    assert steps_sent(fake, n) == ["reviewer1", "reporter"] and runs(isolated_env) == 1
    meta = meta_of(ws)
    assert meta["goal"] == GOAL and meta["status"] == "complete" and meta["steps"]["reviewer"]["verdict"] == "complete"


def test_corrupted_meta_json_without_a_goal_md_starts_over(agent, fake, ws):
    fake.add(*full_run()[:2] + [error(400)])
    assert agent(GOAL, "-y").returncode == 1
    (ws / "meta.json").write_text("[]")
    (ws / "goal.md").unlink()
    n = len(fake.requests)
    fake.add(*full_run())
    r = agent(GOAL, "-y")
    assert r.returncode == 0 and "starting over" in r.stderr
    assert steps_sent(fake, n) == ONE_LOOP


def test_unsafe_verdict_stops_the_workflow_with_exit_3(agent, fake, ws):
    fake.add(GOAL_REPLY, *loop_replies("unsafe"))
    r = agent(GOAL, "-y")
    assert r.returncode == 3
    assert "unsafe: the reviewer judged the work unsafe in loop 1" in r.stderr and "Traceback" not in r.stderr
    assert not (ws / "final_report.md").exists() and fake.pending() == 0
    meta = meta_of(ws)
    assert meta["status"] == "stopped" and meta["steps"]["reviewer"]["verdict"] == "unsafe"
    n = len(fake.requests)
    again = agent(None, "-y")                               # it stays stopped
    assert again.returncode == 3 and "unsafe" in again.stderr and len(fake.requests) == n


def test_refused_tool_stops_the_workflow_with_exit_3(agent, fake, ws, isolated_env):
    fake.add(*full_run())
    r = agent(GOAL)                                         # no -y and no terminal: bash is refused
    assert r.returncode == 3
    assert "unsafe: the bash call" in r.stderr and "was refused, so the workflow stops" in r.stderr
    assert runs(isolated_env) == 0 and not (ws / "result.md").exists()
    meta = meta_of(ws)
    assert meta["status"] == "stopped" and meta["step"] == "result"
    assert steps_sent(fake) == ONE_LOOP[:4] and len(fake.chat_requests()) == 4


def test_empty_result_is_noted_in_the_review(agent, fake, ws):
    bad = [reply("not json at all")] * 3                    # the execution turn breaks down
    fake.add(GOAL_REPLY, answer("# Plan"), answer("# Prompt"), *bad,
             answer("Nothing was executed.\n\nVERDICT: complete"), REPORT)
    r = agent(GOAL, "-y")
    assert r.returncode == 0, r.stderr
    assert meta_of(ws)["steps"]["result"]["empty"] is True
    assert "broke the JSON contract 3 times" in (ws / "result.md").read_text()
    assert "NOTE: the result is EMPTY" in step_prompt(fake, "reviewer")


def test_cost_limit_covers_the_whole_run_across_restarts(agent, fake, ws):
    usage = {"cost_in_usd_ticks": 3 * 10 ** 7}              # $0.003 a call
    fake.add(answer("# Goal", usage=usage), answer("# Plan", usage=usage), answer("# Prompt", usage=usage))
    r = agent(GOAL, "-y", env={"COST_LIMIT": "0.005"})
    assert r.returncode == 3 and "cost limit reached" in r.stderr
    assert len(fake.chat_requests()) == 2 and abs(meta_of(ws)["cost_usd"] - 0.006) < 1e-9
    again = agent(None, "-y", env={"COST_LIMIT": "0.005"})
    assert again.returncode == 3 and "cost limit reached" in again.stderr
    assert len(fake.chat_requests()) == 2                   # the carried-over cost is over the limit


def test_cost_limit_reached_during_the_execution_stops_the_run(agent, fake, ws):
    usage = {"cost_in_usd_ticks": 3 * 10 ** 7}
    fake.add(*[answer("# step", usage=usage)] * 3, tools(("list_files", {}), usage=usage), answer("never"))
    r = agent(GOAL, "-y", env={"COST_LIMIT": "0.011"})
    assert r.returncode == 3 and "cost limit reached" in r.stderr
    assert len(fake.chat_requests()) == 4 and not (ws / "result.md").exists()
    assert meta_of(ws)["status"] == "failed" and meta_of(ws)["step"] == "result"


def test_review_without_a_verdict_line_counts_as_continue(agent, fake, ws):
    fake.add(GOAL_REPLY, *loop_replies("complete")[:4], answer("Looks fine, I think."), REPORT)
    r = agent(GOAL, "-y", "--max-loops", "1")
    assert r.returncode == 3 and "reviewer.md has no VERDICT line: taking it as `continue`" in r.stderr
    assert meta_of(ws)["status"] == "max_loops"


# ------------------------------------------------------------------ language
def test_german_goal_passes_the_language_rule_and_the_goal_verbatim(agent, fake, ws):
    goal = "Zähle die Dateien im Arbeitsverzeichnis und schreibe das Ergebnis auf – größte zuerst"
    fake.add(answer("# Ziel\nDateien zählen"), *loop_replies("complete") + [answer("# Bericht\nFertig")])
    r = agent(goal, "-y")
    assert r.returncode == 0, r.stderr
    reqs = fake.chat_requests()
    assert len(reqs) == 7
    for q in reqs:
        prompt = q.messages[1]["content"]
        assert "THE USER'S WORDS (verbatim):\n<<<\n%s\n>>>" % goal in prompt
        assert "LANGUAGE: write the file and every message in the language of the user's own words" in prompt
    assert "never in English unless the user wrote English" in reqs[0].messages[1]["content"]
    assert (ws / "goal.md").read_text().startswith("> " + goal)
    assert meta_of(ws)["goal"] == goal
    assert "# Bericht\nFertig" in r.stdout


# ----------------------------------------------------------- the workspace
def test_workspace_defaults_to_grok_agent_under_home(agent, fake, isolated_env):
    fake.add(*full_run())
    assert agent(GOAL, "-y").returncode == 0
    ws = isolated_env.home / ".grok_agent"
    assert stat.S_IMODE(ws.stat().st_mode) == 0o700 and (ws / "final_report.md").is_file()
    assert "Agents.md: the agent controller" in (ws / "Agents.md").read_text()
    assert "interview.md: the goal generator" in (ws / "interview.md").read_text()


def test_grok_agent_dir_overrides_the_workspace(agent, fake, isolated_env, tmp_path):
    fake.add(*full_run())
    custom = tmp_path / "elsewhere" / "ws"
    assert agent(GOAL, "-y", env={"GROK_AGENT_DIR": str(custom)}).returncode == 0
    assert (custom / "final_report.md").is_file() and not (isolated_env.home / ".grok_agent").exists()


def test_static_prompts_are_read_from_the_workspace_and_recreated(agent, fake, ws):
    ws.mkdir(mode=0o700)
    (ws / "Agents.md").write_text("# my controller\nRULE-FROM-THE-USER\n")
    fake.add(*full_run())
    r = agent(GOAL, "-y")
    assert r.returncode == 0
    assert "interview.md was missing: recreated it" in r.stderr
    assert all("RULE-FROM-THE-USER" in q.messages[0]["content"] for q in fake.chat_requests())
    assert "interview.md: the goal generator" in step_prompt(fake, "interviewer")
    assert (ws / "Agents.md").read_text() == "# my controller\nRULE-FROM-THE-USER\n"


def test_without_a_terminal_the_interview_asks_no_questions(agent, fake, ws):
    fake.add(tools(("ask_user", {"question": "Which directory?", "options": ["work", "home"]})), *full_run())
    assert agent(GOAL, "-y").returncode == 0
    assert "QUESTIONS: nobody can answer now" in step_prompt(fake, "interviewer")
    assert "no user available in this mode" in fake.chat_requests()[1].last_user


def test_goal_from_stdin_and_no_goal_at_all(agent, fake, ws):
    r = agent(None, "-y")
    assert r.returncode == 1 and "no goal" in r.stderr and not fake.requests
    fake.add(*full_run())
    r = agent(None, "-y", input=GOAL + "\n")
    assert r.returncode == 0 and meta_of(ws)["goal"] == GOAL


def test_bad_max_loops_is_a_usage_error(agent, fake):
    r = agent(GOAL, "--max-loops", "0")
    assert r.returncode == 1 and "--max-loops must be 1 or more" in r.stderr and not fake.requests


def test_interview_asks_numbered_questions_at_the_terminal(run, fake, ws, isolated_env):
    fake.add(tools(("ask_user", {"question": "Which directory?", "options": ["the work dir", "home"]})),
             *full_run())
    argv = [sys.executable, str(GROK_DETAILED), "--agent", GOAL, "-y"]
    with PtyProcess(argv, run.env(), isolated_env.work) as p:
        p.expect(r"1\) the work dir\s+2\) home", plain=True)
        p.expect(r"answer \(number or text\): ", plain=True)
        p.send("1\n")
        assert p.wait(30) == 0, p.plain_output[-2000:]
    assert "QUESTIONS: the user is at the terminal" in step_prompt(fake, "interviewer")
    assert "the user answered: the work dir" in fake.chat_requests()[1].last_user
    assert "There are 3 files." in p.plain_output
