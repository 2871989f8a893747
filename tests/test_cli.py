"End-to-end tests of the console scripts: a short run, forecasts, one-line errors, and a killed run resumed exactly."
import json, os, re, shutil, signal, socket, stat, subprocess, threading
from pathlib import Path
import numpy as np, pandas as pd, pytest, torch
from tft_nb.data import load_sample
from tft_nb.dbn import write_dbn
import procs

SMALL = ['--hidden-size', '8', '--attention-heads', '2', '--lstm-layers', '1', '--encoder-length', '20']

# one thread a run: these small models gain nothing from two, and two threads a run spin against each other on a
# loaded machine (as in test_run_folder)
ENV = {**os.environ, 'PYTHONHASHSEED': '0', 'OMP_NUM_THREADS': '1'}

def run(*args):
    "A console script run to its end in a child of the fork server (`procs.cli`): as the script, less its start."
    return procs.cli(args, env=ENV)


def script(*args):
    "The console script itself run to its end; its process group killed in every outcome, or at a scaled safety limit."
    return procs.run(args, env=ENV)


def test_train_then_predict(tmp_path):
    ck = tmp_path / 'ck'
    r = script('tft_train', '--epochs', '3', '--hidden-size', '16', '--attention-heads', '2', '--lstm-layers', '1',
            '--encoder-length', '20', '--batch-size', '128', '--checkpoint-dir', str(ck), '--checkpoint-frequency', '1')
    assert r.returncode == 0, r.stderr[-2000:]
    names = sorted(os.listdir(ck))
    for stem in ['tft_epoch_001', 'tft_epoch_002', 'tft_epoch_003', 'tft_best', 'tft_last']:
        assert f'{stem}.safetensors' in names and f'{stem}.json' in names, names
    assert 'metrics.csv' in names
    assert pd.read_csv(ck / 'metrics.csv').epoch.tolist() == [1, 2, 3]
    assert 'Configuration:' in r.stderr and '  learning_rate: 0.001' in r.stderr
    assert 'Test metrics' in r.stderr and 'persistence' in r.stderr
    side = json.loads((ck / 'tft_best.json').read_text())
    for k in ['epoch', 'global_step', 'train_loss', 'val_loss', 'best_val_loss', 'best_epoch', 'learning_rate',
              'model_config', 'data', 'files', 'timestamp', 'versions']:
        assert k in side, k
    assert side['model_config']['hidden_size'] == 16 and side['data']['scaler']['method'] == 'zscore'
    def bare(c): raise AssertionError(f'bare {c}: not strict JSON')
    assert (json.loads((ck / 'tft_last.json').read_text(), parse_constant=bare)['scheduler']['mode_worse']
            == {'$float': 'inf'})   # strict JSON
    out = tmp_path / 'fc.csv'
    r = script('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--output', str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    fc = pd.read_csv(out)
    assert set(fc.symbol) == {'sp500', 'nasdaq'} and sorted(fc.step.unique()) == [1, 2, 3, 4, 5]
    assert ((fc['q0.1'] <= fc['q0.5']) & (fc['q0.5'] <= fc['q0.9'])).all()
    assert fc['q0.5'].between(-8, -2).all()   # log daily volatility, original units (about -4.9 on average)

def test_other_quantiles(tmp_path):
    "--quantiles 0.05,0.5,0.95: the model, the test metrics and the forecasts use those levels."
    ck = tmp_path / 'ck'
    r = run('tft_train', '--epochs', '1', *SMALL, '--batch-size', '256', '--quantiles', '0.05,0.5,0.95',
            '--checkpoint-dir', str(ck))
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'q_risk_P5' in r.stderr and 'q_risk_P95' in r.stderr and 'coverage_P5_P95' in r.stderr, r.stderr[-2000:]
    assert json.loads((ck / 'tft_best.json').read_text())['model_config']['quantiles'] == [0.05, 0.5, 0.95]
    r = run('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--output', str(tmp_path / 'fc.csv'))
    assert r.returncode == 0, r.stderr[-2000:]
    fc = pd.read_csv(tmp_path / 'fc.csv')
    assert [c for c in fc.columns if c.startswith('q')] == ['q0.05', 'q0.5', 'q0.95']
    assert ((fc['q0.05'] <= fc['q0.5']) & (fc['q0.5'] <= fc['q0.95'])).all()

@pytest.mark.slow
def test_own_inputs_train_then_predict(tmp_path):
    """A CSV with a past-observed, a known-future and a static column: trained on with --observed/--known/--static,
    named in the variable importance; tft_predict reads the columns, needs --future for the calendar's next values,
    and refuses the built-in data (no --data) to a model trained on this file."""
    bars = load_sample()
    bars = bars[bars.ts_event >= '2014-01-01'].assign(
        vix=lambda d: np.log(d.high / d.low), opex=lambda d: (d.ts_event.dt.day_of_week == 4).astype(float),
        exchange=lambda d: d.symbol.astype(str).map({'sp500': 'NYSE', 'nasdaq': 'NASDAQ'}))
    bars.to_csv(data := tmp_path / 'cov.csv', index=False)
    ck, out = tmp_path / 'ck', tmp_path / 'fc.csv'
    r = run('tft_train', '--data', str(data), '--epochs', '1', *SMALL, '--batch-size', '256', '--checkpoint-dir',
            str(ck), '--observed', 'r,lv,vix', '--known', 'dow,opex', '--static', 'exchange')
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r'static: symbol [\d.]+, exchange [\d.]+', r.stderr), r.stderr[-1500:]
    assert re.search(r'encoder: .*vix [\d.]+.*opex [\d.]+', r.stderr), r.stderr[-1500:]
    r = run('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--output', str(out))   # not the built-in data
    assert r.returncode == 2 and not out.exists(), r.stderr[-1500:]
    assert r.stderr.strip().splitlines() == [
        f"tft_predict: error: {ck / 'tft_best'} was trained on {data}, not on the built-in data: give --data, those "
        "bars or newer bars of the same symbols"]
    r = run('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--data', str(data), '--output', str(out))
    assert r.returncode == 2 and not out.exists(), r.stderr[-1500:]
    assert r.stderr.strip().splitlines() == [
        f"tft_predict: error: {data}: the known-future input 'opex' has no value for the forecast steps of nasdaq "
        "(2019-01-02 00:00:00+00:00, 2019-01-03 00:00:00+00:00, 2019-01-04 00:00:00+00:00 and 2 more): give them in "
        "--future (columns symbol, ts_event, opex; one row per symbol and time)"]
    days = pd.to_datetime(['2019-01-02', '2019-01-03', '2019-01-04', '2019-01-07', '2019-01-08'], utc=True)
    ahead = pd.DataFrame({'symbol': np.repeat(['nasdaq', 'sp500'], 5), 'ts_event': np.tile(days, 2)})
    ahead.assign(opex=(ahead.ts_event.dt.day_of_week == 4).astype(float)).to_csv(tmp_path / 'next.csv', index=False)
    r = run('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--data', str(data), '--output', str(out),
            '--future', str(tmp_path / 'next.csv'))
    assert r.returncode == 0, r.stderr[-2000:]
    fc = pd.read_csv(out)
    assert len(fc) == 10 and fc.ts_event.str[:10].tolist() == [str(d.date()) for d in days] * 2
    r = run('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--data', str(data), '--output', str(out),
            '--future', str(tmp_path / 'nope.csv'))
    assert r.returncode == 2 and r.stderr.strip() == f"tft_predict: error: {tmp_path / 'nope.csv'}: no such file"

