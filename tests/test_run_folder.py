"""A run folder that cannot mix runs, lose a run or call a diverged run a success (issue 25): the folder lock, two
runs started at once, a full disk under --overwrite, a signal inside an epoch, divergence, and what killed saves
leave behind."""
import json, logging, os, re, signal, subprocess, sys, textwrap
from pathlib import Path
import pandas as pd, pytest, torch
from safetensors.torch import load_file, save
from tft_nb.checkpoint import load_checkpoint, LEFTOVER
from tft_nb.folder_lock import FolderLock, LOCK_NAME
import tft_nb.checkpoint as ckmod
import procs

SMALL = ['--hidden-size', '8', '--attention-heads', '2', '--lstm-layers', '1', '--encoder-length', '20']
QUICK = ['tft_train', '--epochs', '1', *SMALL, '--batch-size', '256', '--device', 'cpu']
RESUMABLE = ['tft_train', '--epochs', '2', *SMALL, '--batch-size', '128', '--dropout', '0.1', '--device', 'cpu']


# one thread a run: these tiny models gain nothing from two, and two threads a run spin against each other on a
# loaded machine
ENV = {**os.environ, 'PYTHONHASHSEED': '0', 'OMP_NUM_THREADS': '1'}


def run(*args):
    "A console script run to its end in a child of the fork server (`procs.cli`): as the script, less its start."
    return procs.cli(args, env=ENV)


def _tree(d: Path) -> dict:
    "Every file under `d` with its bytes: equal before and after means nothing was written or damaged."
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob('*')) if p.is_file()}


def _lines(r) -> list[str]: return r.stderr.strip().splitlines()


def _run_ids(d: Path) -> set:
    "The run ids of the sidecars in `d`."
    return {json.loads(p.read_text())['run_id'] for p in d.glob('tft_*.json')}


def _hidden(d: Path) -> list[str]: return sorted(p.name for p in d.iterdir() if p.name.startswith('.'))


def _finished(tmp_path_factory, args: list) -> Path:
    "The folder of a finished run of `args`."
    ck = tmp_path_factory.mktemp('run') / 'ck'
    r = run(*args, '--checkpoint-dir', str(ck))
    assert r.returncode == 0, r.stderr[-2000:]
    return ck


@pytest.fixture(scope='module')
def one_run(tmp_path_factory):
    "A finished one-epoch run of a tiny model on the built-in data (tests copy it before changing anything)."
    return _finished(tmp_path_factory, QUICK)


def test_a_second_run_meets_the_lock_and_names_its_holder(one_run, tmp_path):
    "While a process holds the folder, tft_train is refused in one line naming it, and the folder is unchanged."
    ck = tmp_path / 'ck'
    ck.mkdir()
    (ck / 'notes.txt').write_text('mine')
    lock = FolderLock.take(ck, logging.getLogger('tft_nb'))
    try:
        before = _tree(ck)
        for extra in ([], ['--resume', str(one_run / 'tft_last')], ['--overwrite']):
            r = run(*QUICK, '--checkpoint-dir', str(ck), *extra)
            assert r.returncode == 2 and len(_lines(r)) == 1, r.stderr[-2000:]
            assert _lines(r)[0].startswith(f'tft_train: error: --checkpoint-dir {ck} is in use by another training '
                                           f'run (process {os.getpid()} on '), r.stderr
            assert _tree(ck) == before
    finally: lock.release()
    assert sorted(os.listdir(ck)) == ['notes.txt']                     # released: the lock file is gone


HOLDER = textwrap.dedent('''
    import sys, logging
    from pathlib import Path
    from tft_nb.folder_lock import FolderLock
    FolderLock.take(Path(sys.argv[1]), logging.getLogger())
    print('locked', flush=True)
    sys.stdin.read()                       # holds the lock until killed
''')


