#!/usr/bin/env python3
"""Benchmark grok against the loopback fake API and print two tables of medians.

    python3 tests/bench.py [--runs N] [--python PATH] [--reference PATH]

A script, not a test: nothing is asserted. Every figure is the median of N runs
(default 10; the runs of all rows are interleaved, after one warm-up each) and, where
it is a time or a size of the process, also a ratio to `python3 -c pass` measured in
the same run. The targets are those of SPEC section 11. Stdlib only.

The second table times start-ups that do nothing (`--version`, `--help`) of grok installed
by install.sh and of grok.py run as a copied script, against a reference run in the same
loop: --reference (or $GROK_BENCH_REFERENCE), meant for xAI's CLI (`npm install
@xai-official/grok`: node_modules/.bin/grok), else the bash original in
../shared/reference/grok-agent/. Ratios are medians of the run-by-run ratios.
"""
import argparse
import json
import os
import platform
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fakeapi import FakeAPI, answer, tools  # noqa: E402

GROK = os.path.join(os.path.dirname(HERE), "grok.py")
BASH_ORIGINAL = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "reference", "grok-agent", "grok")
ROUNDS = 5
HISTORY_SIZES = (10, 100, 1000)
STREAMED = "Streaming works: this text is shown as it arrives."


class Bench:
    def __init__(self, python, fake, tmp, reference):
        self.python, self.fake, self.reference = python, fake, reference
        self.home = os.path.join(tmp, "home")
        self.work = os.path.join(tmp, "work")
        self.data = os.path.join(tmp, "data")
        for d in (self.home, self.work, self.data):
            os.makedirs(d)
        for i in range(12):
            with open(os.path.join(self.work, "file%02d.txt" % i), "w") as f:
                f.write("x" * (100 * i))
        # (PYTHONDONTWRITEBYTECODE: not a usual setting; with it the installed grok could not cache its bytecode)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("GROK_", "XAI_"))
                    and k not in ("COST_LIMIT", "COMPACT_THRESHOLD", "PYTHONDONTWRITEBYTECODE")}
        # the installed launcher's `#!/usr/bin/env python3` finds the interpreter measured
        self.env["PATH"] = os.path.dirname(python) + os.pathsep + self.env.get("PATH", os.defpath)
        self.env.update(HOME=self.home, GROK_API_KEY="xai-BENCH0123456789abcdefABCDEF", GROK_BASE_URL=fake.url,
                        GROK_DATA_DIR=self.data, COST_LIMIT="0", NO_COLOR="1",
                        GROK_CONTEXT_WINDOW="1000000", GROK_PRICES="1.25,0.20,2.50")     # the fake answers as xAI
        self.samples = {}
        self.backends = {}      # sandbox backend: whether it works here
        self.system_prompt = None
        with open(GROK) as f:
            self.lines = sum(1 for _ in f)
        # (1) grok installed by install.sh (a launcher that imports grok.py, whose bytecode Python caches)
        install = os.path.join(os.path.dirname(GROK), "install.sh")
        subprocess.run([install], env=dict(self.env, PREFIX=os.path.join(tmp, "prefix")), check=True,
                       stdout=subprocess.DEVNULL)
        self.installed = os.path.join(tmp, "prefix", "bin", "grok")
        # The reference: a CLI with --version and --help (xAI's), or one without (the bash original: it
        # starts its chat; "/exit" typed at its prompt ends it).
        probe = subprocess.run([reference, "--version"], input=b"/exit\n", capture_output=True, env=self.env,
                               cwd=self.work, timeout=60)
        first = probe.stdout.decode(errors="replace").strip().splitlines()[:1]
        self.reference_flags = bool(first) and first[0].startswith("grok ") and probe.returncode == 0
        self.reference_name = first[0] if self.reference_flags else "the bash original (%s)" % reference

    def grok(self, *args):
        return [self.python, GROK] + list(args)

    def spawn(self, argv, rss=False, stdin=None):
        """(wall seconds, CPU seconds, peak RSS in KB or None) of one process.

        rss=True polls /proc/PID/status for VmHWM (the peak of the process's own memory;
        getrusage's ru_maxrss also counts the forking parent's pages, so it cannot tell),
        which costs CPU, so runs that measure memory are not timed."""
        with tempfile.TemporaryFile() as err:
            start = time.perf_counter()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=err, cwd=self.work, env=self.env)
            if stdin is not None:
                proc.stdin.write(stdin)
                proc.stdin.close()
            cpu = peak = None
            if rss:
                while proc.poll() is None:
                    peak = vm_hwm(proc.pid) or peak
                    time.sleep(0.0005)
                code = proc.returncode
            else:
                _, status, usage = os.wait4(proc.pid, 0)
                code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
                cpu = usage.ru_utime + usage.ru_stime
            wall = time.perf_counter() - start
            if code != 0:
                err.seek(0)
                raise SystemExit("bench: %s failed (exit %s):\n%s" % (" ".join(argv[1:]), code,
                                                                       err.read().decode(errors="replace")))
        return wall, cpu, peak

    def record(self, name, value, keep):
        if keep:
            self.samples.setdefault(name, []).append(value)

    def timed(self, name, argv, specs=(), keep=True, rss=False, stdin=None, env=None):
        """Run argv against freshly queued replies (with env added to the environment); records wall
        and CPU time (or, with rss, the peak RSS); returns the connections it opened and the chat
        requests it sent."""
        conns, seen = self.fake.connections, len(self.fake.requests)
        self.fake.add(*specs)
        saved, self.env = self.env, dict(self.env, **(env or {}))
        try:
            wall, cpu, peak = self.spawn(argv, rss, stdin)
        finally:
            self.env = saved
        if self.fake.pending():
            raise SystemExit("bench: %s left %d scripted replies unused" % (name, self.fake.pending()))
        if rss:
            self.record(name + " rss", peak, keep)
        else:
            self.record(name, wall, keep)
            self.record(name + " cpu", cpu, keep)
        requests = [r for r in self.fake.requests[seen:] if r.path.endswith("/completions")]
        del self.fake.requests[:]       # the fake keeps every body; 1,000-message ones add up
        return self.fake.connections - conns, requests

    # -- the rows ------------------------------------------------------------
    def one_run(self, keep=True):
        self.timed("pass", [self.python, "-c", "pass"], keep=keep)
        self.timed("bash true", ["/bin/bash", "-c", "true"], keep=keep)
        self.startup(keep)
        self.record("compile", self.compile_time(), keep)
        conns, reqs = self.timed("turn", self.grok("-p", "hi"), [answer("hello")], keep=keep)
        self.timed("cached turn", [self.installed, "-p", "hi"], [answer("hello")], keep=keep)
        self.record("first request bytes", len(reqs[0].body), keep)
        self.system_prompt = reqs[0].messages[0]["content"]
        rounds = [tools(("bash", {"command": "true"}))] * ROUNDS + [answer("done")]
        again = {"GROK_LOOP_DETECTION": "0"}        # the same call and result each round, on purpose
        conns, reqs = self.timed("bash turn", self.grok("-y", "-p", "run true"), rounds, keep=keep, env=again)
        self.record("connections", conns, keep)
        rounds = [tools(("list_files", {"path": "."}))] * ROUNDS + [answer("done")]
        self.timed("list turn", self.grok("-p", "list files"), rounds, keep=keep, env=again)
        for size in HISTORY_SIZES:
            sid = self.write_session(size)
            self.timed("resume %d" % size, self.grok("--resume", sid, "-p", "hi"), [answer("hello")], keep=keep)
            sid = self.write_session(size)
            self.timed("resume %d turn" % size, self.grok("--resume", sid, "-p", "list files"), rounds, keep=keep,
                       env=again)
        self.timed("pass", [self.python, "-c", "pass"], keep=keep, rss=True)
        self.timed("turn", self.grok("-p", "hi"), [answer("hello")], keep=keep, rss=True)
        rounds = [tools(("bash", {"command": "true"}))] * ROUNDS + [answer("done")]
        self.timed("bash turn", self.grok("-y", "-p", "run true"), rounds, keep=keep, rss=True, env=again)
        self.record("stream latency", self.stream_latency(), keep)
        self.sandboxed(keep)
        acp = self.acp_initialize()
        if acp is not None:
            self.record("acp", acp, keep)

    def startup(self, keep):
        """--version and --help: of grok installed, of grok.py copied, of the reference; each
        grok row's ratio to the reference taken run by run."""
        for flag in ("--version", "--help"):
            if self.reference_flags:
                self.timed("ref " + flag, [self.reference, flag], keep=keep)
            else:
                self.timed("ref " + flag, [self.reference], stdin=b"/exit\n", keep=keep)
            for how, argv in (("installed", [self.installed, flag]), ("copied", self.grok(flag))):
                self.timed(how + " " + flag, argv, keep=keep)
                if keep:
                    ratio = self.samples[how + " " + flag][-1] / self.samples["ref " + flag][-1]
                    self.record(how + " " + flag + " x ref", ratio, keep)

    def sandboxed(self, keep):
        """The turn and the bash turn again under --sandbox workspace, with each backend that works
        here (probed once): its cost at start and per command."""
        rounds = [tools(("bash", {"command": "true"}))] * ROUNDS + [answer("done")]
        for backend in ("bwrap", "landlock"):
            env, self.env = self.env, dict(self.env, GROK_SANDBOX_BACKEND=backend)
            try:
                if backend not in self.backends:
                    probe = "import grok; grok.Sandbox('workspace', False, '.')"
                    done = subprocess.run([self.python, "-B", "-c", probe], env=self.env,
                                          capture_output=True, cwd=os.path.dirname(GROK))
                    self.backends[backend] = done.returncode == 0
                if self.backends[backend]:
                    argv = self.grok("--sandbox", "workspace", "-y", "-p", "run true")
                    self.timed(backend + " turn", argv, [answer("hello")], keep=keep)
                    self.timed(backend + " bash turn", argv, rounds, keep=keep, env={"GROK_LOOP_DETECTION": "0"})
            finally:
                self.env = env

    def compile_time(self):
        """Seconds the interpreter takes to compile grok.py, as it does on every start."""
        code = ("import sys, time\nsource = open(sys.argv[1]).read()\nstart = time.perf_counter()\n"
                "compile(source, sys.argv[1], 'exec')\nprint(time.perf_counter() - start)")
        out = subprocess.run([self.python, "-c", code, GROK], capture_output=True, text=True, check=True).stdout
        return float(out)

    def write_session(self, size):
        """A session file with `size` messages of tool-loop history (~1.5 KB each on average)."""
        sid = "bench-%d" % size
        sessions = os.path.join(self.data, "sessions")
        os.makedirs(sessions, exist_ok=True)
        listing = "\n".join("file file%02d.txt %d" % (i, 100 * i) for i in range(12)) + "\n"
        lines = [{"type": "session", "version": 1, "id": sid, "created": "2025-01-01T00:00:00+0000",
                  "cwd": self.work, "model": "grok-4.3", "contract": "grok_reply", "system": self.system_prompt}]
        for i in range(size):
            if i % 2 == 0:
                content = "Tool results:\n\n[1] list_files .\n" + listing * 12
            else:
                content = json.dumps({"tool_calls": [{"tool": "list_files", "args": {"path": "."}}],
                                      "response": "Looking at the files (%d)." % i, "done": False})
            lines.append({"type": "message", "message": {"role": "user" if i % 2 == 0 else "assistant",
                                                         "content": content}})
        with open(os.path.join(sessions, sid + ".jsonl"), "w") as f:
            f.write("".join(json.dumps(rec) + "\n" for rec in lines))
        return sid

    def stream_latency(self):
        """Seconds from the fake sending the chunk that starts the "response" text to its
        first bytes on grok's stdout (headless text mode, read from a pipe)."""
        content = json.dumps({"tool_calls": [], "response": STREAMED, "done": True})
        start = content.index(STREAMED)
        self.fake.add(answer(STREAMED, chunk_size=5, chunk_delay=0.02))
        seen = len(self.fake.requests)
        proc = subprocess.Popen(self.grok("-p", "hi"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd=self.work, env=self.env)
        first = None
        while True:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            if first is None:
                first = time.monotonic()
        proc.wait()
        proc.stdout.close()
        sent, total = None, 0
        for when, piece in self.fake.requests[seen].sent:
            total += len(piece)
            if total > start:
                sent = when
                break
        return first - sent

    def acp_initialize(self):
        """Seconds from starting `grok --acp` to its answer to `initialize`; None if it has none."""
        start = time.perf_counter()
        proc = subprocess.Popen(self.grok("--acp"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd=self.work, env=self.env)
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {}}}
        result = None
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            buf = b""
            deadline = time.monotonic() + 5
            while b"\n" not in buf and time.monotonic() < deadline:
                ready, _, _ = select.select([proc.stdout], [], [], 0.1)
                if ready:
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    buf += chunk
            elapsed = time.perf_counter() - start
            try:
                reply = json.loads(buf.split(b"\n")[0])
                if reply.get("id") == 1 and "result" in reply:
                    result = elapsed
            except ValueError:
                pass
        except BrokenPipeError:
            pass
        finally:
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return result

    # -- the table -----------------------------------------------------------
    def median(self, name):
        values = self.samples.get(name)
        return statistics.median(values) if values else None

    def table(self):
        m = self.median
        base = m("pass")
        rows = []

        def yes_no(met):
            return "" if met is None else ("yes" if met else "NO")

        def time_row(label, wall, cpu=None, target="", met=None):
            rows.append((label, "%.1f ms" % (wall * 1e3), "%.2f" % (wall / base),
                         "" if cpu is None else "%.1f ms" % (cpu * 1e3), target, yes_no(met)))

        def run_row(label, name, target="", met=None):
            time_row(label, m(name), m(name + " cpu"), target, met)

        def per_round(name, baseline, tool="", label="  per round"):
            """(turn with ROUNDS tool rounds - the same without) / ROUNDS - the tool's own time."""
            wall = (m(name) - m(baseline)) / ROUNDS - (m(tool) if tool else 0)
            cpu = (m(name + " cpu") - m(baseline + " cpu")) / ROUNDS - (m(tool + " cpu") if tool else 0)
            time_row(label, wall, cpu, "<= 5 ms", wall <= 0.005)

        run_row("python3 -c pass", "pass")
        run_row("grok --version, grok.py run as a copied script", "copied --version")
        run_row("one headless turn, grok.py run as a copied script", "turn",
                "<= pass + 50 ms = %.1f ms" % ((base + 0.050) * 1e3), m("turn") <= base + 0.050)
        run_row("  the same, grok.py imported as install.sh does (1)", "cached turn",
                "<= pass + 40 ms = %.1f ms" % ((base + 0.040) * 1e3), m("cached turn") <= base + 0.040)
        run_row("%d-round tool turn (bash true)" % ROUNDS, "bash turn")
        per_round("bash turn", "turn", "bash true", "  per round, minus bash's own %.1f ms" % (m("bash true") * 1e3))
        run_row("%d-round tool turn (list_files)" % ROUNDS, "list turn")
        per_round("list turn", "turn")
        for size in HISTORY_SIZES:
            per_round("resume %d turn" % size, "resume %d" % size, label="  per round, %d history messages" % size)
        conns = m("connections")
        rows.append(("connections opened per session", "%d" % conns, "", "", "1", yes_no(conns == 1)))
        size = m("first request bytes")
        rows.append(("first request body", "%.1f KB" % (size / 1024.0), "", "", "<= 6 KB", yes_no(size <= 6144)))
        rss = max(m("turn rss"), m("bash turn rss"))
        rows.append(("peak RSS (VmHWM)", "%.1f MB" % (rss / 1024.0), "%.2f" % (rss / m("pass rss")), "",
                     "<= 30 MB", yes_no(rss <= 30 * 1024)))
        time_row("streamed response: fake's chunk -> stdout", m("stream latency"), None, "shown as it arrives",
                 m("stream latency") < 0.015)
        for backend in ("bwrap", "landlock"):
            if not self.backends.get(backend):
                rows.append(("--sandbox workspace (%s)" % backend, "n/a here", "", "", "", ""))
                continue
            run_row("one headless turn, --sandbox workspace (%s)" % backend, backend + " turn")
            time_row("  its start-up (the probe)", m(backend + " turn") - m("turn"))
            extra = m(backend + " bash turn") - m(backend + " turn") - m("bash turn") + m("turn")
            time_row("  per command, more than without", extra / ROUNDS)
        if m("acp") is None:
            rows.append(("ACP: start to initialize answer", "n/a", "", "", "", ""))
        else:
            time_row("ACP: start to initialize answer", m("acp"))
        head = ("measure", "median", "x pass", "CPU", "target (SPEC 11)", "met")
        return markdown(head, rows)

    def startup_table(self):
        """The issue-style table: the reference's median, grok's with its ratio to the reference."""
        m = self.median
        ref = "reference: " + (self.reference_name if self.reference_flags else "bash original (its chat, /exit)")
        head = ("start-up, nothing to do", ref, "grok installed (install.sh)", "grok copied (python3 grok.py)")
        rows = []
        for flag in ("--version", "--help"):
            cells = ["grok " + flag, "%.1f ms" % (m("ref " + flag) * 1e3)]
            for how in ("installed", "copied"):
                name = how + " " + flag
                cells.append("%.1f ms (%.2fx)" % (m(name) * 1e3, m(name + " x ref")))
            rows.append(cells)
        return markdown(head, rows)


