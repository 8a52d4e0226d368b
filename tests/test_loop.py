"""The tool loop: parallel tools, self-correction, the
iteration limit, project rules and runtime info, and compaction in the middle of a tool loop."""
import datetime
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

import pytest

from conftest import GROK, GROK_DETAILED, ROOT
from fakeapi import answer, error, reply, tools
from ptyrun import PtyProcess


def stamps(i):
    """A bash command that records its start and end time (seconds) in start_i / end_i."""
    return "date +%%s.%%N > start_%d; sleep 1; date +%%s.%%N > end_%d" % (i, i)


def read_float(path):
    return float(Path(path).read_text().strip())


def sections(text):
    """{number: (tool, body)} of a 'Tool results' message."""
    out = {}
    for m in re.finditer(r"^\[(\d+)\] (\w+) [^\n]*\n(.*?)(?=^\[\d+\] \w+ |^\[Self-correction\]|^\[Limit\]|\Z)",
                         text, re.S | re.M):
        out[int(m.group(1))] = (m.group(2), m.group(3).strip())
    return out


def session_file(home):
    files = list((home / ".local" / "share" / "grok-agent" / "sessions").glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------- parallel tools

def test_three_sleeping_commands_overlap(run, fake, isolated_env):
    fake.add(tools(*[("bash", {"command": stamps(i)}) for i in range(3)]), answer("done"))
    p = run("-p", "go", "-y")
    assert p.returncode == 0, p.stderr
    work = isolated_env.work
    spans = [(read_float(work / ("start_%d" % i)), read_float(work / ("end_%d" % i))) for i in range(3)]
    overlapping = sum(1 for a in range(3) for b in range(a + 1, 3)
                      if spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1])
    assert overlapping == 3, spans          # run one after another, no two would overlap
    assert max(s for s, _ in spans) < min(e for _, e in spans)      # all three ran at one moment


def test_results_come_back_in_call_order_when_the_first_finishes_last(run, fake, isolated_env):
    (isolated_env.work / "notes.txt").write_text("from the file\n")
    fake.add(tools(("bash", {"command": "sleep 0.8; echo first; date +%s.%N > end_1"}),
                   ("bash", {"command": "echo second; date +%s.%N > end_2"}),
                   ("read_file", {"path": "notes.txt"})), answer("done"))
    p = run("-p", "go", "-y", "--format", "json")
    assert p.returncode == 0, p.stderr
    work = isolated_env.work
    assert read_float(work / "end_1") > read_float(work / "end_2")      # the first call did finish last
    results = fake.chat_requests()[1].last_user
    assert results.startswith("Tool results:")
    assert sections(results) == {1: ("bash", "first"), 2: ("bash", "second"), 3: ("read_file", "from the file")}
    # the event stream reports each tool as it finishes, every line whole
    events = [json.loads(line) for line in p.stdout.splitlines()]
    used = [e["toolCall"]["id"] for e in events if e["type"] == "tool_use"]
    assert sorted(used) == ["call_1_1", "call_1_2", "call_1_3"] and used[-1] == "call_1_1"


def test_parallel_tools_print_whole_lines_in_every_mode(run, fake):
    n = 8
    cmds = ["for i in $(seq 300); do echo tool%d-line$i; done" % i for i in range(n)]
    fake.add(tools(*[("bash", {"command": c}) for c in cmds]), answer("done"))
    p = run("-p", "go", "-y", "--format", "json")
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]       # a garbled line fails here
    uses = {e["toolCall"]["id"]: e for e in events if e["type"] == "tool_use"}
    assert len(uses) == n
    for i in range(n):
        out = uses["call_1_%d" % (i + 1)]["toolResult"]["output"].splitlines()
        assert out == ["tool%d-line%d" % (i, j) for j in range(1, 301)]
    # text mode: one progress line per tool on stderr, the answer alone on stdout
    fake.add(tools(*[("bash", {"command": c}) for c in cmds]), answer("done"))
    p = run("-p", "go", "-y")
    assert p.returncode == 0 and p.stdout == "done\n"
    assert sorted(p.stderr.splitlines()) == sorted("[bash] " + c for c in cmds)


