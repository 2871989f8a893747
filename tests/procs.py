"""Processes started by tests: each in its own process group, killed (the whole group) in every outcome, and
bounded only by a safety limit scaled to the machine.

- `started(args, ...)`: a context manager around `subprocess.Popen`. The child starts a new session (so it and anything
  it starts form one process group, and a Ctrl-C at the terminal running pytest does not reach it); on leaving the
  block, whatever happened in it (a pass, a failed assertion, an exception, KeyboardInterrupt), the group gets SIGKILL
  and the child is reaped. A watchdog thread kills the group when the safety limit passes, which ends any blocking read
  or wait on it: tests wait on events (a line on a pipe, a file, the exit) and never need a timeout of their own.
  `sigint=True` also gives the child Ctrl-C's default action (for the tests that send it SIGINT).
- `run(args, ...)`: `subprocess.run(args, capture_output=True, text=True)` through `started`; `communicate(p)` for a
  child of `started`: both fail with a clear message when the watchdog fired.
- `cli(args, env=...)`: a console script (`tft_train`, `tft_predict`, `tft_backtest`, `tft_tune`) run to its end in a
  child forked from a server that has imported the package (tests/corpus_runner.py `--serve`, one per environment,
  started once and killed with the others): the script's exit status and output without an interpreter's start-up
  (2-4 s of importing torch). For runs a test does not signal; `started` and `run` start the real console scripts.
- `wait_until(p, cond, what)`: wait for a state of a running child; fails with a clear message if the child exits first.
  `wait_cpu(p, seconds, what)`: wait until the child has done that much more work (CPU time), not that much wall time.
- `kill(p)` kills a group; `kill_all()`, a sweep at the end of the session (conftest.py), kills any left.
- `limit(base)`: `base` seconds times the machine's scale: `TFT_NB_TEST_TIMEOUT_SCALE` when set, else measured once per
  session (how long `python -c "import torch"` takes here, against an idle two-core machine, and the load average).

The limits are safety nets against a hung test, never performance checks: the bases are many times what the work takes
on an idle machine, before scaling.
"""
from __future__ import annotations
import json, os, signal, subprocess, sys, threading, time
from pathlib import Path
from contextlib import contextmanager
import pytest

SCALE_ENV = 'TFT_NB_TEST_TIMEOUT_SCALE'
REFERENCE_S = 2.0       # `python -c "import torch"` on an idle two-core machine (2.0 s warm, 2.8 s cold)
DEFAULT_BASE = 600      # seconds for any one process, before scaling; a CLI run of the tests takes seconds when idle

_found: tuple[float, str] | None = None    # the scale, and how it was found
_live: set[subprocess.Popen] = set()      # started and not yet killed: swept at the end of the session
_servers: dict[tuple, subprocess.Popen] = {}   # environment -> the fork server of `cli`
RUNNER = Path(__file__).with_name('corpus_runner.py')


def scale() -> float:
    "The factor safety limits are multiplied by (at least 1), found once per session."
    global _found
    if _found is None:
        if v := os.environ.get(SCALE_ENV):
            try: s = float(v)
            except ValueError: s = float('nan')
            if not s > 0 or s == float('inf'): raise ValueError(f'{SCALE_ENV} must be a number > 0, got {v!r}')
            _found = s, f'{SCALE_ENV}={v}'
        else:
            t0 = time.monotonic()
            with started([sys.executable, '-c', 'import torch'], stdout=subprocess.DEVNULL, base=None) as p:
                try: p.wait(timeout=600)        # the measurement's own net, unscaled: nothing to scale it by yet
                except subprocess.TimeoutExpired: pass
            took = time.monotonic() - t0
            load = os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, 'getloadavg') else 0.0
            _found = (max(1.0, took / REFERENCE_S, load),
                      f'`import torch` took {took:.1f} s (reference {REFERENCE_S} s), load per CPU {load:.2f}')
    return _found[0]


def describe_scale() -> str | None:
    "How the scale was found, or None when no test needed it."
    return None if _found is None else f'safety limits x {_found[0]:.2f} ({_found[1]})'


def limit(base: float) -> float:
    "`base` seconds scaled to this machine: a safety net against a hung test."
    return base * scale()


def _sigint_default():
    # as a terminal's foreground job gets it: a shell's background job (`cmd &`, as a CI runner may start this suite)
    # starts with SIGINT ignored, and Python keeps it ignored, rightly (nohup'd runs survive Ctrl-C)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def kill(p: subprocess.Popen):
    "SIGKILL `p`'s whole process group (it leads its own session), reap `p`, close its pipes."
    try: os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError): pass   # the child and everything it started are gone already
    p.wait()
    for f in (p.stdin, p.stdout, p.stderr):
        if f: f.close()
    _live.discard(p)


def kill_all():
    "Kill every group a test started and did not kill (a safety sweep: `started` kills its own on leaving)."
    for p in list(_live): kill(p)


