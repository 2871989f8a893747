"End-to-end tests of tft_backtest: a short backtest writes its table; one killed by SIGKILL, run again, ends the same."
import json, os, signal, subprocess, sys
import pandas as pd, pytest
from tft_nb.data import load_sample
import procs

# the module's entry point rather than the console script: the checkout's code, wherever the package is installed
BACKTEST = [sys.executable, '-c', 'from tft_nb.cli import main_backtest; main_backtest()']
TINY = ['--hidden-size', '8', '--attention-heads', '2', '--lstm-layers', '1', '--encoder-length', '20',
        '--horizon', '3', '--batch-size', '256', '--device', 'cpu', '--lr-schedule', 'constant',
        '--start', '2018-06-01', '--every', '60', '--val-bars', '60', '--folds', '2']
MODELS = ['TFT', 'TFT calibrated', 'persistence', 'rolling_mean_22', 'garch11', 'har', 'har_pooled']
ENV = {**os.environ, 'PYTHONHASHSEED': '0', 'OMP_NUM_THREADS': '1'}   # one thread: the same sums in every process

def _bars(tmp_path):
    "The built-in bars since 2017 as a CSV file: a year and a half of training before the first fold keeps folds quick."
    f = tmp_path / 'bars.csv'
    b = load_sample()
    b[b.ts_event >= '2017-01-01'].to_csv(f, index=False)
    return f

def run(*args):
    "tft_backtest run to its end in a child of the fork server (`procs.cli`): as the script, less its start."
    return procs.cli(['tft_backtest', *args], env=ENV)

def test_backtest_writes_its_table(tmp_path):
    ck = tmp_path / 'bt'
    r = run('--data', _bars(tmp_path), *TINY, '--epochs', '1', '--checkpoint-dir', ck)
    assert r.returncode == 0, r.stderr[-3000:]
    table = pd.read_csv(ck / 'backtest.csv')
    assert table[['fold', 'model']].values.tolist() == [[f, m] for f in ('1', '2', 'overall') for m in MODELS]
    assert list(table.columns) == ['fold', 'model', 'first', 'last', 'windows', 'pinball', 'q_risk_P10', 'q_risk_P50',
                                   'q_risk_P90', 'mae_P50', 'coverage_P10_P90']
    assert table['first'].tolist()[:8] == ['2018-06-01 00:00:00+00:00'] * 7 + ['2018-08-27 00:00:00+00:00']
    assert (table.windows == [120] * 14 + [240] * 7).all()            # 60 origins a fold, each of two symbols
    assert table.drop(columns=['fold', 'model']).notna().all().all()
    assert 'Fold 1 of 2: forecasts from 2018-06-01 to 2018-08-27' in r.stderr, r.stderr[-3000:]
    assert 'per fold and overall' in r.stderr and 'har_pooled' in r.stderr.splitlines()[-1]   # the table, logged last
    assert sorted(os.listdir(ck)) == ['backtest.csv', 'backtest.json', 'fold_001', 'fold_002']
    for f in ('fold_001', 'fold_002'):
        assert {'forecasts.csv', 'fold_metrics.csv', 'tft_best.json'} <= set(os.listdir(ck / f))
    r = run('--data', _bars(tmp_path), *TINY, '--epochs', '1', '--every', '20', '--checkpoint-dir', ck)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith(f'tft_backtest: error: --checkpoint-dir {ck} holds a backtest with other settings '
                               '(--every 60 -> 20)'), lines[0]
    file = tmp_path / 'a-file'
    file.write_text('x')
    r = run('--data', _bars(tmp_path), *TINY, '--checkpoint-dir', file)                  # not 'File exists'
    said = f'tft_backtest: error: --checkpoint-dir {file} exists and is not a folder'
    assert r.returncode == 2 and r.stderr.strip() == said, r.stderr[-2000:]

def _holds_epoch(side, n): return side.exists() and json.loads(side.read_text())['epoch'] == n

@pytest.mark.slow
def test_killed_backtest_resumes_to_the_same_table(tmp_path):
    "SIGKILL a backtest inside fold 2's second epoch, run the same command again, compare with an uninterrupted one."
    data = _bars(tmp_path)
    # fold 2: 11 steps an epoch, about 0.2 s with validation; after the kill a whole epoch is left, on any host
    args = ['--data', data, *TINY, '--epochs', '3', '--dropout', '0.1', '--batch-size', '64']
    full, cut = tmp_path / 'full', tmp_path / 'cut'
    r = run(*args, '--checkpoint-dir', full)
    assert r.returncode == 0, r.stderr[-3000:]
    side = cut / 'fold_002' / 'tft_last.json'
    with procs.started([*BACKTEST, *args, '--checkpoint-dir', cut], env=ENV, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL) as p:
        procs.wait_until(p, lambda: _holds_epoch(side, 1), "fold 2's epoch 1 saved in its tft_last")
        procs.wait_cpu(p, 0.03, "a step or two of fold 2's epoch 2")   # its own work, which load does not shorten
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert (cut / 'fold_001' / 'forecasts.csv').is_file() and not (cut / 'backtest.csv').exists()
    assert not (cut / 'fold_002' / 'forecasts.csv').exists(), 'the kill came too late: fold 2 had finished'
    r = run(*args, '--checkpoint-dir', cut)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"Fold 1 was finished by an earlier run: its forecasts are read from {cut / 'fold_001' / 'forecasts.csv'}" \
        in r.stderr and 'Resumed from' in r.stderr, r.stderr[-3000:]
    for name in ('backtest.csv', 'fold_001/forecasts.csv', 'fold_002/forecasts.csv', 'fold_002/fold_metrics.csv'):
        assert (cut / name).read_bytes() == (full / name).read_bytes(), name       # the same bytes
