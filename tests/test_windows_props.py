"""Property tests of the windowing (`tft_nb.windows`) on the built-in sample (S&P 500 and NASDAQ daily bars):
split membership, no leakage, scaling ranges, inverse scaling, and batches against a slow reference."""
from __future__ import annotations
import numpy as np, pytest, torch

from tft_nb.data import load_sample
from tft_nb.data_config import PRESETS, SPLITS, DataConfig, split_dates
from tft_nb.windows import make_windows
from tft_nb.evaluate import original_units

CONFIGS = {
    'preset': PRESETS['ohlcv_gk_logvol_tft_v1'],
    'frac_minmax_per_symbol': DataConfig(val_frac=0.2, test_frac=0.1, scaling='minmax', per_symbol=True),
    'frac_close_minmax': DataConfig(encoder_length=20, horizon=3, target='close', observed=('r', 'rng'),
                                    known=('dow', 'month', 'day'), scaling='minmax', val_frac=0.15, test_frac=0.15),
    'frac_r_zscore_per_symbol': DataConfig(encoder_length=30, horizon=7, target='r', observed=('lv', 'dv'),
                                           per_symbol=True, val_frac=0.1, test_frac=0.25),
}

@pytest.fixture(scope='module')
def bars(): return load_sample()

@pytest.fixture(scope='module', params=list(CONFIGS))
def case(request, bars):
    cfg = CONFIGS[request.param]
    return request.param, cfg, make_windows(bars, cfg, source='sample')

def _rows(w, te, td):
    "(N, Te) encoder and (N, Td) decoder row indices of every window of `w`, as numpy."
    g = w.rows.numpy()
    return g[:, None] + np.arange(-te + 1, 1), g[:, None] + np.arange(1, td + 1)

def _group(cfg, series): return series if cfg.per_symbol else np.zeros_like(series)

def test_preset_counts(bars):
    wd = make_windows(bars, PRESETS['ohlcv_gk_logvol_tft_v1'])
    assert (len(wd.train), len(wd.val), len(wd.test)) == (7920, 1000, 996)
    assert wd.spec.symbols == ['nasdaq', 'sp500'] and wd.spec.encoder_vars == ['r', 'lv', 'dv', 'rng', 'dow', 'month']

def test_windows_stay_in_split_and_series(case):
    name, cfg, wd = case
    f, te, td = wd.features, cfg.encoder_length, cfg.horizon
    split, series, tidx = f.split.to_numpy(), f.series.to_numpy(), f.time_idx.to_numpy()
    for k, s in enumerate(SPLITS):
        w = getattr(wd, s)
        assert len(w) > 0, (name, s)
        e, d = _rows(w, te, td)
        assert e.min() >= 0 and d.max() < len(f)
        assert (split[d] == k).all(), f"{name}/{s}: a decoder row outside the split"
        g = w.rows.numpy()
        assert (series[e] == series[g][:, None]).all() and (series[d] == series[g][:, None]).all()
        assert (np.diff(tidx[np.c_[e, d]], axis=1) == 1).all(), "window rows are not consecutive bars"

def test_no_leakage(case, bars):
    name, cfg, wd = case
    f, te, td = wd.features, cfg.encoder_length, cfg.horizon
    val, test = split_dates(f.ts_event, cfg)
    ts = f.ts_event.to_numpy('datetime64[ns]')
    for s, first_after in (('train', val), ('val', test)):
        e, d = _rows(getattr(wd, s), te, td)
        assert (ts[d] < first_after.to_datetime64()).all(), f"{name}: a {s} target at or after {first_after}"
        assert (ts[e] < first_after.to_datetime64()).all()
    assert ((f.split.to_numpy()[ts >= val.to_datetime64()] > 0).all()
            and (f.split.to_numpy()[ts < val.to_datetime64()] == 0).all())
    # the scaler saw training rows only: changing every later row leaves it unchanged
    wd2 = make_windows(perturb_after(bars, val), cfg)
    np.testing.assert_allclose(wd2.scaler.loc, wd.scaler.loc)
    np.testing.assert_allclose(wd2.scaler.scale, wd.scaler.scale)

def perturb_after(bars, val):
    "`bars` with every bar at or after `val` given a random price level (all of O, H, L, C) and volume."
    b, rng = bars.copy(), np.random.default_rng(0)
    m = (b.ts_event >= val).to_numpy()
    k = np.exp(rng.normal(0, 0.05, m.sum()))
    for c in ('open', 'high', 'low', 'close'): b.loc[m, c] *= k
    b.loc[m, 'volume'] *= rng.uniform(0.5, 2, m.sum())
    return b

