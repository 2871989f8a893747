"""The helpers of tests/procs.py kill what a test starts in every outcome: a child and the grandchild it starts are both
gone after a pass, a failed assertion, an exception, KeyboardInterrupt and a safety limit. Every wait here is on an
event (a line on a pipe, a pid file descriptor, the exit), bounded only by the scaled safety limit."""
import os, select, signal, subprocess, sys, textwrap, time
import pytest
import procs

# a child that starts a grandchild (not in a new session: it stays in the child's group; with 'escape' after the first
# argument, in one) and says both pids: on stdout, then sleeps ('sleep'), or exits at once, leaving the grandchild
# running ('leave'), or in a file, then sleeps (a path)
FAMILY = textwrap.dedent('''
    import os, subprocess, sys, time
    g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(10**6)'],
                         start_new_session=sys.argv[2:] == ['escape'])
    pids, how = f'{os.getpid()} {g.pid}', sys.argv[1]
    if how in ('sleep', 'leave'):
        print(pids, flush=True)
    else:
        with open(how + '.tmp', 'w') as f: f.write(pids)
        os.replace(how + '.tmp', how)
    if how == 'leave': os._exit(0)
    time.sleep(10**6)
''')


def _pidfd(pid):
    "A descriptor that becomes readable when `pid` ends (None where Linux cannot give one)."
    try: return os.pidfd_open(pid)
    except (AttributeError, OSError): return None


def _assert_gone(pid, fd, what):
    "Wait for `pid` to end (the event, through its descriptor), bounded by the scaled safety limit."
    wait = procs.limit(60)
    if fd is not None:
        try: ready = select.select([fd], [], [], wait)[0]
        finally: os.close(fd)
        assert ready, f'the {what} ({pid}) still runs {wait:.0f} s after its group was killed'
        return
    t0 = time.monotonic()                   # no pidfd: its state in /proc, a zombie being gone too
    while time.monotonic() - t0 < wait:
        try:
            with open(f'/proc/{pid}/stat') as f:
                if f.read().rsplit(')', 1)[1].split()[0] in 'ZX': return
        except FileNotFoundError: return
        time.sleep(0.02)
    raise AssertionError(f'the {what} ({pid}) still runs {wait:.0f} s after its group was killed')


class Boom(Exception): pass


@pytest.mark.parametrize('outcome', ['pass', 'assertion', 'exception', 'KeyboardInterrupt', 'child left'])
def test_started_kills_child_and_grandchild_in_every_outcome(outcome):
    errors = {'assertion': AssertionError, 'exception': Boom, 'KeyboardInterrupt': KeyboardInterrupt}
    args = [sys.executable, '-c', FAMILY, 'leave' if outcome == 'child left' else 'sleep']
    seen = {}
    def body():
        with procs.started(args, stdout=subprocess.PIPE, text=True) as p:
            seen['p'] = p
            child, grandchild = map(int, p.stdout.readline().split())   # both are running from here on
            assert child == p.pid
            seen['fds'] = {grandchild: _pidfd(grandchild)}
            if outcome == 'child left': p.wait()                         # the child is gone; the grandchild runs on
            if outcome == 'assertion': assert False, 'a test failing on purpose, with its processes running'
            if outcome == 'exception': raise Boom('an error on purpose')
            if outcome == 'KeyboardInterrupt': raise KeyboardInterrupt
    if outcome in errors:
        with pytest.raises(errors[outcome]): body()
    else: body()
    p = seen['p']
    assert p.returncode == (0 if outcome == 'child left' else -signal.SIGKILL)   # reaped: no zombie left to pytest
    assert p not in procs._live and p.stdout.closed
    for pid, fd in seen['fds'].items(): _assert_gone(pid, fd, 'grandchild')


def test_run_kills_the_group_at_its_safety_limit(tmp_path):
    """A child that never ends: `run` fails at its (scaled) safety limit, saying so, and its group is gone. The limit is
    made short for the test, and raised until the child had time to say its pids (so a loaded machine only retries)."""
    pids = tmp_path / 'pids'
    for base in (1, 4, 16, 64):
        with pytest.raises(pytest.fail.Exception, match='still running after its safety limit of'):
            procs.run([sys.executable, '-c', FAMILY, pids], base=base)
        if pids.exists(): break
    child, grandchild = map(int, pids.read_text().split())
    _assert_gone(grandchild, _pidfd(grandchild), 'grandchild')
    _assert_gone(child, _pidfd(child), 'child')


def test_waits_end_when_an_escaped_grandchild_holds_the_pipes():
    """A grandchild in a session of its own (out of reach of the group kill) holding the child's stdout open: when the
    watchdog fires, `communicate` ends all the same, and fails saying so (the test then kills that grandchild)."""
    grandchild = None
    try:
        with procs.started([sys.executable, '-c', FAMILY, 'sleep', 'escape'], stdout=subprocess.PIPE, text=True) as p:
            grandchild = int(p.stdout.readline().split()[1])
            p.fire_watchdog()
            with pytest.raises(pytest.fail.Exception, match='still running after its safety limit'):
                procs.communicate(p)
    finally:
        if grandchild: os.kill(grandchild, signal.SIGKILL)


def test_run_returns_like_subprocess_run():
    r = procs.run([sys.executable, '-c', 'import sys; print(sys.stdin.read().upper()); sys.exit(3)'], input='abc')
    assert (r.returncode, r.stdout, r.stderr) == (3, 'ABC\n', '')


def test_wait_until_fails_when_the_process_exits_first():
    with procs.started([sys.executable, '-c', 'pass']) as p:
        with pytest.raises(pytest.fail.Exception,
                           match='waiting for epoch 1 saved: the process exited first, with status 0'):
            procs.wait_until(p, lambda: False, 'epoch 1 saved')
    with procs.started([sys.executable, '-c', 'import time; time.sleep(10**6)']) as p:
        n = []
        procs.wait_until(p, lambda: n.append(1) or len(n) > 2, 'three looks')   # a state reached: no failure
        procs.wait_cpu(p, 0, 'no CPU time needed')


def test_sigint_as_a_foreground_job_has_it():
    "`sigint=True`: Ctrl-C's default action in the child even where pytest runs as a background job (SIGINT ignored)."
    code = 'import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)'
    with procs.started([sys.executable, '-c', code], sigint=True, stdout=subprocess.PIPE, text=True) as p:
        assert procs.communicate(p)[0] == 'True\n'


def test_scale_from_the_environment(monkeypatch):
    monkeypatch.setattr(procs, '_found', None)
    monkeypatch.setenv(procs.SCALE_ENV, '3')
    assert procs.scale() == 3 and procs.limit(10) == 30 and procs.SCALE_ENV in procs.describe_scale()
    for bad in ('0', '-1', 'x', 'inf', 'nan'):
        monkeypatch.setattr(procs, '_found', None)
        monkeypatch.setenv(procs.SCALE_ENV, bad)
        with pytest.raises(ValueError, match=procs.SCALE_ENV): procs.scale()