@pytest.mark.slow
def test_intraday_databento_folder(tmp_path):
    """Minute bars in a Databento-style folder (bars beside metadata JSON): train, then forecasts from the next
    session's open."""
    rng, frames = np.random.default_rng(0), []
    for sym in ('AAA', 'BBB'):
        for day in pd.bdate_range('2024-01-08', '2024-01-17'):    # Monday to the next Wednesday, 390 bars a session
            ts = pd.date_range(f'{day.date()} 14:30', periods=390, freq='1min', tz='UTC')
            c = 100 * np.exp(np.cumsum(rng.normal(0, 1e-3, len(ts))))
            o = np.r_[c[0], c[:-1]]
            frames.append(pd.DataFrame(dict(ts_event=ts, symbol=sym, open=o, high=np.maximum(o, c) + 0.01,
                                            low=np.minimum(o, c) - 0.01, close=c,
                                            volume=rng.integers(100, 1000, len(ts)).astype(float))))
    data = tmp_path / 'download'
    data.mkdir()
    write_dbn(pd.concat(frames, ignore_index=True), data / 'xnas-itch-20240108-20240117.ohlcv-1m.dbn.zst', zstd=True)
    for j in ('metadata', 'manifest', 'symbology', 'condition'): (data / f'{j}.json').write_text('{}')
    ck, out = tmp_path / 'ck', tmp_path / 'fc.csv'
    r = run('tft_train', '--data', str(data), '--epochs', '1', *SMALL, '--checkpoint-dir', str(ck))
    assert r.returncode == 0, r.stderr[-2000:]
    assert ('skipped 4 file(s) not named as bars: condition.json, manifest.json, metadata.json, symbology.json'
            in r.stderr)
    assert "  known: ('dow', 'hour', 'minute')" in r.stderr                # the time of day, for minute bars
    r = run('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--data', str(data), '--output', str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    fc = pd.read_csv(out)
    assert fc.origin.unique().tolist() == ['2024-01-17 20:59:00+00:00']   # Wednesday's last bar
    assert (fc.groupby('symbol').ts_event.apply(list).tolist()
            == [[f'2024-01-18 14:3{k}:00+00:00' for k in range(5)]] * 2)   # Thursday's open

def test_earlier_run_is_kept(tmp_path):
    "A fresh run in a folder holding another run's checkpoints stops with one line and leaves the folder as it was."
    ck = tmp_path / 'ck'
    ck.mkdir()
    (ck / 'tft_best.safetensors').write_bytes(b'weights')
    (ck / 'metrics.csv').write_text('epoch\n1\n')
    r = run('tft_train', '--checkpoint-dir', str(ck))
    lines = r.stderr.strip().splitlines()
    assert (r.returncode == 2 and len(lines) == 1 and 'already holds a training run' in lines[0]
            and '--overwrite' in lines[0]), r.stderr
    assert (sorted(os.listdir(ck)) == ['metrics.csv', 'tft_best.safetensors']
            and (ck / 'tft_best.safetensors').read_bytes() == b'weights')

def test_use_gpu_without_cuda(tmp_path):
    if torch.cuda.is_available(): pytest.skip('CUDA is available here: --use-gpu is valid')
    r = run('tft_train', '--use-gpu', '--checkpoint-dir', str(tmp_path / 'ck'))
    assert r.returncode == 2 and 'CUDA was requested' in r.stderr and not (tmp_path / 'ck').exists()
    out = tmp_path / 'fc.csv'   # tft_predict has --device only; the message names it (the checkpoint is not read first)
    r = run('tft_predict', '--checkpoint', str(tmp_path / 'none'), '--device', 'cuda', '--output', str(out))
    lines = r.stderr.strip().splitlines()
    assert (r.returncode == 2 and len(lines) == 1 and 'CUDA was requested' in lines[0]
            and "CUDA was requested (--device cuda)" in lines[0] and not out.exists()), r.stderr

def _one_line(r, prog='tft_train'):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f'{prog}: error:'), r.stderr[-3000:]
    return lines[0]

