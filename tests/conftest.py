"""Session hooks for the processes tests start (tests/procs.py): a SIGTERM or SIGHUP to pytest (a CI job cancelled, the
terminal closed) becomes KeyboardInterrupt, so that every test's `finally` kills its children, which run in sessions of
their own and would not get the signal themselves; at the end, a sweep kills any group still alive; the summary says
how the safety limits were scaled. Under pytest-xdist each worker gets its share of the cores: torch threads in the
worker and OMP_NUM_THREADS for the processes its tests start (two workers of two threads on two cores run several
times slower)."""
import os, signal, sys
from pathlib import Path

_here = str(Path(__file__).resolve().parent)
if _here not in sys.path: sys.path.insert(0, _here)   # the tests import procs under any --import-mode
import procs  # noqa: E402

_STOP = (signal.SIGTERM, signal.SIGHUP)
_before = {}


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f'{signal.Signals(signum).name}: the started processes are killed on the way out')


def pytest_configure(config):
    if workers := os.environ.get('PYTEST_XDIST_WORKER_COUNT'):
        import torch
        threads = max(1, (os.cpu_count() or 1) // int(workers))
        os.environ['OMP_NUM_THREADS'] = str(threads)
        torch.set_num_threads(threads)
    for s in _STOP:
        if signal.getsignal(s) is signal.SIG_DFL:     # an ignored SIGHUP (nohup) stays ignored
            _before[s] = signal.signal(s, _interrupt)


def pytest_unconfigure(config):
    procs.kill_all()
    for s, h in _before.items(): signal.signal(s, h)
    _before.clear()


def pytest_terminal_summary(terminalreporter):
    if d := procs.describe_scale(): terminalreporter.write_line(d)
