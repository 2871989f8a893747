"""File-level tests of the data layer (`tft_nb.data`, `tft_nb.dbn`): conformance on Databento's own DBN test vectors,
a corpus of bad inputs that must each be refused with a `DataError` naming the file and the problem,
and round trips of the other formats. Fast: the whole file runs in a few seconds."""
from __future__ import annotations
import datetime as dt, os
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np, pandas as pd, pytest, zstandard
import databento_dbn as dbn

from tft_nb.checks import DataError
from tft_nb.data import COLUMNS, PRICES, read_dbn, read_ohlcv
from tft_nb.dbn import write_dbn
from tft_nb.data_config import DataConfig
from tft_nb.windows import make_windows

DBN_DIR = Path(__file__).resolve().parent / 'data/dbn'   # Databento's test vectors (Apache-2.0), kept in the repo
OHLCV_SIZE = 56

# %% helpers
def expect_error(fn, path, *phrases):
    "`fn(path)` must raise a `DataError` naming the file and containing one of `phrases` (case-insensitive)."
    with pytest.raises(DataError) as ei: fn(path)   # any other exception type escapes and fails the test
    msg = str(ei.value)
    assert Path(path).name in msg, f"message does not name the file: {msg}"
    assert any(p.lower() in msg.lower() for p in phrases), f"expected one of {phrases} in: {msg}"
    return msg

def make_bars(n=30, syms=('AAA', 'BBB'), start='2024-01-02', freq='1min', seed=0) -> pd.DataFrame:
    "Valid tidy bars: a random walk per symbol, prices on a 1e-4 grid (exact in DBN's 1e-9 fixed point)."
    rng, out = np.random.default_rng(seed), []
    for s in syms:
        c = np.round(100 + np.cumsum(rng.normal(0, 0.5, n)), 4)
        o = np.r_[c[0], c[:-1]]
        out.append(pd.DataFrame({'ts_event': pd.date_range(start, periods=n, freq=freq, tz='UTC'), 'symbol': s,
                                 'open': o, 'high': np.maximum(o, c) + 0.25, 'low': np.minimum(o, c) - 0.25,
                                 'close': c, 'volume': rng.integers(1, 1000, n).astype('float64')}))
    return pd.concat(out, ignore_index=True)

def dbn_bytes(tmp_path, zstd=False, **kw) -> bytes:
    p = tmp_path / ('src.dbn.zst' if zstd else 'src.dbn')
    write_dbn(make_bars(**kw), p, zstd=zstd)
    return p.read_bytes()

def meta_end(b: bytes) -> int: return 8 + int.from_bytes(b[4:8], 'little')

def decode_official(path: Path):
    "Metadata and records of `path` decoded by Databento's own decoder."
    raw = path.read_bytes()
    if raw[:4] == b'\x28\xb5\x2f\xfd': raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    dec = dbn.DBNDecoder()
    dec.write(raw)
    recs = dec.decode()
    return recs[0], recs[1:]

# %% conformance on Databento's test vectors
def _vector_files():
    return [pytest.param(f, id=f.name) for f in sorted(DBN_DIR.iterdir()) if f.name.startswith('test_data.')]

def _schema(f: Path) -> str: return f.name.split('.')[1]

# Expected content, read once with `databento_dbn.DBNDecoder` (instrument 5482 = ESH1, GLBX.MDP3).
T0 = 1609160400_000000000   # 2020-12-28 13:00 UTC
EXPECTED = {  # schema: (ts_event ns, close as int / 1e9)
    'ohlcv-1s': ([T0, T0 + 1_000_000_000], [372050.0, 372050.0]),
    'ohlcv-1m': ([T0, T0 + 60_000_000_000], [372100.0, 372150.0]),
    'ohlcv-1h': ([T0, T0 + 3600_000_000_000], [372225.0, 371950.0]),
    'ohlcv-1d': ([], []),
}

def test_vector_folder_complete():
    names = {f.name for f in DBN_DIR.iterdir()}
    for s in EXPECTED:
        want = {f'test_data.{s}.dbn', f'test_data.{s}.dbz'} | {f'test_data.{s}.v{v}.dbn.zst' for v in (1, 2, 3)}
        assert want <= names, f"missing test vectors: {sorted(want - names)}"