def _tree(d: Path) -> dict:
    "Every file under `d` with its size and modification time: equal before and after means nothing was written."
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(d.rglob('*')) if p.is_file()}

def test_a_batch_whose_activations_cannot_fit_is_refused(tmp_path):
    "1.5 TB of activations on the built-in data: refused before training, naming the flags that size them."
    line = _one_line(run('tft_train', '--batch-size', '100000', '--hidden-size', '1024', '--encoder-length', '500',
                         '--checkpoint-dir', str(tmp_path / 'ck')))
    assert 'MiB of activations per window (--hidden-size 1024, --encoder-length 500 + --horizon 5)' in line, line
    assert not (tmp_path / 'ck').exists()

def test_symbol_without_training_windows(tmp_path):
    """A symbol whose bars all come after the validation start: refused before training, naming it (it used to fail
    after training, in the baselines)."""
    b = load_sample()
    f = tmp_path / 'late.csv'
    pd.concat([b[b.symbol == 'sp500'].tail(400), b[b.symbol == 'nasdaq'].tail(5)]).to_csv(f, index=False)
    line = _one_line(run('tft_train', '--data', str(f), '--epochs', '1', *SMALL,
                         '--checkpoint-dir', str(tmp_path / 'ck')))
    assert (f'{f}: no training windows for nasdaq:' in line
            and '(by default: the last 30% of the timestamps), and before it nasdaq has 0;' in line), line
    assert not (tmp_path / 'ck').exists()

