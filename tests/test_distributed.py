"""Training over several processes (issue 26): real `torchrun` jobs of two gloo processes on the CPU, each of them
`tft_train`. Two processes train like one process with twice the batch; a killed rank ends the job; a two-process
run stopped by SIGTERM resumes bit for bit, and in one process with a line; a bad flag is refused in one line, also
when rank 1 refuses it before rank 0 has started; no
gloo thread of a run's process group is left when its interpreter shuts down (one process, as torchrun starts it).

torchrun starts each worker in a session of its own, so killing torchrun's process group would leave them running:
`job` kills the workers it finds under torchrun too, in every outcome."""
import contextlib, json, os, re, shutil, signal, socket, subprocess, sys
from pathlib import Path
import pandas as pd, pytest, torch
from safetensors.torch import load_file
from tft_nb.checkpoint import load_checkpoint
import procs

pytestmark = [pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads /proc to find the workers'),
              pytest.mark.slow]   # the second tier (pytest.ini)

SMALL = ['--hidden-size', '8', '--attention-heads', '2', '--lstm-layers', '1', '--encoder-length', '20',
         '--device', 'cpu']
SHORT = ['--val-start', '2000-01-01', '--test-start', '2001-01-01']       # 454 training windows of the built-in data
MIDDLE = ['--val-start', '2005-01-01', '--test-start', '2006-01-01']      # 2,966: epochs of 47 steps of 2 x 32
ENV = {**os.environ, 'PYTHONHASHSEED': '0', 'OMP_NUM_THREADS': '1'}
TORCHRUN = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', '2', '--no-python']


def _children() -> dict[int, list[int]]:
    "Parent pid -> child pids of every process now alive."
    kids = {}
    for d in Path('/proc').iterdir():
        if not d.name.isdigit(): continue
        try: ppid = int((d / 'stat').read_text().rsplit(')', 1)[1].split()[1])
        except (OSError, ValueError, IndexError): continue
        kids.setdefault(ppid, []).append(int(d.name))
    return kids


def workers(p: subprocess.Popen) -> dict[int, int]:
    "Rank -> pid of torchrun's workers under `p` (those that have started)."
    kids, found, todo = _children(), {}, [p.pid]
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try: env = Path(f'/proc/{pid}/environ').read_bytes().split(b'\0')
        except OSError: continue
        rank = [e[5:] for e in env if e.startswith(b'RANK=')]
        if rank and b'TORCHELASTIC_RUN_ID=' in b'\0'.join(env): found[int(rank[0])] = pid
    return found