def test_minimal_mode_shows_one_line_per_tool_in_call_order(run, fake):
    cmds = ["sleep 0.%d; for i in $(seq 100); do echo out%d; done" % (3 - i, i) for i in range(3)]
    fake.add(tools(*[("bash", {"command": c}) for c in cmds], ("list_files", {})), answer("all done"))
    p = run("-y", input="go\n")
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stdout.splitlines() if line.strip()]
    assert lines == ["[bash] " + c for c in cmds] + ["[list_files] .", "all done"]


def test_approvals_and_ask_user_stay_serial_and_come_first(run, fake, isolated_env):
    """Questions come one at a time in call order, before any tool runs; a denial is a failed call."""
    work = isolated_env.work
    fake.add(tools(("bash", {"command": "touch ran_a"}),
                   ("ask_user", {"question": "Which colour?", "options": ["red", "blue"]}),
                   ("bash", {"command": "touch ran_b"})), answer("all done"))
    with PtyProcess([sys.executable, str(GROK)], run.env(), work) as p:
        p.expect(r"> ")
        p.send("go\n")
        p.expect(r"touch ran_a\s+run it\? \[y\]es / \[N\]o / \[a\]lways: ", plain=True)
        assert "Which colour?" not in p.plain_output and "touch ran_b" not in p.plain_output
        p.send("y\n")
        p.expect(r"Which colour\?\s+1\) red\s+2\) blue\s+answer \(number or text\): ", plain=True)
        assert "touch ran_b" not in p.plain_output
        assert not (work / "ran_a").exists()        # nothing runs while a question is open
        p.send("2\n")
        p.expect(r"touch ran_b\s+run it\? ", plain=True)
        assert not (work / "ran_a").exists()
        p.send("n\n")
        p.expect(r"all done\s+> ", plain=True)
        p.sendeof()
        assert p.wait() == 0
    assert (work / "ran_a").exists() and not (work / "ran_b").exists()
    text = fake.chat_requests()[1].last_user
    results = sections(text)
    assert [results[i][0] for i in (1, 2, 3)] == ["bash", "ask_user", "bash"]
    assert results[2][1] == "the user answered: blue" and results[3][1].startswith("denied: ")
    assert "[Self-correction] These tool calls failed: [3] bash (denied: " in text


def test_ctrl_c_stops_all_parallel_tools_and_keeps_the_session(run, fake, isolated_env):
    work = isolated_env.work
    fake.add(tools(*[("bash", {"command": "echo $$ > pid_%d; exec sleep 30" % i}) for i in range(3)]),
             answer("still here"))
    with PtyProcess([sys.executable, str(GROK), "-y"], run.env(), work) as p:
        p.expect(r"> ")
        p.send("go\n")
        for i in range(3):
            p.expect(r"\[bash\] echo \$\$ > pid_%d" % i, plain=True)
        deadline = time.monotonic() + 10
        while not all((work / ("pid_%d" % i)).exists() and (work / ("pid_%d" % i)).read_text().strip()
                      for i in range(3)):
            assert time.monotonic() < deadline, "the commands did not start"
            time.sleep(0.05)
        pids = [int((work / ("pid_%d" % i)).read_text()) for i in range(3)]
        p.sendintr()
        p.expect(r"\(cancelled\)", plain=True)
        p.expect(r"> ")
        p.send("again\n")
        p.expect(r"still here\s+> ", plain=True)
        p.sendeof()
        assert p.wait() == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert "Traceback" not in p.plain_output
    msgs = fake.chat_requests()[1].messages
    assert [m["role"] for m in msgs[1:]] == ["user", "assistant", "user", "assistant", "user"]
    assert "cancelled the tool calls" in msgs[3]["content"]


# --------------------------------------------------------------------------- self-correction