@contextmanager
def started(args, *, base: float | None = DEFAULT_BASE, sigint: bool = False, **popen_kw):
    """`subprocess.Popen(args, **popen_kw)` in a new session; the group is killed on leaving the block, and by a
    watchdog after `limit(base)` seconds (None: no watchdog). `sigint=True` starts the child with Ctrl-C's default
    action, as a terminal's foreground job has it. `p.timed_out` is set when the watchdog fired; `p.fire_watchdog()`
    fires it at once (to test what a test does at its safety limit)."""
    lim = None if base is None else limit(base)     # first: the scale is measured before this child loads the machine
    p = subprocess.Popen([str(a) for a in args], start_new_session=True,
                         preexec_fn=_sigint_default if sigint else None, **popen_kw)
    _live.add(p)
    p.timed_out, p.limit = threading.Event(), lim
    def fire():
        p.timed_out.set()
        try: os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError: pass
    p.fire_watchdog = fire
    dog = None
    try:
        if lim is not None:
            dog = threading.Timer(lim, fire)
            dog.daemon = True
            dog.start()
        yield p
    finally:
        if dog: dog.cancel()
        kill(p)


def _tail(s, n=3000):
    return s[-n:] if isinstance(s, str) else ''


def fail_if_timed_out(p: subprocess.Popen, out='', err=''):
    "Fail with a clear message when the watchdog killed `p` (its output so far shown)."
    if p.timed_out.is_set():
        pytest.fail(f'{" ".join(map(str, p.args))}\nstill running after its safety limit of {p.limit or 0:.0f} s '
                    f'({describe_scale()}; set {SCALE_ENV} to raise it): killed\n'
                    f'stdout: {_tail(out)}\nstderr: {_tail(err)}', pytrace=False)


def communicate(p: subprocess.Popen, input=None):
    """`p.communicate()`, waiting for the child's exit and the end of its output (the watchdog bounds it); fails clearly
    when the watchdog fired. Looks every second whether the watchdog has fired, so that a process that left the group
    (a new session of its own) and holds the pipes open cannot keep this waiting."""
    while True:
        try:
            out, err = p.communicate(input, timeout=1)
            break
        except subprocess.TimeoutExpired as e:
            input = None                          # sent already: a second communicate() takes none
            if p.timed_out.is_set() and p.poll() is not None:
                out, err = (b.decode(errors='replace') if isinstance(b, bytes) else b for b in (e.output, e.stderr))
                break
    fail_if_timed_out(p, out, err)
    return out, err


def run(args, *, base: float = DEFAULT_BASE, input=None, **popen_kw) -> subprocess.CompletedProcess:
    "`subprocess.run(args, capture_output=True, text=True, **popen_kw)`, killing the child's group in every outcome."
    with started(args, base=base, stdin=subprocess.PIPE if input is not None else None, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True, **popen_kw) as p:
        out, err = communicate(p, input)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def wait_until(p: subprocess.Popen, cond, what: str, poll: float = 0.02):
    """Wait, polling every `poll` s, until `cond()` holds, while `p` runs; fail naming `what` if `p` exits first (the
    watchdog kills a hung child, so this ends too)."""
    while not cond():
        if p.poll() is not None and not cond():        # cond may have come true just before the exit
            fail_if_timed_out(p)
            pytest.fail(f'waiting for {what}: the process exited first, with status {p.returncode}', pytrace=False)
        time.sleep(poll)


def pid_cpu_seconds(pid: int) -> float | None:
    "CPU time process `pid` has used so far (all its threads), or None where /proc cannot tell."
    try:
        with open(f'/proc/{pid}/stat') as f: fields = f.read().rsplit(')', 1)[1].split()
    except OSError: return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')      # utime + stime


def cpu_seconds(p: subprocess.Popen) -> float | None:
    "CPU time `p` has used so far (all its threads), or None where /proc cannot tell."
    return pid_cpu_seconds(p.pid)


def wait_cpu(p: subprocess.Popen, seconds: float, what: str):
    """Wait until `p` has used `seconds` more CPU time: a point in its work that contention does not move (a sleep of
    that long would, on a loaded machine, cover less of the child's work, or on an idle one more). Falls back to
    sleeping where /proc is missing."""
    c0 = cpu_seconds(p)
    if c0 is None:
        time.sleep(seconds)
        return
    wait_until(p, lambda: (c := cpu_seconds(p)) is not None and c - c0 >= seconds, what)


def _server(env: dict | None) -> subprocess.Popen:
    "The fork server for `env`, started on first use (a new session, swept with the others at the end)."
    key = tuple(sorted((env or os.environ).items()))
    p = _servers.get(key)
    if p is None or p.poll() is not None:
        p = subprocess.Popen([sys.executable, str(RUNNER), '--serve'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env, start_new_session=True)
        _live.add(p)
        _servers[key] = p
    return p


def cli(args, *, env: dict | None = None, base: float = DEFAULT_BASE) -> subprocess.CompletedProcess:
    "A console script of tft_nb run to its end in a forked child of a server that imported the package: as `run`."
    p = _server(env)
    case = dict(program=str(args[0]), argv=[str(a) for a in args[1:]], cwd=os.getcwd(), limit_s=limit(base))
    p.stdin.write(json.dumps(case) + '\n')
    p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        pytest.fail(f'the fork server ended (status {p.poll()}) running {" ".join(case["argv"])}', pytrace=False)
    r = json.loads(line)
    if r['timed_out']:
        pytest.fail(f'{" ".join(map(str, args))}\nstill running after its safety limit of {limit(base):.0f} s: killed\n'
                    f'stdout: {_tail(r["stdout"])}\nstderr: {_tail(r["stderr"])}', pytrace=False)
    status = r['status'] if r['signal'] is None else -r['signal']
    return subprocess.CompletedProcess([str(a) for a in args], status, r['stdout'], r['stderr'])