@pytest.mark.parametrize('path', _vector_files())
def test_vector(path: Path):
    if path.suffix == '.dbz':
        for fn in (read_dbn, read_ohlcv): expect_error(fn, path, 'DBZ')
        return
    schema = _schema(path)
    df = read_dbn(path)
    assert list(df.columns) == COLUMNS
    assert str(df.ts_event.dtype) == 'datetime64[ns, UTC]'
    assert all(df[c].dtype == 'float64' for c in PRICES + ['volume'])
    assert df.attrs['schema'] == schema and df.attrs['dataset'] == 'GLBX.MDP3'
    ts, close = EXPECTED[schema]
    assert df.ts_event.astype('int64').tolist() == ts
    assert df.close.tolist() == close
    assert (df.symbol == 'ESH1').all()
    # compare with the official decoder, record by record
    meta, recs = decode_official(path)
    assert str(meta.schema) == schema and list(meta.mappings) == ['ESH1']
    assert len(recs) == len(df)
    for row, r in zip(df.itertuples(), recs):
        assert row.ts_event.value == r.ts_event
        assert [row.open, row.high, row.low, row.close] == [r.open / 1e9, r.high / 1e9, r.low / 1e9, r.close / 1e9]
        assert row.volume == r.volume
    if len(df): assert read_ohlcv(path).equals(df)
    else: expect_error(read_ohlcv, path, 'no bars')   # ohlcv-1d vectors hold zero records

@pytest.mark.parametrize('schema', list(EXPECTED))
def test_vector_versions_agree(schema):
    "v1, v2, v3 and plain / zstd of one schema read to the same frame."
    files = [DBN_DIR / f'test_data.{schema}.dbn'] + [DBN_DIR / f'test_data.{schema}.v{v}.dbn.zst' for v in (1, 2, 3)]
    frames = [read_dbn(f) for f in files]
    for f, df in zip(files[1:], frames[1:]):
        pd.testing.assert_frame_equal(df, frames[0], obj=f.name)

def test_vectors_untouched():
    "Reading (and failing to read) the vectors writes nothing into their folder."
    snap = lambda: sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in DBN_DIR.iterdir())
    before = snap()
    for f in DBN_DIR.iterdir():
        for fn in (read_dbn, read_ohlcv):
            try: fn(f)
            except DataError: pass
    # its first file by name holds no bars (skipped), the next is DBZ
    with pytest.raises(DataError, match='ohlcv-1d.dbz: legacy DBZ'): read_ohlcv(DBN_DIR)
    assert snap() == before

def test_folder_reads_the_bars_and_skips_the_rest(tmp_path, caplog):
    """A folder holding a real DBN file with a README and a LICENSE beside it (as in the vectors' own folder) reads the
    DBN file."""
    names = ['test_data.ohlcv-1m.v3.dbn.zst', 'README.md', 'LICENSE']
    for n in names: (tmp_path / n).write_bytes((DBN_DIR / n).read_bytes())
    with caplog.at_level('INFO', logger='tft_nb'): got = read_ohlcv(tmp_path)
    pd.testing.assert_frame_equal(got, read_dbn(tmp_path / names[0]), check_like=True)
    assert f'{tmp_path}: skipped 2 file(s) not named as bars: LICENSE, README.md' in caplog.text

def test_folder_skips_files_without_bars(tmp_path, caplog):
    """Databento's own empty ohlcv-1d files (metadata, no records), as a download split by day holds for days without
    trading, beside daily bars: skipped with a warning."""
    empty = ['test_data.ohlcv-1d.dbn', 'test_data.ohlcv-1d.v3.dbn.zst']
    for n in empty: (tmp_path / n).write_bytes((DBN_DIR / n).read_bytes())
    with pytest.raises(DataError, match=r"none of its 2 data file\(s\) holds bars "
                                        r"\(test_data.ohlcv-1d.dbn, test_data.ohlcv-1d.v3.dbn.zst"):
        read_ohlcv(tmp_path)
    bars = make_bars(30, syms=('AAA',), freq='1D')
    write_dbn(bars, tmp_path / 'xnas-itch-2024.ohlcv-1d.dbn.zst', schema='ohlcv-1d', zstd=True)
    with caplog.at_level('WARNING', logger='tft_nb'): got = read_ohlcv(tmp_path)
    pd.testing.assert_frame_equal(got, read_ohlcv(tmp_path / 'xnas-itch-2024.ohlcv-1d.dbn.zst'))
    assert f'{tmp_path}: skipped 2 file(s) that hold no bars: {", ".join(empty)}' in caplog.text