def test_self_correction_note_names_each_failed_call(run, fake):
    fake.add(tools(("bash", {"command": "echo partial; exit 3"}),
                   ("read_file", {"path": "missing.txt"}),
                   ("bash", {"command": "echo fine"}),
                   ("bash", {"command": "sleep 5"})), answer("done"))
    p = run("-p", "go", "-y", env={"GROK_BASH_TIMEOUT": "0.5"})
    assert p.returncode == 0, p.stderr
    text = fake.chat_requests()[1].last_user
    note = text[text.index("[Self-correction]"):]
    assert note.startswith("[Self-correction] These tool calls failed: [1] bash (exit code 3); "
                           "[2] read_file (error: no such file: ")
    assert "[4] bash (timed out after 0.5s" in note
    assert "[3]" not in note
    assert "work out what went wrong and adjust" in note
    assert text.count("[Self-correction]") == 1 and text.rstrip().endswith("or another tool.")


def test_no_self_correction_note_when_every_call_succeeds(run, fake, isolated_env):
    (isolated_env.work / "a.txt").write_text("alpha")
    fake.add(tools(("bash", {"command": "echo ok"}), ("read_file", {"path": "a.txt"}), ("list_files", {})),
             tools(("bash", {"command": "true"})), answer("done"))
    p = run("-p", "go", "-y")
    assert p.returncode == 0, p.stderr
    for req in fake.chat_requests()[1:]:
        assert req.last_user.startswith("Tool results:") and "[Self-correction]" not in req.last_user
    assert not any("Self-correction" in json.dumps(r.messages) for r in fake.chat_requests())


# --------------------------------------------------------------------------- iteration limit

def keep_asking(fake, n):
    fake.add(*[tools(("bash", {"command": "echo round >> rounds"})) for _ in range(n)])


def test_iteration_limit_stops_headless_with_exit_3(run, fake, isolated_env):
    keep_asking(fake, 5)
    p = run("-p", "go", "-y", env={"GROK_MAX_ITERATIONS": "2"})
    assert p.returncode == 3, p.stderr
    assert "tool round limit reached" in p.stderr and "after 2 rounds" in p.stderr
    assert "GROK_MAX_ITERATIONS" in p.stderr and "Traceback" not in p.stderr
    assert p.stdout == ""
    reqs = fake.chat_requests()
    assert len(reqs) == 3 and fake.pending() == 2       # two rounds ran; the third reply's tools did not
    assert (isolated_env.work / "rounds").read_text().splitlines() == ["round", "round"]
    assert "[Limit]" not in reqs[1].last_user
    assert "[Limit] That was the last tool round allowed in this turn (2)" in reqs[2].last_user


def test_iteration_limit_in_json_ends_with_an_error_event(run, fake):
    keep_asking(fake, 3)
    p = run("-p", "go", "-y", "--format", "json", "--max-tool-rounds", "1", env={"GROK_MAX_ITERATIONS": "9"})
    assert p.returncode == 3
    events = [json.loads(line) for line in p.stdout.splitlines()]
    assert events[-1]["type"] == "error" and "tool round limit reached" in events[-1]["message"]
    assert len(fake.chat_requests()) == 2           # the flag wins over the variable


def test_a_model_that_answers_after_the_last_round_note_succeeds(run, fake):
    fake.add(tools(("bash", {"command": "echo step"})), answer("partial answer: one step done"))
    p = run("-p", "go", "-y", "--max-tool-rounds", "1")
    assert p.returncode == 0 and p.stdout == "partial answer: one step done\n"


def test_zero_means_no_limit_and_default_is_25(run, fake):
    fake.add(*[tools(("list_files", {})) for _ in range(30)], answer("done"))
    p = run("-p", "go", env={"GROK_MAX_ITERATIONS": "0"})
    assert p.returncode == 0 and p.stdout == "done\n", p.stderr
    assert len(fake.chat_requests()) == 31
    assert not any("[Limit]" in (r.last_user or "") for r in fake.chat_requests())
    fake.add(*[tools(("list_files", {})) for _ in range(30)])
    p = run("-p", "go")
    assert p.returncode == 3 and "after 25 rounds" in p.stderr
    assert len(fake.chat_requests()) == 31 + 26