def markdown(head, rows):
    widths = [max(len(str(r[i])) for r in list(rows) + [head]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])


def vm_hwm(pid):
    """Peak resident set size of a running process in KB (Linux), or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for row in f:
                if row.startswith("VmHWM:"):
                    return int(row.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine(python):
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for row in f:
                if row.startswith("model name"):
                    model = row.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
    return "%d CPUs (nproc), %s, %s, Python %s (%s)" % (os.cpu_count() or 0, model, platform.system(),
                                                        version, python)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10, help="runs per measure (default 10)")
    p.add_argument("--python", default=sys.executable, help="interpreter to run grok with (default: this one)")
    p.add_argument("--reference", default=os.environ.get("GROK_BENCH_REFERENCE") or BASH_ORIGINAL,
                   help="the CLI to compare start-ups with: xAI's (its node_modules/.bin/grok); default "
                        "$GROK_BENCH_REFERENCE, else the bash original")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="grok-bench-")
    try:
        with FakeAPI() as fake:
            bench = Bench(args.python, fake, tmp, os.path.abspath(args.reference))
            bench.one_run(keep=False)
            for _ in range(args.runs):
                bench.one_run()
            print("grok benchmark: median of %d runs against the loopback fake (tests/fakeapi.py)" % args.runs)
            print("machine: %s" % machine(args.python))
            print()
            print(bench.table())
            print()
            print(bench.startup_table())
            print()
            print("(1) install.sh installs grok.py beside a launcher that imports it:")
            print("    Python caches an imported module's bytecode, but compiles a script on every start")
            print("    (%.1f ms here for grok.py's %d lines)." % (bench.median("compile") * 1e3, bench.lines))
            print("anchors (SPEC 11): bash original 276 ms per turn, ~345 ms per tool round; xAI CLI 0.2.111 "
                  "435 ms per turn, ~112 ms per shell round, 94 MB RSS, 40 KB first request")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
