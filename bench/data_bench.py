"""Throughput of the data layer on 1,000,000 one-minute bars (4 symbols x 250k, random walk, valid OHLC).

Times, best of 5 after one warm-up: (a) the raw floor (read bytes + np.frombuffer of the OHLCV records, summing close),
(b) read_dbn, (c) read_ohlcv (with checks), for plain and zstd DBN; (d) make_windows; (e) gathering every training
window into batches of 256. Run: `python bench/data_bench.py [--bars N] [--profile]`."""
from __future__ import annotations
import argparse, cProfile, io, pstats, tempfile, time
from pathlib import Path

import numpy as np, pandas as pd, zstandard

from tft_nb.data import read_dbn, read_ohlcv
from tft_nb.dbn import OHLCV_DTYPE, write_dbn
from tft_nb.data_config import DataConfig
from tft_nb.windows import make_windows

def make_bars(n_bars: int, n_sym: int = 4, seed: int = 0) -> pd.DataFrame:
    "Random-walk 1-minute bars, `n_bars` in all, split evenly over `n_sym` symbols; OHLC valid, prices on a 0.01 grid."
    rng, per, out = np.random.default_rng(seed), n_bars // n_sym, []
    ts = pd.date_range('2020-01-01', periods=per, freq='1min', tz='UTC')
    for k in range(n_sym):
        c = np.round(100 * np.exp(np.cumsum(rng.normal(0, 1e-3, per))), 2)
        o = np.r_[c[0], c[:-1]]
        w = np.round(np.abs(rng.normal(0, 0.05, (2, per))), 2)
        out.append(pd.DataFrame({'ts_event': ts, 'symbol': f'SYM{k}', 'open': o, 'high': np.maximum(o, c) + w[0],
                                 'low': np.minimum(o, c) - w[1], 'close': c,
                                 'volume': rng.integers(1, 10_000, per).astype('float64')}))
    return pd.concat(out, ignore_index=True)

def raw_floor(path: Path) -> float:
    "The least any reader must do: read the bytes (decompress), view the records, touch a column."
    b = path.read_bytes()
    if b[:4] == b'\x28\xb5\x2f\xfd': b = zstandard.ZstdDecompressor().decompressobj().decompress(b)
    start = 8 + int.from_bytes(b[4:8], 'little')
    recs = np.frombuffer(b, OHLCV_DTYPE, offset=start)
    return float(recs['close'].sum())

def best(fn, reps: int = 5) -> float:
    fn()   # warm-up
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)

def profile(fn, top: int = 14) -> str:
    pr = cProfile.Profile()
    pr.enable()
    fn()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats('tottime').print_stats(top)
    return s.getvalue()

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--bars', type=int, default=1_000_000)
    ap.add_argument('--reps', type=int, default=5)
    ap.add_argument('--profile', action='store_true', help='always print the cProfile of read_dbn')
    a = ap.parse_args()
    bars = make_bars(a.bars)
    n = len(bars)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        plain, z = Path(d) / 'bars.dbn', Path(d) / 'bars.dbn.zst'
        write_dbn(bars, plain)
        write_dbn(bars, z, zstd=True)
        print(f"{n:,} bars, {bars.symbol.nunique()} symbols; DBN {plain.stat().st_size / 2**20:.1f} MiB, "
              f"zstd {z.stat().st_size / 2**20:.1f} MiB; best of {a.reps} after one warm-up")
        ratios = {}
        for label, p in (('dbn', plain), ('dbn.zst', z)):
            t_raw = best(lambda: raw_floor(p), a.reps)
            t_dbn = best(lambda: read_dbn(p), a.reps)
            t_chk = best(lambda: read_ohlcv(p), a.reps)
            rows += [(f'(a) raw floor   [{label}]', t_raw, n / t_raw, 'bars/s'),
                     (f'(b) read_dbn    [{label}]', t_dbn, n / t_dbn, 'bars/s'),
                     (f'(c) read_ohlcv  [{label}]', t_chk, n / t_chk, 'bars/s')]
            ratios[label] = t_dbn / t_raw
        df = read_ohlcv(plain)
        assert len(df) == n
        prof = profile(lambda: read_dbn(plain)) if a.profile or ratios['dbn'] > 2 else None
    cfg = DataConfig(encoder_length=60, horizon=5, val_frac=0.15, test_frac=0.15)
    t_win = best(lambda: make_windows(df, cfg), a.reps)
    wd = make_windows(df, cfg)
    nw = len(wd.train) + len(wd.val) + len(wd.test)
    def gather():
        k = 0
        for b in wd.train.batches(256): k += b.target.shape[0]
        return k
    t_bat = best(gather, a.reps)
    rows += [('(d) make_windows', t_win, n / t_win, f'bars/s  ({nw / t_win:,.0f} windows/s, {nw:,} windows)'),
             ('(e) train batches of 256', t_bat, len(wd.train) / t_bat, f'windows/s ({len(wd.train):,} windows)')]
    print(f"{'step':<28}{'best s':>9}{'rate':>15}")
    for name, t, rate, unit in rows: print(f"{name:<28}{t:>9.4f}{rate:>15,.0f} {unit}")
    print('read_dbn / raw floor: ' + ', '.join(f'{k} {v:.1f}x' for k, v in ratios.items()))
    if prof: print('\ncProfile of read_dbn (plain), by own time:\n' + prof)

if __name__ == '__main__': main()