def test_iteration_limit_in_the_repl_ends_the_turn_not_the_session(run, fake):
    keep_asking(fake, 2)
    fake.add(answer("hello again"))
    p = run("-y", input="go\nhello\n", env={"GROK_MAX_ITERATIONS": "1"})
    assert p.returncode == 3          # piped: the session went on, the exit code tells a turn failed
    assert "error: tool round limit reached" in p.stderr and "hello again" in p.stdout
    last = fake.chat_requests()[-1].messages
    assert last[-1] == {"role": "user", "content": "hello"}
    assert [m["role"] for m in last[1:]] == ["user", "assistant", "user", "assistant", "user"]


# --------------------------------------------------------------------------- rules, runtime, skills

def make_repo(base, git_is_file=False):
    """base/outer/repo (git root) /sub/deeper; rules at every level, one above the root, one aside."""
    outer = base / "outer"
    repo = outer / "repo"
    deeper = repo / "sub" / "deeper"
    deeper.mkdir(parents=True)
    (repo / "other").mkdir()
    if git_is_file:
        (repo / ".git").write_text("gitdir: /somewhere/else\n")     # a worktree or submodule
    else:
        (repo / ".git").mkdir()
    (outer / "AGENTS.md").write_text("ABOVE_THE_ROOT\n")
    (repo / "AGENTS.md").write_text("ROOT_AGENTS\n")
    (repo / "GROK.md").write_text("ROOT_GROK\n")
    (repo / "other" / "AGENTS.md").write_text("SIBLING\n")
    (repo / "sub" / "AGENTS.md").write_text("SUB_AGENTS\n")
    (deeper / "GROK.md").write_text("DEEPER_GROK\n")
    return repo, deeper


@pytest.mark.parametrize("git_is_file", [False, True])
def test_project_rules_user_wide_first_then_root_down_to_cwd(run, fake, isolated_env, git_is_file):
    (isolated_env.home / ".grok").mkdir()
    (isolated_env.home / ".grok" / "AGENTS.md").write_text("USER_WIDE\n")
    repo, deeper = make_repo(isolated_env.work, git_is_file)
    fake.add(answer("ok"))
    p = run("-p", "hi", "--cwd", deeper)
    assert p.returncode == 0, p.stderr
    system = fake.chat_requests()[0].messages[0]["content"]
    order = ["USER_WIDE", "ROOT_AGENTS", "ROOT_GROK", "SUB_AGENTS", "DEEPER_GROK"]
    assert [system.index(m) for m in order] == sorted(system.index(m) for m in order)
    assert "ABOVE_THE_ROOT" not in system and "SIBLING" not in system
    for path in (isolated_env.home / ".grok" / "AGENTS.md", repo / "AGENTS.md", repo / "GROK.md",
                 repo / "sub" / "AGENTS.md", deeper / "GROK.md"):
        assert "\nFrom %s:\n" % path in system
    assert system.index("From %s:" % (repo / "AGENTS.md")) < system.index("ROOT_AGENTS")


def test_outside_a_repository_only_the_working_directory_is_read(run, fake, isolated_env):
    here = isolated_env.work / "a" / "b"
    here.mkdir(parents=True)
    (isolated_env.work / "a" / "AGENTS.md").write_text("PARENT_RULES\n")
    (here / "AGENTS.md").write_text("HERE_RULES\n")
    fake.add(answer("ok"))
    assert run("-p", "hi", cwd=here).returncode == 0
    system = fake.chat_requests()[0].messages[0]["content"]
    assert "HERE_RULES" in system and "PARENT_RULES" not in system


