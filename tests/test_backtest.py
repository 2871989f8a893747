"End-to-end tests of `tft_backtest`: the table it writes, and a backtest killed in a fold that resumes to the same."
import json, os, signal, subprocess
import pandas as pd
import procs

ARGS = ['tft_backtest', '--hidden-size', '8', '--attention-heads', '2', '--lstm-layers', '1', '--encoder-length', '20',
        '--batch-size', '64', '--dropout', '0.1', '--epochs', '2', '--device', 'cpu', '--start', '2017-01-01',
        '--every', '120', '--folds', '3', '--val-bars', '120', '--window', 'sliding', '--train-bars', '750']
ENV = {**os.environ, 'PYTHONHASHSEED': '0', 'OMP_NUM_THREADS': '1'}   # one thread: see test_cli
MODELS = ['TFT', 'TFT calibrated', 'persistence', 'rolling_mean_22', 'garch11']

def _holds_epoch(side, n): return side.exists() and json.loads(side.read_text())['epoch'] == n

def test_killed_backtest_resumes_to_the_same_table(tmp_path):
    "A full backtest's table, then one killed inside its second fold's second epoch and run again: the same table."
    full, cut = tmp_path / 'full', tmp_path / 'cut'
    r = procs.run([*ARGS, '--checkpoint-dir', str(full)], env=ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    table = pd.read_csv(full / 'backtest.csv')
    assert table.fold.astype(str).tolist() == [str(k) for k in (1, 2, 3) for _ in MODELS] + ['all'] * len(MODELS)
    assert table.model.tolist()[:len(MODELS)] == MODELS
    assert 'Walk-forward backtest, 3 fold(s)' in r.stderr and 'garch11' in r.stderr, r.stderr[-3000:]
    side = cut / 'fold_002' / 'tft_last.json'
    with procs.started([*ARGS, '--checkpoint-dir', str(cut)], env=ENV, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL) as p:
        procs.wait_until(p, lambda: _holds_epoch(side, 1), "fold 2's epoch 1 saved in its tft_last")
        procs.wait_cpu(p, 0.3, 'a little of epoch 2 of fold 2')
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert (cut / 'fold_001' / 'forecasts.csv').is_file() and not (cut / 'fold_002' / 'forecasts.csv').exists()
    assert not (cut / 'backtest.csv').exists()
    r = procs.run([*ARGS, '--checkpoint-dir', str(cut)], env=ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'Fold 1: done in an earlier run' in r.stderr and 'Resumed from' in r.stderr, r.stderr[-3000:]
    assert (cut / 'backtest.csv').read_bytes() == (full / 'backtest.csv').read_bytes()
    for k in (1, 2, 3):
        name = f'fold_{k:03d}/forecasts.csv'
        assert (cut / name).read_bytes() == (full / name).read_bytes(), name

def test_other_settings_in_the_same_folder_are_refused(tmp_path):
    "A backtest folder remembers its settings: rerun with others, it is one line naming them, and nothing changes."
    ck = tmp_path / 'bt'
    r = procs.run([*ARGS, '--folds', '1', '--checkpoint-dir', str(ck)], env=ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    before = sorted((p.name, p.stat().st_mtime_ns) for p in ck.rglob('*'))
    r = procs.run([*ARGS, '--folds', '1', '--every', '100', '--checkpoint-dir', str(ck)], env=ENV)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert 'holds a backtest with other settings (--every); choose another --checkpoint-dir' in lines[0], lines[0]
    assert sorted((p.name, p.stat().st_mtime_ns) for p in ck.rglob('*')) == before