@pytest.fixture(scope='module')
def one_run(tmp_path_factory):
    """A finished two-epoch run of a tiny model on the built-in data (shared; tests copy it before changing
    anything)."""
    ck = tmp_path_factory.mktemp('run') / 'a'
    r = run('tft_train', '--epochs', '2', *SMALL, '--batch-size', '256', '--checkpoint-dir', str(ck))
    assert r.returncode == 0, r.stderr[-2000:]
    return ck

def test_resume_with_other_settings_is_refused(one_run):
    before = _tree(one_run)
    line = _one_line(run('tft_train', '--epochs', '3', *SMALL, '--batch-size', '256', '--checkpoint-dir', str(one_run),
                         '--resume', 'last', '--learning-rate', '0.5', '--horizon', '3'))
    assert 'other settings' in line and '--horizon 5 -> 3' in line and '--learning-rate 0.001 -> 0.5' in line, line
    line = _one_line(run('tft_train', '--epochs', '3', *SMALL, '--batch-size', '256', '--checkpoint-dir', str(one_run),
                         '--resume', 'last', '--val-start', '2016-01-01'))   # other splits: val losses differ
    assert "--val-start '2015-01-01' -> '2016-01-01'" in line, line
    assert _tree(one_run) == before

def test_resume_into_another_run_is_refused_and_into_a_new_folder_works(one_run, tmp_path):
    other = tmp_path / 'other'
    other.mkdir()
    (other / 'metrics.csv').write_text('epoch\n1\n')
    a_before, o_before = _tree(one_run), _tree(other)
    args = ['tft_train', '--epochs', '3', *SMALL, '--batch-size', '256', '--resume', str(one_run / 'tft_last')]
    line = _one_line(run(*args, '--checkpoint-dir', str(other)))
    assert 'already holds a training run' in line, line
    assert _tree(one_run) == a_before and _tree(other) == o_before
    new = tmp_path / 'new'
    r = run(*args, '--checkpoint-dir', str(new))
    assert r.returncode == 0, r.stderr[-2000:]
    assert _tree(one_run) == a_before                                   # the resumed run's own folder is left alone
    assert pd.read_csv(new / 'metrics.csv').epoch.tolist() == [1, 2, 3]
    best = json.loads((new / 'tft_best.json').read_text())['epoch']
    assert best == json.loads((new / 'tft_last.json').read_text())['best_epoch']   # the best so far, carried over