def test_rules_are_capped_per_file_and_in_all(run, fake, isolated_env):
    repo = isolated_env.work / "repo"
    d = repo / "a" / "b" / "c"
    d.mkdir(parents=True)
    (repo / ".git").mkdir()
    # 20,000 bytes, a two-byte character straddling the 8,000-byte cut
    (repo / "AGENTS.md").write_bytes(b"ROOT_START " + "\u00e9".encode() * 9000 + b" ROOT_END")
    (repo / "a" / "AGENTS.md").write_text("A_START " + "a" * 9000 + " A_END")
    (repo / "a" / "b" / "AGENTS.md").write_text("B_START " + "b" * 9000 + " B_END")
    (repo / "a" / "b" / "c" / "AGENTS.md").write_text("C_RULES\n")
    fake.add(answer("ok"))
    assert run("-p", "hi", cwd=d).returncode == 0
    system = fake.chat_requests()[0].messages[0]["content"]
    assert "ROOT_START" in system and "ROOT_END" not in system and "\ufffd" not in system
    assert "[truncated: only the first 8000 of 18020 bytes of this file are included]" in system
    assert "A_START" in system and "A_END" not in system and "B_START" in system and "B_END" not in system
    assert "C_RULES" not in system
    assert "From %s:\n[not included: project rules are capped at 24000 bytes in all]" % (
        repo / "a" / "b" / "c" / "AGENTS.md") in system
    assert len(system.encode()) < 24000 + 6000


def test_runtime_info_is_in_the_system_prompt_once_and_stays_fixed(run, fake, isolated_env):
    before = datetime.date.today().isoformat()
    fake.add(tools(("list_files", {})), answer("one"), answer("two"))
    p = run("-y", input="first\nsecond\n")
    after = datetime.date.today().isoformat()
    assert p.returncode == 0, p.stderr
    reqs = fake.chat_requests()
    system = reqs[0].messages[0]["content"]
    assert system.count("RUNTIME") == 1
    assert before in system or after in system
    assert "%s %s, Python %s" % (platform.system(), platform.release(), platform.python_version()) in system
    assert "- working directory: %s" % isolated_env.work in system
    assert "- shell: the bash tool runs /bin/" in system
    for r in reqs:
        assert r.messages[0] == {"role": "system", "content": system}     # fixed: the prompt cache hits
        assert [m for m in r.messages if m["role"] == "system"] == [r.messages[0]]
        assert not any("RUNTIME" in str(m["content"]) for m in r.messages[1:])


def test_skills_are_listed_by_name_and_description_only(run, fake, isolated_env):
    skills = isolated_env.work / "myskills"
    (skills / "deploy").mkdir(parents=True)
    (skills / "deploy" / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Use to ship a release to the servers.\n---\nBODY_SECRET_STEPS\n")
    fake.add(answer("ok"))
    assert run("-p", "hi", env={"GROK_SKILLS_DIR": skills}).returncode == 0
    system = fake.chat_requests()[0].messages[0]["content"]
    assert "- deploy: Use to ship a release to the servers. (%s)" % (skills / "deploy" / "SKILL.md") in system
    assert "load one with read_file" in system and "BODY_SECRET_STEPS" not in system


# --------------------------------------------------------------------------- compaction

def usage(prompt, completion=50):
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def assert_alternates(messages):
    """system first, then user/assistant turns; every tool-results message follows the reply
    that asked for exactly those calls."""
    assert messages[0]["role"] == "system"
    roles = [m["role"] for m in messages[1:]]
    assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2), roles
    for i, m in enumerate(messages):
        if m["role"] == "user" and str(m["content"]).startswith("Tool results:"):
            asked = json.loads(messages[i - 1]["content"])["tool_calls"]
            got = re.findall(r"^\[(\d+)\] (\w+) ", m["content"], re.M)
            assert got == [(str(n + 1), c["tool"]) for n, c in enumerate(asked)]


@pytest.mark.parametrize("script,summary_model", [(GROK, "grok-3-mini"), (GROK, None),
                                                  (GROK_DETAILED, "grok-3-mini")])