@pytest.mark.slow
def test_a_killed_holder_leaves_the_folder_free(tmp_path):
    "SIGKILL the process that holds the lock: the system releases it, and the next run takes the folder."
    ck = tmp_path / 'ck'
    with procs.started([sys.executable, '-c', HOLDER, str(ck)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       text=True) as p:
        assert p.stdout.readline() == 'locked\n'
        r = run(*QUICK, '--checkpoint-dir', str(ck))
        assert r.returncode == 2 and f'in use by another training run (process {p.pid} on ' in r.stderr, r.stderr
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert (ck / LOCK_NAME).exists()                                   # the file stays; the lock does not
    r = run(*QUICK, '--checkpoint-dir', str(ck))
    assert r.returncode == 0, r.stderr[-2000:]
    assert LOCK_NAME not in os.listdir(ck)


@pytest.mark.slow
def test_two_runs_started_at_once_into_one_folder(tmp_path):
    "Two tft_train at the same moment into one folder: one trains, the other is refused; the folder holds one run."
    ck = tmp_path / 'ck'
    args = [*QUICK, '--checkpoint-dir', str(ck)]
    with (procs.started(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV) as a,
          procs.started(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV) as b):
        errs = procs.communicate(a)[1], procs.communicate(b)[1]
    codes = a.returncode, b.returncode
    assert sorted(codes) == [0, 2], errs
    refused = errs[codes.index(2)].strip().splitlines()
    assert len(refused) == 1 and ('is in use by another training run' in refused[0]
                                  or 'already holds a training run' in refused[0]), refused
    assert len(_run_ids(ck)) == 1 and pd.read_csv(ck / 'metrics.csv').epoch.tolist() == [1]
    load_checkpoint(ck / 'tft_last', train_state=True)


FULL_DISK = textwrap.dedent('''
    import errno, sys
    from pathlib import Path
    import tft_nb.files as files
    from tft_nb.cli import main_train
    real = files._write_temp
    def disk_full(path, data):
        print('writing', path, flush=True)
        if Path(path).name == 'tft_last.safetensors': raise OSError(errno.ENOSPC, 'No space left on device', str(path))
        return real(path, data)
    files._write_temp = disk_full
    main_train(sys.argv[1:])
''')


def test_overwrite_on_a_full_disk_keeps_the_earlier_run(one_run, tmp_path):
    """--overwrite, and the disk fills while the new run's first epoch is written: one line naming the error, and the
    earlier run is exactly as it was (its files are removed only after the new run's first checkpoint is on disk). The
    run is a process of its own, as a user's is: the full disk is its file writer raising ENOSPC."""
    ck = tmp_path / 'ck'
    ck.mkdir()
    for f in one_run.iterdir(): (ck / f.name).write_bytes(f.read_bytes())
    before = _tree(ck)
    r = procs.run([sys.executable, '-X', 'faulthandler', '-c', FULL_DISK, *QUICK[1:], '--checkpoint-dir', str(ck),
                   '--overwrite'], env=ENV)
    assert r.returncode == 2, r.stderr[-3000:]
    assert _lines(r)[-1] == f'tft_train: error: {ck}/tft_last.safetensors: No space left on device', r.stderr[-3000:]
    paths = [Path(ln.split(maxsplit=1)[1]) for ln in r.stdout.splitlines() if ln.startswith('writing ')]
    written = [p.name for p in paths if p.parent == ck]                 # the run's, not the speed layer's record
    assert written[:2] == ['tft_epoch_001.safetensors', 'tft_epoch_001.train.safetensors'], written   # the new files..
    assert _tree(ck) == before                                          # ...and the earlier run is untouched


@pytest.fixture(scope='module')
def full_run(tmp_path_factory):
    "Two uninterrupted epochs with dropout: what a resumed run must match bit for bit."
    return _finished(tmp_path_factory, RESUMABLE)


def _holds_epoch(side: Path, n: int) -> bool: return side.exists() and json.loads(side.read_text())['epoch'] == n


@pytest.mark.parametrize('sig', [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_a_signal_inside_an_epoch_saves_its_place_and_the_run_resumes_exactly(full_run, tmp_path, sig):
    """Ctrl-C or SIGTERM (a preempted machine) inside epoch 2: the step finishes, tft_last holds the run to that step,
    the line says where it stopped, the exit status is 128 + the signal; resumed, the run ends with the weights and
    metrics of the uninterrupted one, bit for bit."""
    side = tmp_path / 'tft_last.json'
    with procs.started([*RESUMABLE, '--checkpoint-dir', str(tmp_path)], sigint=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, env=ENV) as p:
        procs.wait_until(p, lambda: _holds_epoch(side, 1), 'epoch 1 saved in tft_last')
        procs.wait_cpu(p, 0.3, '0.3 CPU seconds of epoch 2')         # well inside it: it takes seconds
        p.send_signal(sig)
        err = procs.communicate(p)[1]
    assert p.returncode == 128 + sig and 'Traceback' not in err, err[-3000:]
    m = re.fullmatch(rf'tft_train: interrupted; {sig.name} at step (\d+) of (\d+) of epoch 2; {tmp_path}/tft_last '
                     r'holds epoch 1 and (\d+) step\(s\) of epoch 2: the same command with --resume last continues '
                     'from it', err.strip().splitlines()[-1])
    assert m and m[1] == m[3] and int(m[1]) < int(m[2]), err[-3000:]
    assert json.loads(side.read_text())['partial']['steps'] == int(m[1])
    assert _hidden(tmp_path) == [] and pd.read_csv(tmp_path / 'metrics.csv').epoch.tolist() == [1]
    r = run(*RESUMABLE, '--checkpoint-dir', str(tmp_path), '--resume', 'last')
    assert r.returncode == 0, r.stderr[-2000:]
    assert f'after epoch 1 and {m[1]} step(s) of epoch 2' in r.stderr, r.stderr[-3000:]
    a, b = load_file(str(full_run / 'tft_last.safetensors')), load_file(str(tmp_path / 'tft_last.safetensors'))
    assert a.keys() == b.keys() and [k for k in a if not torch.equal(a[k], b[k])] == []
    pd.testing.assert_frame_equal(pd.read_csv(full_run / 'metrics.csv').drop(columns='seconds'),
                                  pd.read_csv(tmp_path / 'metrics.csv').drop(columns='seconds'))


@pytest.mark.slow
def test_a_killed_run_resumes_exactly(full_run, tmp_path):
    """SIGKILL inside epoch 2 (no step finishes, nothing is said): tft_last still holds epoch 1; resumed from it, the
    run ends with the weights and metrics of the uninterrupted one, bit for bit, and leaves no hidden file."""
    side = tmp_path / 'tft_last.json'
    with procs.started([*RESUMABLE, '--checkpoint-dir', str(tmp_path)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=ENV) as p:
        procs.wait_until(p, lambda: _holds_epoch(side, 1), 'epoch 1 saved in tft_last')
        procs.wait_cpu(p, 0.3, '0.3 CPU seconds of epoch 2')         # well inside it: it takes seconds
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert json.loads(side.read_text())['epoch'] == 1, 'the kill came too late: epoch 2 had finished'
    r = run(*RESUMABLE, '--checkpoint-dir', str(tmp_path), '--resume', 'last')
    assert r.returncode == 0, r.stderr[-2000:]
    assert _hidden(tmp_path) == []                                      # no lock, temporary or second name left
    a, b = load_file(str(full_run / 'tft_last.safetensors')), load_file(str(tmp_path / 'tft_last.safetensors'))
    assert a.keys() == b.keys() and [k for k in a if not torch.equal(a[k], b[k])] == []
    pd.testing.assert_frame_equal(pd.read_csv(full_run / 'metrics.csv').drop(columns='seconds'),
                                  pd.read_csv(tmp_path / 'metrics.csv').drop(columns='seconds'))


def test_a_diverged_run_fails_and_writes_nothing_non_finite(tmp_path):
    "A learning rate of 1e6 sends the weights to NaN in the first epoch: exit status 1, one line, no checkpoint."
    ck = tmp_path / 'ck'
    r = run(*QUICK, '--learning-rate', '1e6', '--lr-schedule', 'constant', '--checkpoint-dir', str(ck))
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr[-3000:]
    assert re.fullmatch(r'tft_train: error: training diverged in epoch 1: the gradient norm was NaN or infinite at '
                        r'step \d+ of the epoch \(and in \d+ step\(s\) in all\); nothing of epoch 1 was saved \(no '
                        r'checkpoint of this run was written\); lower --learning-rate or set --grad-clip, and start a '
                        r'fresh run \(with --overwrite, or in another --checkpoint-dir\)',
                        _lines(r)[-1]), r.stderr[-2000:]
    assert not ck.exists()                                              # the folder it made, removed: it held nothing


def test_predict_refuses_non_finite_weights(one_run, tmp_path):
    "A checkpoint whose weights hold NaN (written behind the library's back): one line, exit 2, no forecast file."
    ck = tmp_path / 'ck'
    ck.mkdir()
    w = load_file(str(one_run / 'tft_best.safetensors'))
    name = sorted(w)[0]
    w[name] = torch.full_like(w[name], float('nan'))
    b = save(w)
    side = json.loads((one_run / 'tft_best.json').read_text())
    side['files']['weights'].update(size=len(b), sha256=ckmod._digest(b)['sha256'])
    (ck / 'tft_best.safetensors').write_bytes(b)
    (ck / 'tft_best.json').write_text(json.dumps({**side, 'sidecar_sha256': ckmod.sidecar_digest(side)}))   # resealed
    out = tmp_path / 'fc.csv'
    r = run('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--output', str(out))
    assert r.returncode == 2 and len(_lines(r)) == 1, r.stderr[-2000:]
    assert _lines(r)[0] == (f'tft_predict: error: {ck}/tft_best.safetensors: 1 of {len(w)} weight tensors hold NaN or '
                            f'infinity ({name}): the run had diverged; use an earlier checkpoint of it, such as its '
                            'tft_best')
    assert not out.exists()


def test_resume_tidies_what_a_killed_save_left(one_run, tmp_path):
    """A save killed between its renames (made by hand: new weights under the final name, the old ones as a second
    name, the new sidecar as a temporary): the resume puts the old checkpoint back together, removes the leftovers, and
    continues."""
    ck = tmp_path / 'ck'
    ck.mkdir()
    for f in one_run.iterdir(): (ck / f.name).write_bytes(f.read_bytes())
    os.link(ck / 'tft_last.safetensors', ck / '.tft_last.safetensors.0123456789ab.prev')
    w = load_file(str(ck / 'tft_last.safetensors'))
    (ck / 'tft_last.safetensors').unlink()
    (ck / 'tft_last.safetensors').write_bytes(save({k: v + 1 for k, v in w.items()}))
    (ck / '.tft_last.json.0123456789ab.tmp').write_text('{')
    assert all(LEFTOVER.fullmatch(n) for n in _hidden(ck))
    r = run(*QUICK, '--epochs', '2', '--checkpoint-dir', str(ck), '--resume', 'last')
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'Tidied 2 file(s) that killed saves left in' in r.stderr and 'Resumed from' in r.stderr, r.stderr[-2000:]
    assert _hidden(ck) == [] and pd.read_csv(ck / 'metrics.csv').epoch.tolist() == [1, 2]