@contextlib.contextmanager
def job(args: list, **kw):
    "torchrun of `args` (2 processes); torchrun and its workers killed on leaving, whatever happened."
    seen = {}
    with procs.started([*TORCHRUN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                       **kw) as p:
        p.seen = seen
        try: yield p
        finally:
            seen.update(workers(p))
            for pid in seen.values():
                with contextlib.suppress(ProcessLookupError, PermissionError): os.killpg(pid, signal.SIGKILL)


def wait_workers_cpu(p: subprocess.Popen, seconds: float, what: str):
    "Wait until the workers of job `p` have used `seconds` more CPU time together: a point in their work."
    w = workers(p)
    used = lambda: sum(procs.pid_cpu_seconds(pid) or 0 for pid in w.values())
    c0 = used()
    procs.wait_until(p, lambda: used() - c0 >= seconds, what)


def torchrun(*args) -> subprocess.CompletedProcess:
    "A two-process job run to its end."
    with job(list(args)) as p:
        out, err = procs.communicate(p)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def alone(*args) -> subprocess.CompletedProcess:
    "One process, without torchrun: a child of the fork server (`procs.cli`), the console script less its start."
    return procs.cli(args, env=ENV)


def _weights(d: Path, name='tft_last') -> dict:
    return load_file(str(d / f'{name}.safetensors'))


def test_two_processes_train_like_one_with_twice_the_batch(tmp_path):
    """Two ranks with batch 32 each take the steps of one process with batch 64 (dropout off): the weights agree to
    float rounding after 8 steps, rank 0 alone logs, the checkpoint is the model's (no DDP names), in one process."""
    one, two = tmp_path / 'one', tmp_path / 'two'
    a = alone('tft_train', '--epochs', '1', *SMALL, *SHORT, '--dropout', '0', '--batch-size', '64',
              '--checkpoint-dir', one)
    b = torchrun('tft_train', '--epochs', '1', *SMALL, *SHORT, '--dropout', '0', '--batch-size', '32',
                 '--checkpoint-dir', two)
    assert a.returncode == 0 and b.returncode == 0, a.stderr[-2000:] + b.stderr[-3000:]
    wa, wb = _weights(one), _weights(two)
    assert wa.keys() == wb.keys() and not any(k.startswith('module.') for k in wb)
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-5
    sa, sb = (json.loads((d / 'tft_last.json').read_text()) for d in (one, two))
    assert (sa['global_step'], sb['global_step'], sa['world_size'], sb['world_size']) == (8, 8, 1, 2)
    assert b.stderr.count('Configuration:') == 1 and b.stderr.count('Epoch 1/1:') == 1, b.stderr[-3000:]
    assert 'Distributed: 2 processes (gloo), each with its share of every batch: 32 windows a process, 64 a batch' \
        in b.stderr
    p = alone('tft_predict', '--checkpoint', two / 'tft_best', '--output', tmp_path / 'f.csv', '--device', 'cpu')
    assert p.returncode == 0 and len(pd.read_csv(tmp_path / 'f.csv')) == 10, p.stderr[-2000:]


def test_an_ensemble_trains_one_member_per_process(tmp_path):
    """`--ensemble 2` under torchrun: each process trains one member alone (the weights of a one-process ensemble),
    the first writes the ensemble, which forecasts."""
    one, two = tmp_path / 'one', tmp_path / 'two'
    args = ['--epochs', '1', *SMALL, *SHORT, '--ensemble', '2', '--batch-size', '64']
    a = alone('tft_train', *args, '--checkpoint-dir', one)
    b = torchrun('tft_train', *args, '--checkpoint-dir', two)
    assert a.returncode == 0 and b.returncode == 0, a.stderr[-2000:] + b.stderr[-3000:]
    assert 'Ensemble of 2 over 2 processes: each trains members of its own' in b.stderr, b.stderr[-3000:]
    assert b.stderr.count('Ensemble member 1 of 2') == 1 and 'Ensemble member 2 of 2' not in b.stderr   # rank 1 quiet
    wa, wb = _weights(one, 'tft_best'), _weights(two, 'tft_best')
    assert wa.keys() == wb.keys() and {k.split('.')[1] for k in wb} == {'0', '1'}
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-5               # each member as if alone
    assert json.loads((two / 'member_02' / 'tft_last.json').read_text())['world_size'] == 1
    p = alone('tft_predict', '--checkpoint', two / 'tft_best', '--output', tmp_path / 'f.csv', '--device', 'cpu')
    assert p.returncode == 0 and len(pd.read_csv(tmp_path / 'f.csv')) == 10, p.stderr[-2000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_two_machines_through_a_c10d_rendezvous(tmp_path):
    """Two torchrun agents of one process each, as two machines would run them (`--nnodes 2`, a c10d rendezvous),
    train one model: one of them writes the run, of world size 2, the other nothing."""
    port, ck = _free_port(), tmp_path / 'ck'
    args = ['--nnodes', '2', '--nproc-per-node', '1', '--rdzv-backend', 'c10d', '--rdzv-endpoint', f'127.0.0.1:{port}',
            '--rdzv-id', 'two-machines', '--no-python', 'tft_train', '--epochs', '1', *SMALL, *SHORT,
            '--batch-size', '32', '--checkpoint-dir', ck]
    launch = [sys.executable, '-m', 'torch.distributed.run', *args]
    with procs.started(launch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV) as a, \
         procs.started(launch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV) as b:
        try: errs = [procs.communicate(a)[1], procs.communicate(b)[1]]
        finally:
            for p in (a, b):
                for pid in workers(p).values():
                    with contextlib.suppress(ProcessLookupError, PermissionError): os.killpg(pid, signal.SIGKILL)
    assert (a.returncode, b.returncode) == (0, 0), errs[0][-2000:] + errs[1][-2000:]
    assert sorted(e.count('Epoch 1/1:') for e in errs) == [0, 1]
    assert json.loads((ck / 'tft_last.json').read_text())['world_size'] == 2


GLOO_THREADS_AT_EXIT = """
import atexit, os, sys
from tft_nb.cli import main_train
def gloo() -> list:
    names = (open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir('/proc/self/task'))
    return sorted(n for n in names if 'gloo' in n)
atexit.register(lambda: print('gloo threads at exit:', gloo()))
main_train(sys.argv[1:])
"""


def test_no_gloo_thread_outlives_the_run(tmp_path):
    """`tft_train` in a one-rank world, as torchrun starts a process (so a gloo group and DistributedDataParallel):
    when the interpreter begins to shut down, the group's gloo threads are gone, none left to abort the shutdown
    (20_distributed, Ending the group)."""
    env = {**ENV, 'RANK': '0', 'WORLD_SIZE': '1', 'LOCAL_RANK': '0', 'MASTER_ADDR': '127.0.0.1',
           'MASTER_PORT': str(_free_port())}
    r = procs.run([sys.executable, '-c', GLOO_THREADS_AT_EXIT, '--epochs', '1', *SMALL, *SHORT, '--batch-size', '32',
                   '--checkpoint-dir', str(tmp_path / 'ck')], env=env)
    assert r.returncode == 0 and 'Distributed: 1 process (gloo)' in r.stderr, r.stderr[-2000:]
    assert r.stdout.splitlines()[-1] == 'gloo threads at exit: []', r.stdout[-2000:]


def test_a_killed_rank_ends_the_job(tmp_path):
    """SIGKILL to rank 1 after the first epoch: the job ends with a non-zero status (bounded by the safety limit
    only), torchrun's summary names rank 1 and the signal, and the folder keeps a whole checkpoint."""
    ck = tmp_path / 'ck'
    long_run = ['--epochs', '200', '--no-compile']                  # eager: the test kills it after epoch 1
    with job(['tft_train', *long_run, *SMALL, *SHORT, '--batch-size', '32', '--checkpoint-dir', ck]) as p:
        procs.wait_until(p, lambda: (ck / 'metrics.csv').exists() and 1 in workers(p), 'epoch 1 saved')
        p.seen.update(workers(p))
        os.kill(p.seen[1], signal.SIGKILL)
        err = procs.communicate(p)[1]
    assert p.returncode != 0
    cause = err.split('Root Cause')[-1]
    assert re.search(r'rank\s*: 1 \(local_rank: 1\)', cause) and 'SIGKILL' in cause, err[-3000:]
    weights, side, _ = load_checkpoint(ck / 'tft_last')
    assert side['epoch'] >= 1 and side['world_size'] == 2 and weights


def _epoch(side: Path) -> int | None:
    try: return json.loads(side.read_text())['epoch']
    except (OSError, ValueError, KeyError): return None


def test_a_two_process_run_resumes_exactly_and_in_one_process_with_a_line(tmp_path):
    """SIGTERM to torchrun inside epoch 2 (a scheduler's preemption): both ranks stop after the same step, rank 0
    saves it and says so once; resumed by two processes, the run ends with the weights and metrics of an
    uninterrupted run, bit for bit; resumed by one, it says that the order of the batches changes and ends."""
    args = ['tft_train', '--epochs', '2', *SMALL, '--batch-size', '32', '--dropout', '0.1', *MIDDLE]
    full, part = tmp_path / 'full', tmp_path / 'part'
    r = torchrun(*args, '--checkpoint-dir', full)
    assert r.returncode == 0, r.stderr[-3000:]
    with job([*args, '--checkpoint-dir', part]) as p:
        procs.wait_until(p, lambda: _epoch(part / 'tft_last.json') == 1, 'epoch 1 saved')
        wait_workers_cpu(p, 0.5, '0.5 CPU seconds of epoch 2 in the workers')
        p.send_signal(signal.SIGTERM)
        err = procs.communicate(p)[1]
    lines = [x for x in err.splitlines() if x.startswith('tft_train: interrupted; SIGTERM')]
    assert len(lines) == 1 and re.search(r'at step \d+ of 47 of epoch 2', lines[0]), err[-3000:]
    shutil.copytree(part, tmp_path / 'part1')
    r = torchrun(*args, '--checkpoint-dir', part, '--resume', 'last')
    assert r.returncode == 0 and 'step(s) of epoch 2 (global step' in r.stderr, r.stderr[-3000:]
    a, b = _weights(full), _weights(part)
    assert a.keys() == b.keys() and [k for k in a if not torch.equal(a[k], b[k])] == []
    pd.testing.assert_frame_equal(pd.read_csv(full / 'metrics.csv').drop(columns='seconds'),
                                  pd.read_csv(part / 'metrics.csv').drop(columns='seconds'))
    r = alone(*args, '--checkpoint-dir', tmp_path / 'part1', '--resume', 'last')
    assert r.returncode == 0, r.stderr[-3000:]
    assert ('The run trained on 2 process(es) and goes on with 1: a batch now takes 1 times batch_size windows, so '
            'the order of the batches changes; epoch 2, stopped after') in r.stderr, r.stderr[-3000:]
    assert json.loads((tmp_path / 'part1' / 'tft_last.json').read_text())['world_size'] == 1   # what trained last


def test_an_overwrite_stopped_in_its_first_epoch_keeps_the_earlier_run(tmp_path):
    """SIGTERM inside the first epoch of a two-process run that would replace an earlier run: no rank saves (rank 0
    would replace the earlier run), both stop together with one line, and the earlier run is as it was."""
    ck = tmp_path / 'ck'
    r = alone('tft_train', '--epochs', '1', *SMALL, *SHORT, '--checkpoint-dir', ck)
    assert r.returncode == 0, r.stderr[-2000:]
    before = {p.name: p.read_bytes() for p in ck.iterdir()}
    with job(['tft_train', '--epochs', '3', *SMALL, '--batch-size', '32', '--overwrite', '--checkpoint-dir', ck]) as p:
        procs.wait_until(p, lambda: (ck / '.tft_run.lock').exists() and len(workers(p)) == 2, 'the folder locked')
        wait_workers_cpu(p, 1.0, '1 CPU second of epoch 1 in the workers')
        p.send_signal(signal.SIGTERM)
        err = procs.communicate(p)[1]
    lines = [x for x in err.splitlines() if x.startswith('tft_train:')]
    assert len(lines) == 1 and re.search(r'interrupted; SIGTERM at step \d+ of 125 of epoch 1; no checkpoint of this '
                                         r'run yet: the earlier run in \S+ is whole', lines[0]), err[-3000:]
    assert {p.name: p.read_bytes() for p in ck.iterdir()} == before


def test_a_bad_flag_is_refused_in_one_line(tmp_path):
    """Every rank refuses it (argparse, before any setting is checked); rank 0 alone prints the line, and the job
    fails. A setting's own check: the test below."""
    line = 'tft_train: error: unrecognized arguments: --epoch 3'
    r = torchrun('tft_train', *SMALL, '--epoch', '3', '--checkpoint-dir', tmp_path / 'ck')
    assert r.returncode != 0 and r.stderr.count('tft_train: error:') == 1 and line in r.stderr, r.stderr[-3000:]
    assert not (tmp_path / 'ck').exists()


SLOW_RANK_0 = ("import os, time; from tft_nb.cli import main_train; "
               "time.sleep(3 * (os.environ['RANK'] == '0')); main_train()")     # tft_train, rank 0 three seconds late


def test_a_bad_setting_is_refused_in_one_line_when_rank_1_refuses_first(tmp_path):
    """Rank 0 starts late, so rank 1 refuses the setting first: it leaves with 0 and torchrun waits for rank 0's line
    (a rank that exited with 2 first made torchrun stop rank 0 before it printed)."""
    r = torchrun(sys.executable, '-c', SLOW_RANK_0, *SMALL, '--epochs', '0', '--checkpoint-dir', tmp_path / 'ck')
    line = 'tft_train: error: --epochs must be >= 1, got 0'
    assert r.returncode != 0 and r.stderr.count('tft_train: error:') == 1 and line in r.stderr, r.stderr[-3000:]
