"""A fork server for the bad-input corpus (tests/test_bad_inputs.py): many runs of `tft_train` / `tft_predict` for the
price of one interpreter start.

A fresh Python that imports torch takes 2-4 s before it parses a flag, so a corpus of 150+ cases run as console scripts
would spend minutes starting interpreters. This process imports `tft_nb.cli` (and with it torch, pandas, numpy) once,
then `os.fork()`s a child per case; the child inherits the imported modules, so a case costs only its own work. The
modules that the commands import lazily, on first use, are imported here too, or each child would import them anew.

Forking a process after torch has computed something is unsafe: the OpenMP and intra-op thread pools that torch starts
on its first parallel operation do not survive a fork (a child that then uses them can hang). So the parent runs no
torch computation at all: it imports, reads the cases, forks and waits. The threads it has by then belong to libraries
that re-arm after a fork (OpenBLAS's pool, pyarrow's jemalloc background thread). Each child calls
`torch.set_num_threads(1)` before its first torch operation, starting its own one-thread pool. The parent collects
no garbage and freezes its objects before each fork (`gc.freeze`), so that a child's garbage collections do not touch,
and copy, the memory it shares with the parent (a full collection there would cost 0.4 s).

Usage: `python tests/corpus_runner.py CASES RESULTS` (either may be `-`: stdin, stdout), or
`python tests/corpus_runner.py --serve`: one case a line on stdin, its result a line on stdout, until stdin closes (the
tests' `procs.cli` runs console scripts through it). CASES is a JSON object:
`{"cases": [{"id", "program" (a console script of MAINS), "argv" (list), "cwd"[, "limit_s"]}, ...], "jobs": 2,
"limit_s": 120}`.
Each child changes to `cwd` (it runs there as the console script would), sends its fds 1 and 2 to files of the
runner's own temporary folder (never the case's) and its fd 0 to /dev/null, runs the command's main (`main_train(argv)`,
`main_predict(argv)`, ...) and exits with its status (a `SystemExit` code as the interpreter would turn it into one; an
uncaught exception prints its traceback and exits 1). `jobs` children run at a time; one still running after `limit_s`
seconds (its own, else the spec's) gets SIGKILL. RESULTS is a JSON object: id -> {"status": the exit status or null,
"signal": the number of the signal that ended the child or null, "timed_out", "stdout", "stderr", "seconds"}.
"""
from __future__ import annotations
import gc, json, os, shutil, signal, sys, tempfile, time, traceback
gc.disable()                                   # no collection moves the imported objects: children share their pages

import torch                                   # the children call torch.set_num_threads; the parent computes nothing
from tft_nb.cli import main_backtest, main_predict, main_train, main_tune
# modules the commands import lazily, on first use, which every child would otherwise import anew:
import torch._dynamo                           # by the first model built on the meta device (2-3 s)
import tft_nb.interpret  # noqa: F401          # by the report at the end of a run
import arch.univariate  # noqa: F401          # by the garch11 baseline of that report (1-2 s)
try: import pyarrow.parquet  # noqa: F401      # by the first Parquet file read
except ImportError: pass

MAINS = {'tft_train': main_train, 'tft_predict': main_predict, 'tft_backtest': main_backtest, 'tft_tune': main_tune}


def _exit_status(e: SystemExit) -> int:
    "The exit status the interpreter gives a process ending with `e`."
    if e.code is None: return 0
    if isinstance(e.code, int): return e.code & 0xFF
    print(e.code, file=sys.stderr)             # sys.exit('message'): printed, status 1
    return 1


def _child(case: dict, out: str) -> int:
    "Run one case in this forked child; returns its exit status."
    os.chdir(case['cwd'])
    for fd, name in ((0, os.devnull), (1, out + '.stdout'), (2, out + '.stderr')):
        f = os.open(name, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    torch.set_num_threads(1)
    try:
        MAINS[case['program']](list(case['argv']))
        return 0
    except SystemExit as e: return _exit_status(e)
    except BaseException:
        traceback.print_exc()
        return 1


def _fork(case: dict, out: str) -> int:
    "Start a child running `case`; returns its pid. The child never returns from here."
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()                                # the child's collections skip every object the parent holds
    pid = os.fork()
    if pid: return pid
    gc.enable()
    status = 1
    try: status = _child(case, out)
    except BaseException: traceback.print_exc()
    finally:
        for f in (sys.stdout, sys.stderr):
            try: f.flush()
            except BaseException: pass
        os._exit(status)


def _read(path: str) -> str:
    try:
        with open(path, errors='replace') as f: return f.read()
    except FileNotFoundError: return ''


def run_cases(cases: list[dict], jobs: int = 2, limit_s: float = 120.0) -> dict:
    "Run every case in a forked child, `jobs` at a time; their results by id. A case's own `limit_s` overrides."
    tmp, results, running, killed = tempfile.mkdtemp(prefix='tft_corpus_'), {}, {}, set()
    queue = list(enumerate(cases))
    try:
        while queue or running:
            while queue and len(running) < jobs:
                i, case = queue.pop(0)
                out = os.path.join(tmp, str(i))
                t0 = time.monotonic()
                running[_fork(case, out)] = (case, out, t0, t0 + case.get('limit_s', limit_s))
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:                                   # none ended: kill the overdue, look again shortly
                for p, (*_, deadline) in running.items():
                    if time.monotonic() > deadline and p not in killed:
                        killed.add(p)
                        os.kill(p, signal.SIGKILL)
                time.sleep(0.005)
                continue
            case, out, t0, _ = running.pop(pid)
            timed_out = pid in killed
            killed.discard(pid)                            # a later child may get the same pid
            results[case['id']] = dict(
                status=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                timed_out=timed_out, stdout=_read(out + '.stdout'), stderr=_read(out + '.stderr'),
                seconds=round(time.monotonic() - t0, 3))
    finally:
        for p in running: os.kill(p, signal.SIGKILL)       # an error here: no child outlives the runner
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def serve(inp, out):
    "Run each case read as a JSON line from `inp` in a forked child; write its result as a JSON line to `out`."
    for line in inp:
        case = dict(json.loads(line), id='case')
        out.write(json.dumps(run_cases([case], jobs=1, limit_s=case.get('limit_s', 120.0))['case']) + '\n')
        out.flush()


def main(argv: list[str]):
    if argv[:1] == ['--serve']: return serve(sys.stdin, sys.stdout)
    src, dst = (argv + ['-', '-'])[:2]
    if src == '-': spec = json.load(sys.stdin)
    else:
        with open(src) as f: spec = json.load(f)
    results = run_cases(spec['cases'], spec.get('jobs', 2), spec.get('limit_s', 120.0))
    text = json.dumps(results, indent=1)
    if dst == '-': sys.stdout.write(text)
    else:
        with open(dst, 'w') as f: f.write(text)


if __name__ == '__main__':
    main(sys.argv[1:])