def test_compaction_in_the_middle_of_a_tool_loop_keeps_the_task_going(run, fake, isolated_env, script,
                                                                       summary_model):
    (isolated_env.work / "big.txt").write_text("x" * 20000)
    task = "Read big.txt, then run the three echo commands, then say finished."
    fake.add(tools(("read_file", {"path": "big.txt"}), usage=usage(1000)),
             tools(("bash", {"command": "echo two"}), usage=usage(7000)),
             tools(("bash", {"command": "echo three"}), usage=usage(7100)),
             tools(("bash", {"command": "echo four"}), usage=usage(15500, 100)),   # 78% of 20,000
             reply("SUMMARY: big.txt holds 20000 x; echo two and three ran.", usage=usage(3000, 40)),
             answer("finished", usage=usage(2000)))
    env = {"GROK_CONTEXT_WINDOW": "20000", "GROK_SUMMARY_MODEL": summary_model}
    if script == GROK:
        p = run("-p", task, "-y", env=env)
        assert p.stdout == "finished\n"
    else:
        p = run("-y", input=task + "\n", env=env, script=script)
        assert "finished" in p.stdout
    assert p.returncode == 0, p.stderr
    assert "compacted 3 older messages into a summary" in p.stderr
    reqs = fake.chat_requests()
    assert len(reqs) == 6 and fake.pending() == 0
    summarise, after, before = reqs[4], reqs[5], reqs[3]
    # the summary request: the summary model, no JSON contract, the old part only
    assert summarise.json["model"] == (summary_model or "grok-4.3")
    assert "response_format" not in summarise.json
    transcript = summarise.messages[-1]["content"]
    assert task in transcript and "xxxxxxxxxx" in transcript and "echo two" not in transcript
    # the next request: system + summary + the tail, smaller than before
    assert all(r.json["model"] == "grok-4.3" for r in reqs if r is not summarise)
    msgs = after.messages
    assert msgs[0] == reqs[0].messages[0]
    assert msgs[1]["role"] == "user"
    assert msgs[1]["content"].startswith("[Summary of the earlier conversation, compacted]\nSUMMARY: big.txt")
    assert msgs[1]["content"].endswith("[The request being worked on, verbatim]\n" + task)
    assert msgs[2:6] == before.messages[4:8]
    assert json.loads(msgs[6]["content"])["tool_calls"] == [{"tool": "bash", "args": {"command": "echo four"}}]
    assert sections(msgs[7]["content"]) == {1: ("bash", "four")}
    assert len(msgs) == 8 and len(after.body) < len(before.body) - 15000
    assert_alternates(msgs)
    # the session file records the reset; a resumed session continues from the compacted history
    recs = records(session_file(isolated_env.home))
    resets = [r for r in recs if r["type"] == "reset"]
    assert len(resets) == 1 and resets[0]["messages"][0].pop("kind") == "summary"      # stored, never sent
    assert resets[0]["messages"] == msgs[1:] and all(set(m) == {"role", "content"} for m in msgs)
    kinds = [r.get("kind") for r in recs if r["type"] == "usage"]
    assert kinds.count("compaction") == 1
    if script == GROK:
        fake.add(answer("resumed"))
        sid = session_file(isolated_env.home).stem
        p = run("-p", "next", "--resume", sid, env=env)
        assert p.returncode == 0 and p.stdout == "resumed\n", p.stderr
        resumed = fake.chat_requests()[-1].messages
        assert resumed[:8] == msgs and resumed[-1] == {"role": "user", "content": "next"}
        assert_alternates(resumed)


