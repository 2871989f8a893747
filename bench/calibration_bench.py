"""How well the P10-P90 band holds on the test split: the model's own quantiles, the validation split's
split-conformal offsets (static), and offsets recalibrated on the latest `recent` bars (rolling), per seed and symbol.

Each seed trains the benchmark task's model (bench/TASK.md: hidden 32, 4 heads, 1 LSTM layer, batch 64, dropout 0.1,
constant learning rate 1e-3, gradient clipping 1.0, early stopping with patience 5) on the built-in data with `fit`,
then scores the test windows in original units with `forecast_metrics`: coverage of P10-P90 and q-risk P10/P50/P90.
The driver prints one line per seed, method and symbol set, then the median and min-max over seeds.
Run: `python bench/calibration_bench.py [--seeds 42,43,44] [--recent 125,250,500]`"""
from __future__ import annotations
import argparse, statistics, tempfile
import numpy as np


def spread(xs: list[float]) -> str:
    "Median and min-max of `xs`, five decimals."
    return f"{statistics.median(xs):.5f} ({min(xs):.5f}-{max(xs):.5f})"


def evaluate(seed: int, recents: list[int], threads: int) -> list[dict]:
    "Train one seed; the test metrics of each method, pooled and per symbol."
    import torch
    torch.set_num_threads(threads)
    from tft_nb.data import load_sample
    from tft_nb.windows import PRESETS, make_windows
    from tft_nb.model import TFTConfig, TemporalFusionTransformer
    from tft_nb.train import TrainConfig
    from tft_nb.fit import fit
    from tft_nb.evaluate import predict, original_units, forecast_metrics
    from tft_nb.calibrate import Calibration, recalibrated
    data = make_windows(load_sample(), PRESETS['ohlcv_gk_logvol_tft_v1'])
    torch.manual_seed(seed)
    model = TemporalFusionTransformer(TFTConfig(**data.spec.model_sizes(), hidden_size=32, attention_heads=4,
                                                lstm_layers=1, dropout=0.1))
    with tempfile.TemporaryDirectory() as d:
        cfg = TrainConfig(epochs=50, batch_size=64, learning_rate=1e-3, lr_schedule='constant', grad_clip=1.0,
                          early_stopping_patience=5, checkpoint_dir=d, seed=seed, device='cpu')
        res = fit(model, data, cfg, progress=False)
    q, cal = model.config.quantiles, res.calibration
    pred = predict(model, data.test)
    methods = {'raw': pred, 'static': cal.apply(pred)}
    for n in recents:
        methods[f'rolling {n}'] = recalibrated(model, data, data.test, Calibration(q, cal.offsets, cal.windows,
                                                                                   recent=n), pred)
    y = original_units(data, data.test, data.test.targets())
    sym = data.test.series[data.test.rows].numpy()
    rows = []
    for name, p in methods.items():
        p = original_units(data, data.test, p)
        for who, keep in [('both', np.ones(len(sym), bool))] + [(s, sym == k) for k, s in enumerate(data.spec.symbols)]:
            m = forecast_metrics(p[keep], y[keep], q)
            rows.append(dict(seed=seed, method=name, symbols=who, epoch=res.best_epoch,
                             coverage=m['coverage_P10_P90'], P10=m['q_risk_P10'], P50=m['q_risk_P50'],
                             P90=m['q_risk_P90']))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--seeds', default='42,43,44')
    p.add_argument('--recent', default='125,250,500')
    p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    rows = []
    for seed in map(int, a.seeds.split(',')):
        for r in evaluate(seed, [int(x) for x in a.recent.split(',')], a.threads):
            rows.append(r)
            print(f"seed {r['seed']} (best epoch {r['epoch']}) {r['method']:<12} {r['symbols']:<7} coverage "
                  f"{r['coverage']:.4f}  q-risk P10 {r['P10']:.5f} P50 {r['P50']:.5f} P90 {r['P90']:.5f}", flush=True)
    print('median (min-max) over seeds:')
    for method in dict.fromkeys(r['method'] for r in rows):
        for who in dict.fromkeys(r['symbols'] for r in rows):
            sel = [r for r in rows if r['method'] == method and r['symbols'] == who]
            print(f"{method:<12} {who:<7} " + '  '.join(f"{k} {spread([r[k] for r in sel])}"
                                                        for k in ('coverage', 'P10', 'P50', 'P90')))


if __name__ == '__main__': main()
