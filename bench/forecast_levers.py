"""What each forecasting lever does against HAR, in walk-forward backtests (`tft_backtest`) on the built-in data.

Each lever is a set of `tft_backtest` flags over the benchmark task's sizes (hidden 32, 4 heads, 1 LSTM layer,
batch 64). Every lever runs once per seed into its own backtest folder (rerunning the script continues unfinished
folders and reuses finished ones), then the script scores the forecasts the folds wrote, pooled over folds:
pinball loss of the TFT (raw and calibrated), of the mean of the seeds' quantiles (an ensemble of the seeds), and of
HAR pooled over symbols, with the ratio to HAR pooled per symbol and the P10-P90 coverage per symbol.
Choose levers on folds that end before the test period (the default: 2015 and 2016, validated on the year before);
`--start 2017-01-01` scores the test years.
Run: `python bench/forecast_levers.py --out runs/levers [--levers plain,har] [--seeds 42,43,44] [--start ...]`"""
from __future__ import annotations
import argparse, subprocess, sys
from pathlib import Path
import numpy as np, pandas as pd

SIZES = ['--hidden-size', '32', '--attention-heads', '4', '--lstm-layers', '1', '--batch-size', '64']
LEVERS = {   # name -> tft_backtest flags beyond SIZES
    'plain': ['--observed', 'r,lv,dv,rng', '--no-har-base'],
    'inputs': ['--observed', 'r,lv,dv,rng,lv5,lv22', '--no-har-base'],
    'base': ['--observed', 'r,lv,dv,rng', '--har-base'],
    'har': ['--observed', 'r,lv,dv,rng,lv5,lv22', '--har-base'],
    'base-dropout2': ['--observed', 'r,lv,dv,rng', '--har-base', '--dropout', '0.2'],
    'base-history120': ['--observed', 'r,lv,dv,rng', '--har-base', '--encoder-length', '120'],
    'base-lr3e-4': ['--observed', 'r,lv,dv,rng', '--har-base', '--learning-rate', '3e-4'],
    'base-adamw': ['--observed', 'r,lv,dv,rng', '--har-base', '--optimizer', 'adamw', '--weight-decay', '0.01'],
}


def run(folder: Path, flags: list, seed: int, start: str, folds: int):
    "One backtest into `folder` (continued where it stopped), quietly; its log in `folder`.log."
    cmd = ['tft_backtest', '--checkpoint-dir', str(folder), '--start', start, '--folds', str(folds),
           '--seed', str(seed), *SIZES, *flags]
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(f'{folder}.log', 'a') as log: subprocess.run(cmd, stdout=log, stderr=log, check=True)


def forecasts(folder: Path) -> pd.DataFrame:
    "Every fold's forecasts of a finished backtest, with a `fold` column."
    read = lambda p: pd.read_csv(p).assign(fold=int(p.parent.name.split('_')[1]))
    return pd.concat([read(p) for p in sorted(folder.glob('fold_*/forecasts.csv'))], ignore_index=True)


def pinball(fc: pd.DataFrame) -> float:
    "Mean pinball loss of tidy forecasts `fc` over points and quantile levels."
    qc = [c for c in fc.columns if c.startswith('q')]
    e = fc.actual.to_numpy()[:, None] - fc[qc].to_numpy()
    q = np.array([float(c[1:]) for c in qc])
    return float(np.maximum(q * e, (q - 1) * e).mean())


def coverage(fc: pd.DataFrame) -> float:
    "Share of outcomes inside the outer band."
    qc = [c for c in fc.columns if c.startswith('q')]
    return float(((fc[qc[0]] <= fc.actual) & (fc.actual <= fc[qc[-1]])).mean())


def scores(fc: pd.DataFrame, model: str, har: pd.DataFrame) -> dict:
    "Pooled pinball, its ratio to HAR pooled, and per symbol the ratio and the coverage."
    m = fc[fc.model == model]
    out = dict(pinball=pinball(m), vs_har=pinball(m) / pinball(har), coverage=coverage(m))
    for s, d in m.groupby('symbol'):
        out[f'{s}_vs_har'] = pinball(d) / pinball(har[har.symbol == s])
        out[f'{s}_coverage'] = coverage(d)
    return out


def ensemble(frames: list[pd.DataFrame], model: str) -> pd.DataFrame:
    "The mean of the seeds' quantiles of `model`, window by window."
    keys = ['fold', 'symbol', 'origin', 'step']
    parts = [f[f.model == model].sort_values(keys).reset_index(drop=True) for f in frames]
    qc = [c for c in parts[0].columns if c.startswith('q')]
    mean = {c: np.mean([p[c].to_numpy() for p in parts], 0) for c in qc}
    return parts[0].assign(**mean, model=f'{model} x{len(parts)}')


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', default='runs/levers')
    p.add_argument('--levers', default=','.join(LEVERS))
    p.add_argument('--seeds', default='42,43,44')
    p.add_argument('--start', default='2015-01-01')
    p.add_argument('--folds', type=int, default=2)
    p.add_argument('--score-only', action='store_true', help='score the finished backtests, train nothing')
    a = p.parse_args()
    seeds, rows, levers = [int(s) for s in a.seeds.split(',')], [], a.levers.split(',')
    folder = lambda lever, s: Path(a.out) / a.start / lever / f'seed{s}'
    for lever in levers if not a.score_only else []:
        for s in seeds: run(folder(lever, s), LEVERS[lever], s, a.start, a.folds)
    for lever in levers:
        folders = [folder(lever, s) for s in seeds]
        frames = [forecasts(f) for f in folders if list(f.glob('fold_*/forecasts.csv'))]
        if not frames: continue
        har = frames[0][frames[0].model == 'har_pooled']
        for k, fc in enumerate(frames):
            for model in ('TFT', 'TFT calibrated'):
                rows.append(dict(lever=lever, seed=seeds[k], model=model, **scores(fc, model, har)))
        if len(frames) > 1:
            for model in ('TFT', 'TFT calibrated'):
                ens = ensemble(frames, model)
                rows.append(dict(lever=lever, seed='mean', model=ens.model[0], **scores(ens, ens.model[0], har)))
    for name in ('har_pooled', 'har', 'rolling_mean_22', 'garch11', 'persistence'):
        rows.append(dict(lever='baseline', seed='', model=name, **scores(frames[0], name, har)))
    t = pd.DataFrame(rows)
    print(f"Folds from {a.start} ({a.folds}), pooled over folds; HAR pooled pinball {pinball(har):.5f}")
    print(t.to_string(index=False, float_format='%.4f'))


if __name__ == '__main__':
    sys.exit(main())