def test_compaction_counts_tool_results_added_since_the_last_call(run, fake, isolated_env):
    (isolated_env.work / "huge.txt").write_text("y" * 64000)      # ~16,000 tokens: 80% of the window
    fake.add(*[tools(("bash", {"command": "echo %d" % i}), usage=usage(500)) for i in range(3)],
             tools(("read_file", {"path": "huge.txt"}), usage=usage(600)),
             reply("SUMMARY: three echos ran.", usage=usage(300)),
             answer("done", usage=usage(17000)))
    p = run("-p", "go", "-y", env={"GROK_CONTEXT_WINDOW": "20000"})
    assert p.returncode == 0, p.stderr
    reqs = fake.chat_requests()
    assert len(reqs) == 6 and "response_format" not in reqs[4].json
    msgs = reqs[5].messages
    # the tail shrank to the last reply and its (large) result, still a pair
    assert len(msgs) == 4 and msgs[1]["content"].startswith("[Summary")
    assert json.loads(msgs[2]["content"])["tool_calls"][0]["tool"] == "read_file"
    assert msgs[3]["content"].startswith("Tool results:") and "y" * 1000 in msgs[3]["content"]
    assert_alternates(msgs)
    assert "still fill" in p.stderr


def test_no_compaction_below_the_threshold(run, fake):
    fake.add(*[tools(("list_files", {}), usage=usage(1000 * (i + 1))) for i in range(6)], answer("done"))
    p = run("-p", "go", env={"GROK_CONTEXT_WINDOW": "10000"})
    assert p.returncode == 0 and "compacted" not in p.stderr
    assert len(fake.chat_requests()) == 7


def test_a_failing_summary_model_is_named_in_the_error(run, fake):
    fake.add(*[tools(("list_files", {}), usage=usage(100)) for _ in range(3)],
             tools(("list_files", {}), usage=usage(9000)),
             error(404, {"error": "The model nope does not exist"}))
    p = run("-p", "go", env={"GROK_CONTEXT_WINDOW": "10000", "GROK_SUMMARY_MODEL": "nope"})
    assert p.returncode == 1
    assert "compacting the history failed (summary model nope, GROK_SUMMARY_MODEL)" in p.stderr
    assert "Traceback" not in p.stderr


# The cut, in-process on crafted histories (irregular ones too: a failed turn leaves two user
# messages in a row; invalid replies bring corrective messages).

@pytest.fixture
def engine(fake, monkeypatch, isolated_env):
    monkeypatch.setenv("GROK_API_KEY", "xai-test")
    monkeypatch.setenv("GROK_BASE_URL", fake.url)
    monkeypatch.setenv("GROK_CONTEXT_WINDOW", "100000")
    monkeypatch.setenv("GROK_LOOP_DETECTION", "0")       # scripted replies repeat themselves
    sys.path.insert(0, str(ROOT))
    try:
        import grok
    finally:
        sys.path.remove(str(ROOT))
    return grok


def call(*names):
    return {"role": "assistant", "content": json.dumps(
        {"tool_calls": [{"tool": n, "args": {}} for n in names], "response": None, "done": False})}


def results(*names):
    return {"role": "user", "content": "Tool results:\n\n" + "\n\n".join(
        "[%d] %s x\nok" % (i + 1, n) for i, n in enumerate(names))}


def user(text):
    return {"role": "user", "content": text}


def final(text):
    return {"role": "assistant", "content": json.dumps({"tool_calls": [], "response": text, "done": True})}


HISTORIES = [
    [user("t1"), call("bash"), results("bash"), call("bash", "read_file"), results("bash", "read_file"),
     final("a1"), user("t2"), call("list_files"), results("list_files"), call("bash"), results("bash")],
    [user("t1"), user("t1 again after a network error"), call("bash"), results("bash"),
     {"role": "assistant", "content": "not json"}, user("Your last reply broke the JSON contract: x"),
     call("bash", "bash"), results("bash", "bash"), final("done"), user("t2"), call("read_file"),
     results("read_file")],
    [user("t%d" % i) if j == 0 else final("a%d" % i) for i in range(6) for j in range(2)],
]