def test_scaling_ranges(case):
    "Levels are scaled as the config says; close, a change from the origin, by the training returns' spread."
    name, cfg, wd = case
    train = wd.features.split.to_numpy() == 0
    g = _group(cfg, wd.features.series.to_numpy())
    names = [v for v in wd.scaler.names if v not in wd.spec.relative]
    cols = [wd.scaler.names.index(v) for v in names]
    x = wd.features[names].to_numpy('float64')
    z = ((x - wd.scaler.loc[g][:, cols]) / wd.scaler.scale[g][:, cols])[train]
    for v in wd.spec.relative:                                         # close: no location, the spread of returns
        j = wd.scaler.names.index(v)
        for grp in np.unique(g):
            r = wd.features.r.to_numpy()[train & (g == grp)]
            assert wd.scaler.loc[grp, j] == 0 and np.isclose(wd.scaler.scale[grp, j], r.std(), rtol=1e-12), name
    if cfg.scaling == 'minmax':
        assert z.min() >= -1e-9 and z.max() <= 1 + 1e-9
        levels = [j for j, v in enumerate(cfg.encoder_vars) if v not in wd.spec.relative]
        for b in wd.train.batches(512):
            parts = (b.encoder[..., levels], b.decoder) + (() if cfg.target in wd.spec.relative else (b.target,))
            for t in parts:
                assert t.min() >= -1e-6 and t.max() <= 1 + 1e-6, f"{name}: scaled training input outside [0, 1]"
    else:
        for grp in np.unique(g):
            zg, const = z[g[train] == grp], x[train][g[train] == grp].std(0) == 0
            np.testing.assert_allclose(zg.mean(0), 0, atol=1e-9)
            np.testing.assert_allclose(zg.std(0)[~const], 1, rtol=1e-9)

def test_inverse_recovers_test_targets(case):
    name, cfg, wd = case
    f, td = wd.features, cfg.horizon
    _, d = _rows(wd.test, cfg.encoder_length, td)
    want = f[cfg.target].to_numpy('float64')[d]
    got = original_units(wd, wd.test, torch.cat([b.target for b in wd.test.batches(256)]))   # in window order
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())

def _reference_window(wd, cfg, i):
    "Window `i` of the training split, built with plain Python loops from the features frame and the scaler."
    f, sc = wd.features, wd.scaler
    g = int(wd.train.rows[i])
    grp = int(f.series.iat[g]) if cfg.per_symbol else 0
    def z(row, v):
        j = sc.names.index(v)
        if v in wd.spec.relative: return np.log(f[v].iat[row] / f[v].iat[g]) / sc.scale[grp, j]   # from the origin
        return (float(f[v].iat[row]) - sc.loc[grp, j]) / sc.scale[grp, j]
    enc = [[z(r, v) for v in cfg.encoder_vars] for r in range(g - cfg.encoder_length + 1, g + 1)]
    dec = [[z(r, v) for v in cfg.known] for r in range(g + 1, g + cfg.horizon + 1)]
    tgt = [z(r, cfg.target) for r in range(g + 1, g + cfg.horizon + 1)]
    return enc, dec, tgt, int(f.series.iat[g]), int(f.time_idx.iat[g])

def test_batches_match_reference(case):
    name, cfg, wd = case
    gen = torch.Generator().manual_seed(0)
    b = next(wd.train.batches(64, shuffle=True, generator=gen))
    order = torch.randperm(len(wd.train), generator=torch.Generator().manual_seed(0))[:64]  # the same permutation
    for j in (0, 1, 17, 63):
        enc, dec, tgt, s, t = _reference_window(wd, cfg, int(order[j]))
        np.testing.assert_allclose(b.encoder[j].numpy(), enc, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b.decoder[j].numpy(), dec, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b.target[j].numpy(), tgt, rtol=1e-5, atol=1e-5)
        assert b.series[j] == s and b.static[j, 0] == s and b.origin[j] == t
    assert b.encoder.shape == (64, cfg.encoder_length, len(cfg.encoder_vars))
    assert b.decoder.shape == (64, cfg.horizon, len(cfg.known)) and b.target.shape == (64, cfg.horizon)

def test_batches_cover_each_window_once(case):
    name, cfg, wd = case
    for s in SPLITS:
        w = getattr(wd, s)
        bs = list(w.batches(100, shuffle=True, generator=torch.Generator().manual_seed(1)))
        keys = torch.cat([b.series * 10**6 + b.origin for b in bs])
        assert len(keys) == len(w) and len(torch.unique(keys)) == len(w)
        assert [len(b.target) for b in w.batches(100, drop_last=True)] == [100] * (len(w) // 100)
        again = next(w.batches(100, shuffle=True, generator=torch.Generator().manual_seed(1)))
        assert torch.equal(again.encoder, bs[0].encoder)