def read_ohlcv_frame(bars):
    "What the readers return for `bars`: sorted by symbol then time, symbol categorical with sorted categories."
    df = bars.sort_values(['symbol', 'ts_event'], kind='stable').reset_index(drop=True)
    return df.assign(symbol=pd.Categorical(df.symbol.astype(str), categories=sorted(df.symbol.unique())))

# %% DBN round trips written by write_dbn
@pytest.mark.parametrize('schema', ['ohlcv-1s', 'ohlcv-1m', 'ohlcv-1h', 'ohlcv-1d'])
@pytest.mark.parametrize('zstd', [False, True])
def test_write_read_roundtrip(tmp_path, schema, zstd):
    freq = {'ohlcv-1s': '1s', 'ohlcv-1m': '1min', 'ohlcv-1h': '1h', 'ohlcv-1d': '1D'}[schema]
    bars = make_bars(40, syms=('ZZZ', 'AAA', 'MMM'), freq=freq)
    p = tmp_path / 'bars.dbn'
    write_dbn(bars, p, schema=schema, zstd=zstd)
    df = read_ohlcv(p)
    exp = read_ohlcv_frame(bars)
    pd.testing.assert_frame_equal(df, exp, check_dtype=False)
    assert df.attrs['schema'] == schema and df.equals(read_dbn(p))

def test_dbn_ts_out_and_undefined_price(tmp_path):
    "Records with ts_out (64 bytes) read; an undefined price is NaN in read_dbn and refused by read_ohlcv."
    meta = dbn.Metadata(dataset='XNAS.ITCH', schema=dbn.Schema.OHLCV_1M, start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, symbols=['A'], partial=[], not_found=[], end=2 * 10**18,
                        ts_out=True,
                        mappings=[NS(raw_symbol='A', intervals=[NS(start_date=dt.date(2024, 1, 1),
                                                                   end_date=dt.date(2024, 1, 3), symbol='7')])])
    d = np.dtype(dbn.OHLCVMsg._dtypes + [('ts_out', 'u8')])
    r = np.zeros(3, d)
    r['length'], r['rtype'], r['instrument_id'] = 16, 0x21, 7
    r['ts_event'] = pd.Timestamp('2024-01-02', tz='UTC').value + np.arange(3) * 60 * 10**9
    for c in PRICES: r[c] = 100 * 10**9
    r['high'] += 10**9
    r['volume'] = 5
    p = tmp_path / 'tsout.dbn'
    p.write_bytes(bytes(meta.encode()) + r.tobytes())
    df = read_ohlcv(p)
    assert len(df) == 3 and (df.symbol == 'A').all() and df.high.tolist() == [101.0] * 3
    r['open'][1] = dbn.UNDEF_PRICE
    p.write_bytes(bytes(meta.encode()) + r.tobytes())
    assert np.isnan(read_dbn(p).open[1])
    expect_error(read_ohlcv, p, 'undefined price')