@pytest.mark.parametrize("history", range(len(HISTORIES)))
@pytest.mark.parametrize("keep", [1, 2, 3, 4, 5, 6, 7, 10])
def test_the_cut_never_separates_results_from_their_reply(engine, fake, history, keep):
    agent = engine.Agent(engine.Config())
    try:
        original = HISTORIES[history]
        agent.messages = agent.messages[:1] + [dict(m) for m in original]
        fake.add(reply("S"))
        done = agent.compact(keep=keep)
        msgs = agent.messages
        if not done:
            assert len(fake.chat_requests()) == 0 and msgs[1:] == original
            return
        tail = msgs[2:]
        assert msgs[1]["role"] == "user" and msgs[1]["content"].startswith("[Summary")
        assert tail and tail[0]["role"] == "assistant" and tail == original[len(original) - len(tail):]
        assert len(tail) >= keep                                # the window is large: no shrinking
        assert len(original) - len(tail) >= 2                  # something was summarised
        for i, m in enumerate(msgs):
            if str(m["content"]).startswith("Tool results:"):
                assert msgs[i - 1]["role"] == "assistant" and '"tool_calls": [{' in msgs[i - 1]["content"]
        roles = [m["role"] for m in msgs]
        assert all(a != b for a, b in zip(roles[1:], roles[2:])), roles
    finally:
        agent.close()


def test_a_command_that_closes_its_output_early_is_waited_for_not_killed(run, fake, isolated_env):
    fake.add(tools(*[("bash", {"command": "echo hi; exec >&- 2>&-; sleep 0.3; touch done_%d" % i})
                     for i in range(3)]), answer("ok"))
    p = run("-p", "go", "-y")
    assert p.returncode == 0, p.stderr
    assert all((isolated_env.work / ("done_%d" % i)).exists() for i in range(3))
    text = fake.chat_requests()[1].last_user
    assert "exit code" not in text and "[Self-correction]" not in text


def test_compact_after_a_turn_keeps_no_request_verbatim(engine, fake):
    agent = engine.Agent(engine.Config(always_approve=True))
    try:
        fake.add(*[tools(("list_files", {})) for _ in range(4)], answer("done"))
        assert agent.run_turn("list it four times") == "done"
        fake.add(reply("S"))
        assert agent.compact() is True                  # as /compact does, after the turn
        assert "[The request being worked on" not in agent.messages[1]["content"]
        assert_alternates(agent.messages)
    finally:
        agent.close()


def test_a_stop_after_the_turn_ended_leaves_its_history_alone(engine, fake):
    agent = engine.Agent(engine.Config(always_approve=True))
    try:
        fake.add(answer("done"))
        assert agent.run_turn("hi") == "done"
        before = [dict(m) for m in agent.messages]
        agent.settle_cancelled()        # a Ctrl-C landing just after run_turn returned, as headless settles it
        assert agent.messages == before
    finally:
        agent.close()


def test_settings_are_read_once_and_what_a_session_changes_lives_on_its_agent(engine, fake, tmp_path):
    cfg = engine.Config(always_approve=True)
    with pytest.raises(AttributeError):
        cfg.model = "grok-4.20"                 # a setting is never changed once read
    before = dict(vars(cfg))
    agent = engine.Agent(cfg)
    other = engine.AcpServer(cfg, None).start(str(tmp_path), {}).agent     # as ACP's session/new
    try:
        agent.link.use_model("grok-4.20")       # as /model does
        agent.ledger.limit = 5.0                # as grok-detailed's /cost does
        fake.add(answer("done"))
        assert agent.run_turn("hi") == "done"
        assert fake.chat_requests()[-1].json["model"] == "grok-4.20"
        assert other.link.model == "grok-4.3" and other.ledger.limit == 10.0
        assert other.cwd == str(tmp_path) != agent.cwd
        assert vars(cfg) == before
    finally:
        agent.close()
        other.close()


def test_a_new_history_counts_nothing_of_the_last_ones_context(engine, fake):
    # Agent mode starts each step on a new history, as /clear does: the last call's context size
    # must not carry over into the new history's compaction check and context display.
    agent = engine.Agent(engine.Config())
    try:
        fake.add(answer("done", usage={"prompt_tokens": 80000, "completion_tokens": 10, "total_tokens": 80010}))
        assert agent.run_turn("hi") == "done"
        assert agent.context_pct() > 75
        agent.reset([])
        assert agent.context_pct() == 0
    finally:
        agent.close()
