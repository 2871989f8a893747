"""How each way of calibrating the quantiles does on walk-forward folds: pooled pinball loss and each symbol's
P10-P90 coverage, from the folds of finished backtests (bench/forecast_levers.py writes them).

For each fold, the fold's best model forecasts its validation windows (the year before the fold) and its test
windows (the fold's year); each method is fitted on the validation windows and applied to the test windows, the
rolling ones (+250) refitted at every origin on the outcomes of the latest 250 bars known by then, as
`tft_nb.calibrate.recalibrated` does. Methods: the model's own quantiles (raw); `shift`, split-conformal offsets added
to every level (the library's `Calibration`); `band`, the same with the median kept; `scale`, each level's distance
from the median stretched by a conformal factor; each pooled over the symbols or per symbol (/sym). The library's
default is 'shift/sym+250' (TrainConfig.calibrate_by_symbol, calibration_bars=250).
Run: `python bench/calibration_bench.py runs/levers/2015-01-01/base/seed42 [...]` (folders of finished backtests)."""
from __future__ import annotations
import json, math, sys
from pathlib import Path
import numpy as np, pandas as pd, torch
from tft_nb.data import load_sample
from tft_nb.data_config import DataConfig
from tft_nb.backtest import BacktestConfig, fold_folder, fold_plan, fold_windows
from tft_nb.forecast import load_model
from tft_nb.evaluate import original_units, predict

Q = np.array([0.1, 0.5, 0.9])


def bar_times(wd, rows: torch.Tensor) -> np.ndarray:
    "The timestamps (int64 ns) of feature rows `rows`."
    return pd.DatetimeIndex(wd.features.ts_event).as_unit('ns').asi8[rows.numpy()]


def rank(scores: np.ndarray, taus) -> np.ndarray:
    "The ceil((n+1) tau)-th smallest of `scores` (n, Td) for each tau: (Td, len(taus))."
    n, s = len(scores), np.sort(scores, 0)
    return np.stack([s[min(n, math.ceil((n + 1) * t)) - 1] for t in taus], -1)


def shift(p, y, keep_median=False):
    "Offsets (Td, Q) added to each level (the median's 0 with `keep_median`)."
    off = np.stack([rank(y - p[..., j], [t])[..., 0] for j, t in enumerate(Q)], -1)
    if keep_median: off[..., 1] = 0
    return off


def scale(p, y):
    "Factors (Td, Q) that stretch each outer level's distance from the median so that it holds its share."
    m, out = p[..., 1], np.ones((p.shape[1], len(Q)))
    for j, t in ((0, Q[0]), (2, Q[2])):
        w = p[..., j] - m
        r = (y - m) / np.where(np.abs(w) < 1e-6, np.copysign(1e-6, w), w)   # y <= m + f w: r <= f above, r >= f below
        out[:, j] = rank(r, [t if j == 2 else 1 - t])[..., 0]
    return out


METHODS = {'shift': (lambda p, y: shift(p, y), lambda p, o: np.sort(p + o, -1)),
           'band': (lambda p, y: shift(p, y, True), lambda p, o: np.sort(p + o, -1)),
           'scale': (scale, lambda p, f: np.sort(p[..., 1:2] + (p - p[..., 1:2]) * f, -1))}


def fitted(fit, p, y, s, by_symbol):
    "Each symbol's parameters: its own fit, or the pooled one."
    return {k: fit(p[s == k], y[s == k]) if by_symbol else fit(p, y) for k in np.unique(s)}


def applied(apply, p, s, params):
    out = p.copy()
    for k, prm in params.items(): out[s == k] = apply(p[s == k], prm)
    return out


def rolling(fit, apply, p, s, at, past, ends, bars, static, by_symbol):
    "Refit at every origin time on the past windows whose outcomes arrived within the latest `bars` bar times."
    out, u = np.empty_like(p), np.unique(ends)
    for a in np.unique(at):
        rows, j = at == a, np.searchsorted(u, a, side='right')
        if j < bars: prm = static
        else:
            pick = (ends >= u[j - bars]) & (ends <= a)
            prm = fitted(fit, past[0][pick], past[1][pick], past[2][pick], by_symbol)
        out[rows] = applied(apply, p[rows], s[rows], prm)
    return out


def study(folder: Path, bars: pd.DataFrame) -> pd.DataFrame:
    "Per fold, method and symbol: the pinball sum, points and outcomes inside the band."
    side = json.loads((folder / 'backtest.json').read_text())
    cfg = DataConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in side['data'].items()})
    plan, symbols, rows = fold_plan(bars.ts_event, cfg, BacktestConfig(**side['backtest'])), sorted(
        map(str, bars.symbol.unique())), []
    for fold in plan.itertuples(index=False):
        wd, _ = fold_windows(bars, cfg, fold, symbols)
        model, _ = load_model(fold_folder(folder, fold.fold) / 'tft_best')
        pv, pt = (predict(model, w).double().numpy() for w in (wd.val, wd.test))
        yv, yt = (w.targets().double().numpy() for w in (wd.val, wd.test))
        sv, st = (w.series[w.rows].numpy() for w in (wd.val, wd.test))
        ends = bar_times(wd, torch.cat([wd.val.rows, wd.test.rows]) + wd.spec.horizon)
        at = bar_times(wd, wd.test.rows)
        keep = ends <= at.max()
        past = tuple(np.concatenate(x)[keep] for x in ((pv, pt), (yv, yt), (sv, st)))
        methods = {'raw': pt}
        for name, (fit, apply) in METHODS.items():
            for by in (False, True):
                static, tag = fitted(fit, pv, yv, sv, by), name + ('/sym' if by else '')
                methods[tag] = applied(apply, pt, st, static)
                methods[tag + '+250'] = rolling(fit, apply, pt, st, at, past, ends[keep], 250, static, by)
        y = original_units(wd, wd.test, torch.tensor(yt))
        for m, p in methods.items():
            po = original_units(wd, wd.test, torch.tensor(p))
            e = y[..., None] - po
            loss = np.maximum(Q * e, (Q - 1) * e).mean(-1)
            inside = (po[..., 0] <= y) & (y <= po[..., 2])
            for k in np.unique(st):
                rows.append(dict(folder=str(folder), fold=fold.fold, method=m, symbol=symbols[k],
                                 pinball_sum=loss[st == k].sum(), n=loss[st == k].size, inside=inside[st == k].sum()))
    return pd.DataFrame(rows)


def main():
    folders = [Path(f) for f in sys.argv[1:]]
    if not folders: sys.exit(__doc__)
    t = pd.concat([study(f, load_sample()) for f in folders])
    per = t.groupby(['folder', 'method']).apply(
        lambda d: pd.Series(dict(pinball=d.pinball_sum.sum() / d.n.sum(), coverage=d.inside.sum() / d.n.sum())))
    sym = t.groupby(['folder', 'method', 'symbol']).apply(lambda d: d.inside.sum() / d.n.sum()).unstack()
    res = per.join(sym).reset_index()
    cols = [c for c in res.columns if c not in ('folder', 'method')]
    print(f"{len(folders)} backtest(s), folds pooled; mean, min and max over them")
    print(res.groupby('method')[cols].agg(['mean', 'min', 'max']).round(4).to_string())


if __name__ == '__main__':
    main()