def test_overwrite_interrupted_in_its_first_epoch_keeps_the_earlier_run(one_run, tmp_path):
    """Ctrl-C in the first epoch of an --overwrite run (a run started in the wrong folder, say): nothing is saved, the
    earlier run's files are all still there, and the line says so."""
    ck = tmp_path / 'ck'
    shutil.copytree(one_run, ck)
    before = _tree(ck)
    with procs.started(['tft_train', '--epochs', '2', *SMALL, '--batch-size', '64', '--device', 'cpu',
                        '--checkpoint-dir', str(ck), '--overwrite'],
                       sigint=True, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as p:
        while not (line := p.stderr.readline()).startswith('Model:'):   # the first epoch begins
            assert line, 'the run ended before training'
        p.send_signal(signal.SIGINT)
        err = procs.communicate(p)[1]
    assert p.returncode == 130 and re.fullmatch(
        rf"tft_train: interrupted; SIGINT at step \d+ of \d+ of epoch 1; no checkpoint of this run yet: the earlier "
        rf"run in {ck} is whole \(--overwrite replaces it at this run's first checkpoint\)",
        err.strip().splitlines()[-1]), err[-3000:]
    assert _tree(ck) == before

@pytest.mark.parametrize('sig', [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_ctrl_c_while_compiling_stops_at_once(tmp_path, sig):
    """Ctrl-C or SIGTERM while the run compiles (minutes the first time, here from an empty inductor cache): the run
    stops at once, not after the compile and a step, and the line says that nothing of it was written."""
    ck, env = tmp_path / 'ck', {**ENV, 'TORCHINDUCTOR_CACHE_DIR': str(tmp_path / 'inductor')}
    with procs.started(['tft_train', '--epochs', '1', *SMALL, '--batch-size', '64', '--device', 'cpu', '--compile',
                        '--checkpoint-dir', str(ck)],
                       sigint=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as p:
        while not (line := p.stderr.readline()).startswith('Configuration:'):   # just before the compile
            assert line, 'the run ended before its configuration'
        p.send_signal(sig)
        err = procs.communicate(p)[1]
    assert p.returncode == 128 + sig, err[-3000:]
    assert err.strip().splitlines()[-1] == f"tft_train: interrupted; no checkpoint in {ck} yet", err[-3000:]
    assert 'torch.compile' not in err and not list(ck.glob('tft_*')), err[-3000:]

def test_overwrite_when_resuming_into_a_folder_with_another_run(one_run, tmp_path):
    """--resume from one folder into another that holds an earlier run, with --overwrite: the earlier run's files go
    before the carried tft_best is written."""
    ck = tmp_path / 'ck'
    shutil.copytree(one_run, ck)
    (ck / 'tft_epoch_009.json').write_text('{}')   # an earlier run, with a file this one never writes
    r = run('tft_train', '--epochs', '2', *SMALL, '--batch-size', '256', '--checkpoint-dir', str(ck),
            '--resume', str(one_run / 'tft_last'), '--overwrite')
    assert r.returncode == 0 and 'Nothing left to train' in r.stderr, r.stderr[-2000:]
    # the earlier run gone, the run's best carried
    assert sorted(os.listdir(ck)) == ['tft_best.json', 'tft_best.safetensors'], os.listdir(ck)
    assert (json.loads((ck / 'tft_best.json').read_text())['epoch']
            == json.loads((one_run / 'tft_best.json').read_text())['epoch'])

def test_predict_skips_untrained_symbols(one_run, tmp_path):
    "A file with a symbol the model was not trained on: forecasts for the others, and a warning naming it."
    sp = load_sample().query("symbol == 'sp500'").tail(100)
    pd.concat([sp, sp.assign(symbol='NEW')]).to_csv(tmp_path / 'bars.csv', index=False)
    r = run('tft_predict', '--checkpoint', str(one_run / 'tft_best'), '--data', str(tmp_path / 'bars.csv'),
            '--output', str(tmp_path / 'fc.csv'))
    assert r.returncode == 0, r.stderr[-2000:]
    assert (f"{tmp_path / 'bars.csv'}: no forecasts for NEW: not among the trained symbols ['nasdaq', 'sp500']"
            in r.stderr)
    assert set(pd.read_csv(tmp_path / 'fc.csv').symbol) == {'sp500'}
    assert r.stderr.strip().splitlines()[-1] == (
        f"Wrote 5 forecasts (5 steps from each of 1 origin, 1 symbol) to {tmp_path / 'fc.csv'}"), r.stderr[-500:]

def test_predict_never_writes_over_its_inputs(one_run, tmp_path):
    """An --output that is the data file, a data-named file in the data folder, or a file of the checkpoint's run is
    refused; the inputs stay as they were."""
    data = tmp_path / 'bars'
    data.mkdir()
    load_sample().query("symbol == 'sp500'").tail(300).to_csv(data / 'sp.csv', index=False)
    before, run_before = _tree(data), _tree(one_run)
    ck = str(one_run / 'tft_best')
    for args, why in [(['--data', str(data / 'sp.csv'), '--output', str(data / 'sp.csv')], 'is the --data file'),
                      (['--data', str(data), '--output', str(data / 'fc.csv')],
                       'is in the --data folder, where the next run would read it as bars'),
                      (['--output', str(one_run / 'tft_best.json')], "is a file of the checkpoint's run"),
                      (['--output', str(one_run / 'metrics.csv')], "is a file of the checkpoint's run")]:
        line = _one_line(run('tft_predict', '--checkpoint', ck, *args), 'tft_predict')
        assert f'--output {args[-1]} {why}; write the forecasts elsewhere' in line, line
    assert _tree(data) == before and _tree(one_run) == run_before
    # not named as bars: fine there
    r = run('tft_predict', '--checkpoint', ck, '--data', str(data), '--output', str(data / 'fc.txt'))
    assert r.returncode == 0 and (data / 'fc.txt').is_file(), r.stderr[-2000:]

@pytest.mark.slow
def test_predict_test_split_is_the_runs_own(tmp_path):
    """A run split by fractions: tft_predict --split test on a shorter file (its first half cut) forecasts the run's
    test period, not the file's last 15%."""
    full, cut, ck = tmp_path / 'full.csv', tmp_path / 'cut.csv', tmp_path / 'ck'
    sp = load_sample().query("symbol == 'sp500'").tail(800)
    sp.to_csv(full, index=False)
    sp.tail(400).to_csv(cut, index=False)
    r = run('tft_train', '--data', str(full), '--epochs', '1', *SMALL, '--batch-size', '256',
            '--checkpoint-dir', str(ck))
    assert r.returncode == 0, r.stderr[-2000:]
    origins = {}
    for f in (full, cut):
        r = run('tft_predict', '--checkpoint', str(ck / 'tft_best'), '--data', str(f), '--split', 'test',
                '--output', str(tmp_path / f'fc_{f.stem}.csv'))
        assert r.returncode == 0, r.stderr[-2000:]
        origins[f.stem] = pd.read_csv(tmp_path / f'fc_{f.stem}.csv').origin.unique().tolist()
    # not the cut file's own last 15% (about 60 origins)
    assert origins['cut'] == origins['full'] and len(origins['full']) > 100, (len(origins['full']), len(origins['cut']))

def test_predict_split_without_windows(one_run, tmp_path):
    "--split val on bars that all come after the checkpoint's validation split: one line naming the file and the split."
    f = tmp_path / 'recent.csv'
    load_sample().query("symbol == 'sp500'").tail(300).to_csv(f, index=False)
    line = _one_line(run('tft_predict', '--checkpoint', str(one_run / 'tft_best'), '--data', str(f), '--split', 'val',
                         '--output', str(tmp_path / 'fc.csv')), 'tft_predict')
    assert (f"{f}: the checkpoint's val split has no windows in these bars: it ends at 2017-01-01 00:00:00+00:00, "
            "before these bars begin" in line and '--split future' in line), line
    assert not (tmp_path / 'fc.csv').exists()

def test_help_lists_every_setting_with_its_comment():
    "tft_train --help: a flag for every config field (the data-derived model sizes aside), its comment as help text."
    from dataclasses import fields
    from fastcore.docments import docments
    from tft_nb.data_config import DataConfig
    from tft_nb.model import TFTConfig
    from tft_nb.train import TrainConfig
    from tft_nb.cli import data_sized
    r = script('tft_train', '--help')
    assert r.returncode == 0, r.stderr
    text = ' '.join(r.stdout.split())                                   # argparse wraps the help text
    for cls, skip in ((DataConfig, set()), (TFTConfig, data_sized()), (TrainConfig, set())):
        comments = docments(cls)
        for f in fields(cls):
            if f.name in skip: continue
            assert '--' + f.name.replace('_', '-') in text, f.name
            assert ' '.join(comments[f.name].split()) in text, (f.name, comments[f.name])
    for flag in ('--use-gpu', '--fp32', '--data', '--resume'): assert flag in text, flag

def test_predict_never_replaces_a_special_file(one_run, tmp_path):
    """--output '-', /dev/stdout, a FIFO or a character device is written into as a stream, never replaced by a
    regular file; a socket is refused in one line (issue 51, item 1)."""
    ck = ['--checkpoint', str(one_run / 'tft_best')]
    for out in ('-', '/dev/stdout'):
        r = run('tft_predict', *ck, '--output', out)
        assert r.returncode == 0 and r.stdout.startswith('symbol,origin,step,ts_event'), r.stderr[-2000:]
        assert len(r.stdout.splitlines()) == 11                             # the header, 5 steps of 2 symbols
    r = run('tft_predict', *ck, '--output', '/dev/null')
    assert r.returncode == 0 and stat.S_ISCHR(os.stat('/dev/null').st_mode), r.stderr[-2000:]
    fifo, got = tmp_path / 'pipe', []
    os.mkfifo(fifo)
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    r = run('tft_predict', *ck, '--output', str(fifo))
    reader.join()
    assert r.returncode == 0 and stat.S_ISFIFO(os.stat(fifo).st_mode), r.stderr[-2000:]
    assert got[0].startswith('symbol,origin,step') and len(got[0].splitlines()) == 11
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / 'sock'))
        line = _one_line(run('tft_predict', *ck, '--output', str(tmp_path / 'sock')), 'tft_predict')
    assert 'is a socket or other special file, not a file' in line, line


def test_predict_writes_the_longest_name(one_run, tmp_path):
    "An output name as long as the file system allows is written; its hidden temporary is cut to fit (item 2)."
    out = tmp_path / ('f' * (os.pathconf(tmp_path, 'PC_NAME_MAX') - 4) + '.csv')
    r = run('tft_predict', '--checkpoint', str(one_run / 'tft_best'), '--output', str(out))
    assert r.returncode == 0 and len(pd.read_csv(out)) == 10, r.stderr[-2000:]
    assert [p.name for p in tmp_path.iterdir()] == [out.name]