# %% truncated and corrupt DBN
def _truncations(b: bytes):
    "Every offset inside the header, several inside the metadata and inside the records (never whole records)."
    end = meta_end(b)
    header = list(range(1, 8))
    meta = sorted({8, 9, 12, 20, 40, end // 2, end - 9, end - 1})
    recs = ([end + k for k in (1, 7, OHLCV_SIZE - 1, OHLCV_SIZE + 1, 3 * OHLCV_SIZE + 17)]
            + [len(b) - 1, len(b) - OHLCV_SIZE + 3])
    assert all((o - end) % OHLCV_SIZE for o in recs)
    return [('header', o) for o in header] + [('metadata', o) for o in meta] + [('records', o) for o in recs]

PHRASES = {'header': ('truncated DBN header', 'not a DBN file'), 'metadata': ('truncated DBN metadata',),
           'records': ('truncated DBN',)}

def test_truncated_dbn(tmp_path):
    b = dbn_bytes(tmp_path)
    for where, off in _truncations(b):
        p = tmp_path / f'cut_{off}.dbn'
        p.write_bytes(b[:off])
        expect_error(read_dbn, p, *PHRASES[where])
        # read_ohlcv sees a 1-2 byte 'D'/'DB' file as text (a CSV with a header and no rows)
        expect_error(read_ohlcv, p, *PHRASES[where], *(('no bars',) if off < 3 else ()))

def test_truncated_zstd_dbn(tmp_path):
    z = dbn_bytes(tmp_path, zstd=True)
    offs = sorted({4, 5, 9, 20, len(z) // 3, len(z) // 2, len(z) - 10, len(z) - 1})
    for off in offs:
        p = tmp_path / f'cut_{off}.dbn.zst'
        p.write_bytes(z[:off])
        for fn in (read_dbn, read_ohlcv): expect_error(fn, p, 'truncated zstd')
    p = tmp_path / 'trailing.dbn.zst'
    p.write_bytes(z + b'not zstd')
    for fn in (read_dbn, read_ohlcv): expect_error(fn, p, 'corrupt zstd')
    # a whole zstd stream of a truncated DBN: the DBN check still fires
    b = zstandard.ZstdDecompressor().decompress(z)
    p = tmp_path / 'inner.dbn.zst'
    p.write_bytes(zstandard.ZstdCompressor().compress(b[:-5]))
    expect_error(read_dbn, p, 'truncated DBN')

NOT_OHLCV = '; an OHLCV record has type 0x11 or 0x20-0x24 and 56 bytes'
REC0_LEN0 = 'the file looks corrupt: record 0 has record type 0x21 and length 0 bytes' + NOT_OHLCV

def test_corrupt_bytes(tmp_path):
    b = dbn_bytes(tmp_path)
    cases = {'garbage.dbn': (np.random.default_rng(1).bytes(4000), ('not a DBN file',), ('unknown format',)),
             'flipped_sig.dbn': (b'DBM' + b[3:], ('not a DBN file',), ('unknown format',)),
             'version9.dbn': (b[:3] + b'\x09' + b[4:], ('version 9',), ('version 9',)),
             'huge_meta.dbn': (b[:4] + b'\xff\xff\xff\xff' + b[8:], ('truncated DBN metadata',),
                               ('truncated DBN metadata',)),
             'zero_meta.dbn': (b[:4] + b'\0\0\0\0' + b[8:], ('corrupt DBN metadata',), ('corrupt DBN metadata',)),
             'rec_len0.dbn': (b[:meta_end(b)] + b'\0' + b[meta_end(b) + 1:], (REC0_LEN0,), (REC0_LEN0,))}
    for name, (data, p1, p2) in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        expect_error(read_dbn, p, *p1)
        expect_error(read_ohlcv, p, *p2)

def test_corrupt_metadata_bytes(tmp_path):
    "Overwriting metadata bytes either still reads, or fails with a DataError (never a decoder exception)."
    b = dbn_bytes(tmp_path)
    p = tmp_path / 'meta.dbn'
    for i in range(8, meta_end(b), 3):
        for v in (0x00, 0xff):
            bb = bytearray(b)
            bb[i] = v
            p.write_bytes(bytes(bb))
            try: read_dbn(p)
            except DataError as e: assert p.name in str(e)

# Record 3 of `make_bars()` as written: AAA (instrument 1 of 1, 2) at 2024-01-02 00:03 UTC, prices near 100.
CORRUPT_RECORDS = {  # name: (field, byte of the field XOR-ed with 0xff, the message after 'looks corrupt: record 3 ')
    'iid_low': ('instrument_id', 0, "has instrument id 254, which its symbology does not list (it lists 1, 2)"),
    'iid_high': ('instrument_id', 3, "has instrument id 4278190081, which its symbology does not list"),
    'ts_high': ('ts_event', 7, "has timestamp 16764190933926938624 ns, outside the period its metadata gives "
                               "(2024-01-02 00:00:00+00:00 to 2024-01-02 00:29:00.000000001+00:00)"),
    'ts_low': ('ts_event', 0, "has timestamp 2024-01-02 00:03:00.000000255+00:00, "
                              "not the start of a minute as an ohlcv-1m bar's is"),
    'open_high': ('open', 7, "has open -72057493.72, beyond any price (2^53 units of 1e-9, about 9 million)"),
    'low_mid': ('low', 5, "has high 100.6195 < low 280475.5321, which no bar aggregated from trades has"),
    'close_mid': ('close', 4, "has open 100.317 or close 998.0176649 outside [low, high] = [100.067, 100.6195], "
                              "which no bar aggregated from trades has"),
    'volume_high': ('volume', 7, "has volume 1.837e+19, beyond any volume (2^53)"),
    'rtype': ('rtype', 0, "has record type 0xde and length 56 bytes" + NOT_OHLCV),
    'length': ('length', 0, "has record type 0x21 and length 964 bytes" + NOT_OHLCV),
}

@pytest.mark.parametrize('zstd', [False, True], ids=['dbn', 'dbn.zst'])
@pytest.mark.parametrize('case', list(CORRUPT_RECORDS))
def test_corrupt_record_bytes(tmp_path, case, zstd):
    """A byte flipped inside a record (of the plain DBN, then zstd-compressed again) is one line saying the file looks
    corrupt, what is impossible about the record, and to download it again; never a bad-bar message."""
    field, k, says = CORRUPT_RECORDS[case]
    b = bytearray(dbn_bytes(tmp_path))
    dt = np.dtype(dbn.OHLCVMsg._dtypes)
    b[meta_end(bytes(b)) + 3 * OHLCV_SIZE + dt.fields[field][1] + k] ^= 0xff
    p = tmp_path / f'{case}.dbn{".zst" if zstd else ""}'
    p.write_bytes(zstandard.ZstdCompressor().compress(bytes(b)) if zstd else bytes(b))
    for fn in (read_dbn, read_ohlcv):
        msg = expect_error(fn, p, f'the file looks corrupt: record 3 {says}')
        assert msg.startswith(f'{p}: ') and msg.endswith('; download it again') and '\n' not in msg, msg

def test_corrupt_records_say_so(tmp_path):
    "Random flips in the records: each read succeeds (the flips left possible values) or says the file looks corrupt."
    b = dbn_bytes(tmp_path)
    end = meta_end(b)
    p = tmp_path / 'flipped.dbn'
    for seed in range(200):
        rng = np.random.default_rng(seed)
        bb = bytearray(b)
        for o in end + rng.choice(len(b) - end, 1 + seed % 4, replace=False): bb[o] ^= int(rng.integers(1, 256))
        p.write_bytes(bytes(bb))
        try: read_ohlcv(p)
        except DataError as e: assert 'flipped.dbn: the file looks corrupt: record' in str(e), f"seed {seed}: {e}"

def test_undefined_low_is_not_corrupt(tmp_path):
    """An undefined low (UNDEF_PRICE, int64 max, above the high as an integer) is real data, not corruption: read_dbn
    gives NaN and read_ohlcv refuses the bar with the bar-level message."""
    b = bytearray(dbn_bytes(tmp_path))
    low = meta_end(bytes(b)) + 2 * OHLCV_SIZE + np.dtype(dbn.OHLCVMsg._dtypes).fields['low'][1]
    b[low:low + 8] = dbn.UNDEF_PRICE.to_bytes(8, 'little')
    (tmp_path / 'undef.dbn').write_bytes(bytes(b))
    assert np.isnan(read_dbn(tmp_path / 'undef.dbn').low[2])
    msg = expect_error(read_ohlcv, tmp_path / 'undef.dbn', 'NaN, infinite or undefined price in 1 bar(s)')
    assert 'corrupt' not in msg

# %% DBN of a non-OHLCV schema
def _trades_meta(schema=dbn.Schema.TRADES):
    return dbn.Metadata(dataset='XNAS.ITCH', schema=schema, start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, symbols=['A'], partial=[], not_found=[], end=10, mappings=[])

def _trade() -> bytes:
    return bytes(dbn.TradeMsg(publisher_id=1, instrument_id=1, ts_event=5, price=100 * 10**9, size=1,
                              action=dbn.Action.TRADE, side=dbn.Side.NONE, depth=0, ts_recv=6, flags=0))

def test_non_ohlcv_dbn(tmp_path):
    p = tmp_path / 'trades.dbn'
    p.write_bytes(bytes(_trades_meta().encode()) + _trade() * 3)
    for fn in (read_dbn, read_ohlcv): expect_error(fn, p, 'schema is trades')
    p = tmp_path / 'mixed.dbn'    # no schema in the metadata (a mixed-schema file)
    p.write_bytes(bytes(_trades_meta(None).encode()) + _trade())
    expect_error(read_dbn, p, 'schema is None')
    # OHLCV metadata, but the records say otherwise
    b = dbn_bytes(tmp_path)
    end = meta_end(b)
    corrupt = 'the file looks corrupt: record '
    cases = {'trade_rec.dbn': (b[:end] + _trade() * 7, corrupt + '0 has record type 0x0 and length 48 bytes'),
             'mixed_recs.dbn': (b[:end] + b[end:end + OHLCV_SIZE] + _trade(), 'truncated DBN'),
             'rtype.dbn': (b[:end + 3 * OHLCV_SIZE + 1] + b'\x00' + b[end + 3 * OHLCV_SIZE + 2:],
                           corrupt + '3 has record type 0x0 and length 56 bytes'),
             'rlength.dbn': (b[:end + 3 * OHLCV_SIZE] + b'\x0f' + b[end + 3 * OHLCV_SIZE + 1:],
                             corrupt + '3 has record type 0x21 and length 60 bytes')}
    for name, (data, phrase) in cases.items():
        (tmp_path / name).write_bytes(data)
        for fn in (read_dbn, read_ohlcv): expect_error(fn, tmp_path / name, phrase)

# %% CSV / bar checks
GOOD = ("ts_event,symbol,open,high,low,close,volume\n"
        "2024-01-02T00:00Z,A,10,11,9,10.5,100\n"
        "2024-01-02T00:01Z,A,10.5,11,10,10.7,50\n"
        "2024-01-02T00:02Z,A,10.7,11,10,10.2,20\n")
CSV_CASES = {  # name: (text, phrase)
    'missing_col.csv': ('\n'.join(l.rsplit(',', 1)[0] for l in GOOD.splitlines()), "missing column 'volume'"),
    'nan_price.csv': (GOOD.replace('10.5,100', 'NaN,100'), 'NaN, infinite'),
    'empty_price.csv': (GOOD.replace('10.5,100', ',100'), 'NaN, infinite'),
    'inf_price.csv': (GOOD.replace('10.5,100', 'inf,100'), 'infinite'),
    'non_numeric.csv': (GOOD.replace('10.5,100', 'abc,100'), "column 'close' has non-numeric"),
    'zero_price.csv': (GOOD.replace('10,11,9,10.5', '0,11,0,10.5'), 'price <= 0'),
    'high_lt_low.csv': (GOOD.replace('10,11,9', '10,9,11'), 'high < low'),
    'open_outside.csv': (GOOD.replace('10,11,9', '12,11,9'), 'open or close outside [low, high]'),
    'close_outside.csv': (GOOD.replace('10,11,9,10.5', '10,11,9,11.5'), 'open or close outside [low, high]'),
    'neg_volume.csv': (GOOD.replace(',100\n', ',-1\n'), 'negative volume'),
    'dup_ts.csv': (GOOD.replace('00:01Z', '00:00Z'), 'duplicate timestamp'),
    'backwards_ts.csv': (GOOD.replace('00:02Z', '00:00:30Z'), 'timestamps not increasing'),
    'bad_ts.csv': (GOOD.replace('2024-01-02T00:01Z', 'notadate'), 'not timestamps'),
    'header_only.csv': (GOOD.splitlines()[0] + '\n', 'no bars'),
    'empty.csv': ('', 'empty file'),
    'missing_symbol.csv': (GOOD.replace('00:01Z,A,', '00:01Z,,'),
                           'missing symbol in 1 row(s); first at 2024-01-02 00:01:00+00:00'),
    'blank_lines.csv': ('\n\n', 'not a readable CSV'),
    'semicolons.csv': (GOOD.replace(',', ';'), "semicolons.csv: the header is one column "
                       "'ts_event;symbol;open;high;low;close;volume': the file looks separated by ';', expected ','"),
    'tabs.csv': (GOOD.replace(',', '\t'), "tabs.csv: the header is one column 'ts_event\\tsymbol\\topen\\thigh\\tlow"
                 "\\tclose\\tvolume': the file looks separated by tabs, expected ','"),
    'decimal_commas.csv': (GOOD.replace(',', ';').replace('10.5', '10,5'), "looks separated by ';', expected ','"),
}

@pytest.mark.parametrize('name', list(CSV_CASES))
def test_bad_csv(tmp_path, name):
    text, phrase = CSV_CASES[name]
    (tmp_path / name).write_text(text)
    expect_error(read_ohlcv, tmp_path / name, phrase)

def test_bad_csv_in_folder(tmp_path):
    "In a folder, the error names the bad file; bars valid per file but duplicated across files are refused."
    (tmp_path / 'a.csv').write_text(GOOD)
    (tmp_path / 'b.csv').write_text(CSV_CASES['high_lt_low.csv'][0])
    expect_error(read_ohlcv, tmp_path, 'high < low')
    assert 'b.csv' in str(pytest.raises(DataError, read_ohlcv, tmp_path).value)
    (tmp_path / 'b.csv').write_text(GOOD)
    expect_error(read_ohlcv, tmp_path, 'duplicate timestamp')

@pytest.mark.parametrize('text', [GOOD.replace('2024-01-02T00:01Z', ''),
                                  'timestamp,symbol,open,high,low,close,volume\n1704153600000,A,10,11,9,10.5,100\n,A,10.5,11,10,10.7,50\n'],
                         ids=['iso', 'epoch'])
def test_missing_timestamp(tmp_path, text):
    (tmp_path / 'nat.csv').write_text(text)
    expect_error(read_ohlcv, tmp_path / 'nat.csv', 'timestamp')

def test_other_bad_inputs(tmp_path):
    (tmp_path / 'empty.dbn').write_bytes(b'')
    for fn in (read_dbn, read_ohlcv): expect_error(fn, tmp_path / 'empty.dbn', 'empty file')
    (tmp_path / 'blob.bin').write_bytes(b'\x00\x01\x02\x03' * 300)
    expect_error(read_ohlcv, tmp_path / 'blob.bin', 'unknown format')
    (tmp_path / 'nofiles').mkdir()
    (tmp_path / 'nofiles' / '.hidden').write_text(GOOD)
    (tmp_path / 'nofiles' / 'sub').mkdir()
    expect_error(read_ohlcv, tmp_path / 'nofiles', 'folder has no data files')
    expect_error(read_ohlcv, tmp_path / 'absent.csv', 'no such file')
    expect_error(read_dbn, tmp_path / 'absent.dbn', 'no such file')
    os.mkfifo(tmp_path / 'pipe.csv')                 # exists, but is not a file: said so, and never opened
    for fn in (read_dbn, read_ohlcv): expect_error(fn, tmp_path / 'pipe.csv', 'not a regular file')

def test_too_short_for_a_window(tmp_path):
    p = tmp_path / 'short.dbn'
    write_dbn(make_bars(20), p)
    bars = read_ohlcv(p)
    with pytest.raises(DataError) as ei: make_windows(bars, DataConfig(encoder_length=16, horizon=5), source=str(p))
    assert p.name in str(ei.value) and 'too short' in str(ei.value)
    wd = make_windows(bars, DataConfig(encoder_length=14, horizon=5, val_start='2030-01-01', test_start='2030-01-01'),
                      source=str(p))
    assert len(wd.train) == 2   # 19 usable bars of each of the two symbols: one window's worth each, all for training

# %% other formats
def test_parquet_roundtrip(tmp_path):
    bars = make_bars(25)
    bars.to_parquet(tmp_path / 'bars.parquet')
    pd.testing.assert_frame_equal(read_ohlcv(tmp_path / 'bars.parquet'), read_ohlcv_frame(bars), check_dtype=False)
    bars.set_index('ts_event').to_parquet(tmp_path / 'indexed.pq')   # a DatetimeIndex is the time column
    pd.testing.assert_frame_equal(read_ohlcv(tmp_path / 'indexed.pq'), read_ohlcv_frame(bars), check_dtype=False)


def test_truncated_parquet(tmp_path):
    make_bars(25).to_parquet(tmp_path / 'full.parquet')
    b = (tmp_path / 'full.parquet').read_bytes()
    (tmp_path / 'cut.parquet').write_bytes(b[:len(b) // 2])
    expect_error(read_ohlcv, tmp_path / 'cut.parquet', 'parquet')

@pytest.mark.parametrize('fmt', ['csv', 'parquet'])
def test_zstd_file_without_zst_suffix(tmp_path, fmt):
    plain = tmp_path / f'plain.{fmt}'
    if fmt == 'csv': plain.write_text(GOOD)
    else: make_bars(10).to_parquet(plain)
    (tmp_path / f'bars.{fmt}').write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    pd.testing.assert_frame_equal(read_ohlcv(tmp_path / f'bars.{fmt}'), read_ohlcv(plain))

def test_csv_aliases_and_epochs(tmp_path):
    ref = read_ohlcv(_write(tmp_path / 'ref.csv', GOOD))
    alias = GOOD.replace('ts_event,symbol,open,high,low,close,volume', 'Date,Ticker,Open,High,Low,Close,Volume')
    pd.testing.assert_frame_equal(read_ohlcv(_write(tmp_path / 'alias.csv', alias)), ref)
    short = GOOD.replace('ts_event,symbol,open,high,low,close,volume', ' Timestamp ,Instrument,o,h,l,Last,vol')
    pd.testing.assert_frame_equal(read_ohlcv(_write(tmp_path / 'short.csv', short)), ref)
    secs = [int(pd.Timestamp(f'2024-01-02T00:0{i}Z').timestamp()) for i in range(3)]
    for unit, mult in (('s', 1), ('ms', 1000)):
        text = GOOD
        for i, s in enumerate(secs): text = text.replace(f'2024-01-02T00:0{i}Z', str(s * mult))
        df = read_ohlcv(_write(tmp_path / f'epoch_{unit}.csv', text))
        pd.testing.assert_frame_equal(df, ref, obj=unit)
    nosym = read_ohlcv(_write(tmp_path / 'SPY.daily.csv', GOOD.replace(',symbol', '').replace(',A,', ',')))
    assert (nosym.symbol == 'SPY').all()   # no symbol column: the file name's stem

def _write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p

def test_folder_of_mixed_formats(tmp_path):
    bars = make_bars(25, syms=('AAA', 'BBB', 'CCC'))
    write_dbn(bars[bars.symbol == 'AAA'], tmp_path / 'a.dbn.zst', zstd=True)
    bars[bars.symbol == 'BBB'].to_csv(tmp_path / 'b.csv', index=False)
    bars[bars.symbol == 'CCC'].reset_index(drop=True).to_parquet(tmp_path / 'c.parquet')
    pd.testing.assert_frame_equal(read_ohlcv(tmp_path), read_ohlcv_frame(bars), check_dtype=False)

def test_parquet_with_non_default_index(tmp_path):
    bars = make_bars(25, syms=('AAA', 'CCC'))
    sub = bars[bars.symbol == 'CCC']                 # index 25..49, stored in the Parquet pandas metadata
    sub.to_parquet(tmp_path / 'c.parquet')
    pd.testing.assert_frame_equal(read_ohlcv(tmp_path / 'c.parquet'), read_ohlcv_frame(sub), check_dtype=False)

# %% readers never write
def test_readers_never_write(tmp_path):
    d = tmp_path / 'in'
    d.mkdir()
    write_dbn(make_bars(10), d / 'ok.dbn')
    (d / 'bad.csv').write_text(CSV_CASES['high_lt_low.csv'][0])
    (d / 'cut.dbn').write_bytes((d / 'ok.dbn').read_bytes()[:-3])
    snap = lambda: sorted((str(f.relative_to(tmp_path)), f.stat().st_size, f.stat().st_mtime_ns)
                          for f in tmp_path.rglob('*'))
    before = snap()
    with pytest.raises(DataError): read_ohlcv(d)
    for f in d.iterdir():
        for fn in (read_dbn, read_ohlcv):
            try: fn(f)
            except DataError: pass
    assert snap() == before


def test_sample_matches_arch_loaders():
    "`load_sample` reads arch's bundled files directly (no `import arch`); the bars must equal arch's own loaders."
    from arch.data import sp500, nasdaq
    from tft_nb.data import load_sample
    s = load_sample()
    for name, mod in (('sp500', sp500), ('nasdaq', nasdaq)):
        ref = mod.load()
        got = s[s.symbol == name].set_index('ts_event')
        np.testing.assert_array_equal(got.index.tz_localize(None).values, ref.index.values)
        for col in ('open', 'high', 'low', 'close', 'volume'):
            np.testing.assert_array_equal(got[col].to_numpy(), ref[col.capitalize()].to_numpy(dtype='float64'),
                                          err_msg=f"{name}.{col}")

def test_folder_with_a_broken_link(tmp_path):
    "A data file in a folder that cannot be read (here a link to nothing) is an error naming it, not silently left out."
    (tmp_path / 'a.csv').write_text(GOOD)
    os.symlink('gone.csv', tmp_path / 'b.csv')
    expect_error(read_ohlcv, tmp_path, 'no such file')
    assert 'b.csv' in str(pytest.raises(DataError, read_ohlcv, tmp_path).value)

def test_symbol_padding_is_not_another_symbol(tmp_path):
    "' A' and 'A' in a CSV are the same symbol: the bars of both are one series."
    (tmp_path / 'pad.csv').write_text(GOOD.replace('00:01Z,A,', '00:01Z, A ,'))
    assert read_ohlcv(tmp_path / 'pad.csv').symbol.astype(str).tolist() == ['A'] * 3
