"""A corpus of bad inputs for both commands (issue 25, item 6): flags, data files, checkpoints and sidecars.

Every case must end with exit status 2 and exactly one line on stderr, `tft_train: error: ...` or
`tft_predict: error: ...`, holding the case's expected parts (the file, field or flag at fault and what was expected;
matched without regard to case), and must write nothing: the case's folder, which holds its inputs and is the run's
working directory, has the same entries afterwards, its files with the same bytes and modification times (so no
checkpoints/ or forecasts.csv appears). A case that the library does not meet yet stays here, failing, with the
behaviour the contract asks for.

The cases run in tests/corpus_runner.py, a fork server: one interpreter imports the package once and forks a child per
case, where an interpreter per case would spend minutes importing torch. `test_fork_server_is_faithful` runs three
cases as the real console scripts and compares."""
from __future__ import annotations
import gzip, hashlib, json, os, shlex, shutil, stat, subprocess, sys, tempfile
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace as NS
from typing import NamedTuple

import numpy as np, pandas as pd, pytest, torch, zstandard
import databento_dbn as dbn
from safetensors.torch import save as save_tensors
from tft_nb.data import load_sample
from tft_nb.dbn import write_dbn
from tft_nb.checkpoint import sidecar_digest
import procs

RUNNER = Path(__file__).with_name('corpus_runner.py')
CUDA = torch.cuda.is_available()
TINY = '--encoder-length 20 --horizon 3 --hidden-size 8 --attention-heads 2 --lstm-layers 1'
TRAIN = f'--data bars.csv {TINY} --epochs 1'           # before a train flag case's own flags (a flag's last value wins)
PREDICT = '--checkpoint ck/tft_best --data bars.csv'   # before a predict flag case's own flags
RUN = dict(encoder_length=20, horizon=3, hidden_size=8, attention_heads=2, lstm_layers=1, epochs=2, batch_size=64,
           checkpoint_frequency=1)                     # the fixture's run; a resume repeats its flags
RESUME = f'--data bars.csv {TINY} --epochs 2 --batch-size 64 --checkpoint-frequency 1'


class Case(NamedTuple):
    id: str
    program: str        # tft_train or tft_predict
    argv: list
    expect: tuple       # parts the error line must hold: a string, or a tuple of alternatives
    setup: str          # what the case's folder holds besides bars.csv: '+'-joined names of SETUPS


# %% flags: (id, flags after TRAIN / PREDICT, expected parts[, setup])
TRAIN_FLAGS = [
    ('data-empty', "--data ''", ('--data', 'non-empty')),
    ('data-missing', '--data nope.csv', ('nope.csv', 'no such file')),
    ('data-missing-folder', '--data nope/', ('nope', 'no such file')),
    ('resume-empty', "--resume ''", ('--resume', 'non-empty')),
    ('resume-last-no-run', '--resume last', ('--resume last', 'tft_last')),
    ('encoder-zero', '--encoder-length 0', ('--encoder-length', '>= 1')),
    ('encoder-negative', '--encoder-length -5', ('--encoder-length', '>= 1')),
    ('encoder-float', '--encoder-length 1.5', ('--encoder-length', '1.5')),
    ('encoder-text', '--encoder-length abc', ('--encoder-length', 'abc')),
    ('encoder-too-long', '--encoder-length 1000', ('--encoder-length', 'too short')),
    ('encoder-huge', '--encoder-length 99999999999999999999', ('--encoder-length',)),
    ('horizon-zero', '--horizon 0', ('--horizon', '>= 1')),
    ('horizon-negative', '--horizon -1', ('--horizon', '>= 1')),
    ('horizon-text', '--horizon x', ('--horizon', "'x'")),
    ('horizon-too-long', '--horizon 500', ('--horizon', 'too short')),
    ('target-unknown', '--target foo', ('--target', 'foo')),
    ('target-empty', "--target ''", ('--target', 'non-empty')),
    ('target-upper', '--target LV', ('--target', 'LV')),
    ('observed-unknown', '--observed r,foo', ('--observed', 'foo')),
    ('observed-calendar', '--observed dow', ('--observed', 'dow')),
    ('known-unknown', '--known dow,week', ('--known', 'week')),
    ('known-none', '--known ,', ('--known', 'one or more')),
    ('known-observed', '--known r', ('--known', "'r'")),
    ('scaling-unknown', '--scaling robust', ('--scaling', 'robust')),
    ('scaling-empty', "--scaling ''", ('--scaling', 'non-empty')),
    ('per-symbol-value', '--per-symbol=yes', ('--per-symbol', 'yes')),
    ('val-start-garbage', '--val-start garbage', ('--val-start', 'garbage')),
    ('val-start-month-13', '--val-start 2018-13-01', ('--val-start', '2018-13-01')),
    ('val-start-empty', "--val-start ''", ('--val-start', 'non-empty')),
    ('test-start-garbage', '--test-start soon', ('--test-start', 'soon')),
    ('dates-out-of-order', '--val-start 2018-06-01 --test-start 2018-01-02', ('--test-start', 'before')),
    ('val-start-after-data', '--val-start 2030-01-01', ('--val-start', '2030-01-01')),
    ('val-start-before-data', '--val-start 1990-01-01', ('--val-start', 'no training windows')),
    ('val-equals-test', '--val-start 2018-06-01 --test-start 2018-06-01', ('--val-start', 'no windows')),
    ('test-start-after-data', '--val-start 2018-06-01 --test-start 2031-01-01', ('--test-start', 'no windows')),
    ('val-frac-negative', '--val-frac -0.1', ('--val-frac', '[0, 1)')),
    ('val-frac-one', '--val-frac 1', ('--val-frac', '[0, 1)')),
    ('val-frac-nan', '--val-frac nan', ('--val-frac', 'nan')),
    ('val-frac-inf', '--val-frac inf', ('--val-frac', 'inf')),
    ('val-frac-text', '--val-frac half', ('--val-frac', 'half')),
    ('fracs-sum-over-one', '--val-frac 0.6 --test-frac 0.5', ('--test-frac', '--val-frac')),
    ('test-frac-negative', '--test-frac -0.5', ('--test-frac', '[0, 1)')),
    ('test-frac-nan', '--test-frac nan', ('--test-frac', 'nan')),
    ('hidden-zero', '--hidden-size 0', ('--hidden-size', '>= 1')),
    ('hidden-negative', '--hidden-size -8', ('--hidden-size', '>= 1')),
    ('hidden-indivisible', '--hidden-size 9', ('--hidden-size', 'divisible')),
    ('hidden-text', '--hidden-size big', ('--hidden-size', 'big')),
    ('hidden-huge', '--hidden-size 100000', ('--hidden-size', 'parameters')),
    ('heads-zero', '--attention-heads 0', ('--attention-heads', '>= 1')),
    ('heads-negative', '--attention-heads -2', ('--attention-heads', '>= 1')),
    ('heads-indivisible', '--attention-heads 3', ('--attention-heads', 'divisible')),
    ('lstm-zero', '--lstm-layers 0', ('--lstm-layers', '[1, 32]')),
    ('lstm-33', '--lstm-layers 33', ('--lstm-layers', '[1, 32]')),
    ('lstm-huge', '--lstm-layers 99999999999999999999', ('--lstm-layers', '[1, 32]')),
    ('dropout-negative', '--dropout -0.1', ('--dropout', '[0, 1)')),
    ('dropout-one', '--dropout 1', ('--dropout', '[0, 1)')),
    ('dropout-nan', '--dropout nan', ('--dropout', 'nan')),
    ('dropout-inf', '--dropout inf', ('--dropout', 'inf')),
    ('quantiles-decreasing', '--quantiles 0.9,0.5,0.1', ('--quantiles', 'increasing')),
    ('quantiles-zero', '--quantiles 0,0.5', ('--quantiles', '(0, 1)')),
    ('quantiles-one', '--quantiles 0.5,1', ('--quantiles', '(0, 1)')),
    ('quantiles-repeated', '--quantiles 0.5,0.5', ('--quantiles', 'increasing')),
    ('quantiles-text', '--quantiles low,high', ('--quantiles', 'low,high')),
    ('quantiles-none', "--quantiles ''", ('--quantiles',)),
    ('quantiles-nan', '--quantiles nan', ('--quantiles', 'nan')),
    ('quantiles-empty-item', '--quantiles 0.1,,0.9', ('--quantiles', "'0.1,,0.9'", 'empty item')),
    ('observed-trailing-comma', '--observed r,lv,', ('--observed', "'r,lv,'", 'empty item')),
    ('monotone-value', '--monotone-quantiles=no', ('--monotone-quantiles', 'no')),
    ('epochs-zero', '--epochs 0', ('--epochs', '>= 1')),
    ('epochs-negative', '--epochs -1', ('--epochs', '>= 1')),
    ('epochs-text', '--epochs abc', ('--epochs', 'abc')),
    ('epochs-float', '--epochs 1.5', ('--epochs', '1.5')),
    ('epochs-empty', "--epochs ''", ('--epochs', "''")),
    ('epochs-no-value', '--epochs', ('--epochs', 'argument')),
    ('lr-zero', '--learning-rate 0', ('--learning-rate', '> 0')),
    ('lr-negative', '--learning-rate -1', ('--learning-rate', '> 0')),
    ('lr-nan', '--learning-rate nan', ('--learning-rate', 'nan')),
    ('lr-inf', '--learning-rate inf', ('--learning-rate', 'finite')),
    ('lr-text', '--learning-rate fast', ('--learning-rate', 'fast')),
    ('batch-zero', '--batch-size 0', ('--batch-size', '>= 1')),
    ('batch-negative', '--batch-size -4', ('--batch-size', '>= 1')),
    ('batch-text', '--batch-size many', ('--batch-size', 'many')),
    ('accumulate-zero', '--accumulate-grad-batches 0', ('--accumulate-grad-batches', '>= 1')),
    ('accumulate-negative', '--accumulate-grad-batches -2', ('--accumulate-grad-batches', '>= 1')),
    ('optimizer-sgd', '--optimizer sgd', ('--optimizer', 'sgd')),
    ('optimizer-upper', '--optimizer ADAM', ('--optimizer', 'ADAM')),
    ('optimizer-empty', "--optimizer ''", ('--optimizer', 'non-empty')),
    ('weight-decay-negative', '--weight-decay -0.1', ('--weight-decay', '>= 0')),
    ('weight-decay-nan', '--weight-decay nan', ('--weight-decay', 'nan')),
    ('weight-decay-inf', '--weight-decay inf', ('--weight-decay', 'finite')),
    ('grad-clip-negative', '--grad-clip -1', ('--grad-clip', '>= 0')),
    ('grad-clip-nan', '--grad-clip nan', ('--grad-clip', 'nan')),
    ('grad-clip-inf', '--grad-clip inf', ('--grad-clip', 'finite')),
    ('lr-schedule-cosine', '--lr-schedule cosine', ('--lr-schedule', 'cosine')),
    ('lr-schedule-empty', "--lr-schedule ''", ('--lr-schedule', 'non-empty')),
    ('lr-patience-negative', '--lr-patience -1', ('--lr-patience', '>= 0')),
    ('lr-patience-text', '--lr-patience some', ('--lr-patience', 'some')),
    ('lr-factor-zero', '--lr-factor 0', ('--lr-factor', '(0, 1)')),
    ('lr-factor-one', '--lr-factor 1', ('--lr-factor', '(0, 1)')),
    ('lr-factor-above', '--lr-factor 1.5', ('--lr-factor', '(0, 1)')),
    ('lr-factor-nan', '--lr-factor nan', ('--lr-factor', 'nan')),
    ('lr-threshold-negative', '--lr-threshold -1', ('--lr-threshold', '>= 0')),
    ('lr-threshold-nan', '--lr-threshold nan', ('--lr-threshold', 'nan')),
    ('es-patience-zero', '--early-stopping-patience 0', ('--early-stopping-patience', '>= 1')),
    ('es-patience-negative', '--early-stopping-patience -3', ('--early-stopping-patience', '>= 1')),
    ('es-threshold-negative', '--early-stopping-threshold -0.1', ('--early-stopping-threshold', '>= 0')),
    ('es-threshold-inf', '--early-stopping-threshold inf', ('--early-stopping-threshold', 'finite')),
    ('es-threshold-nan', '--early-stopping-threshold nan', ('--early-stopping-threshold', 'nan')),
    ('checkpoint-dir-empty', "--checkpoint-dir ''", ('--checkpoint-dir', 'non-empty')),
    ('checkpoint-dir-a-file', '--checkpoint-dir bars.csv', ('--checkpoint-dir', 'not a folder')),
    ('checkpoint-dir-in-a-file', '--checkpoint-dir bars.csv/sub', ('bars.csv/sub', 'cannot write')),
    ('checkpoint-dir-is-data', '--data data --checkpoint-dir data', ('--checkpoint-dir', '--data folder'), 'datadir'),
    ('checkpoint-dir-other-run', '--checkpoint-dir old', ('--checkpoint-dir', 'already holds'), 'oldrun'),
    ('checkpoint-frequency-negative', '--checkpoint-frequency -1', ('--checkpoint-frequency', '>= 0')),
    ('checkpoint-frequency-text', '--checkpoint-frequency often', ('--checkpoint-frequency', 'often')),
    ('static-the-symbol', '--static symbol', ('--static', 'no other input (the symbol is always one)')),
    ('checkpoint-dir-is-data-spelt-otherwise', '--data data --checkpoint-dir nowhere/../data',
     ('--checkpoint-dir', '--data folder'), 'datadir'),
    ('seed-negative', '--seed -1', ('--seed', '2**63')),
    ('seed-too-big', '--seed 9223372036854775808', ('--seed', '2**63')),
    ('seed-text', '--seed lucky', ('--seed', 'lucky')),
    ('device-tpu', '--device tpu', ('--device', 'tpu')),
    ('device-empty', "--device ''", ('--device', 'non-empty')),
    ('device-upper', '--device CPU', ('--device', 'CPU')),
    ('use-gpu-with-device-cpu', '--use-gpu --device cpu', ('--use-gpu', '--device cpu')),
    ('fp32-with-bf16', '--fp32 --bf16', ('--fp32', '--bf16')),
    ('bf16-value', '--bf16=1', ('--bf16', '1')),
    ('verbose-value', '--verbose=true', ('--verbose', 'true')),
    ('overwrite-value', '--overwrite=yes', ('--overwrite', 'yes')),
    ('restore-best-value', '--restore-best=no', ('--restore-best', 'no')),
    ('unknown-flag', '--foo 1', ('--foo',)),
    ('abbreviated-flag', '--epoch 1', ('--epoch',)),
    ('original-lr-name', '--lr 0.01', ('--lr',)),
    ('predict-flag', '--output fc.csv', ('--output',)),
    ('positional', 'extra', ('extra',)),
    ('single-dash', '-epochs 1', ('-epochs',)),
] + ([] if CUDA else [
    ('device-cuda-unavailable', '--device cuda', ('--device cuda', 'CUDA')),
    ('use-gpu-unavailable', '--use-gpu', (('--use-gpu', '--device cuda'), 'CUDA')),
])

PREDICT_FLAGS = [
    ('checkpoint-empty', "--checkpoint ''", ('--checkpoint', 'non-empty')),
    ('checkpoint-missing', '--checkpoint nope/tft_best', ('nope/tft_best', 'not found')),
    ('checkpoint-folder', '--checkpoint ck', ('ck', 'folder')),
    ('checkpoint-empty-folder', '--checkpoint empty', ('empty', 'no checkpoint'), 'emptydir'),
    ('checkpoint-data-file', '--checkpoint bars.csv', ('bars.csv', 'not a checkpoint')),
    ('data-empty', "--data ''", ('--data', 'non-empty')),
    ('data-missing', '--data nope.csv', ('nope.csv', 'no such file')),
    ('output-empty', "--output ''", ('--output', 'non-empty')),
    ('output-folder', '--output ck', ('--output', 'folder')),
    ('output-dot', '--output .', ('--output', 'folder')),
    ('output-is-data', '--output bars.csv', ('--output', '--data file')),
    ('output-checkpoint-sidecar', '--output ck/tft_best.json', ('--output', "checkpoint")),
    ('output-in-data-folder', '--data data --output data/fc.csv', ('--output', '--data folder'), 'datadir'),
    ('output-in-a-file', '--output bars.csv/fc.csv', ('bars.csv/fc.csv',)),
    ('output-name-too-long', '--output ' + 'f' * 300 + '.csv', ('fff.csv', 'too long')),
    ('split-unknown', '--split train', ('--split', 'train')),
    ('split-empty', "--split ''", ('--split', 'non-empty')),
    ('split-upper', '--split TEST', ('--split', 'TEST')),
    ('batch-zero', '--batch-size 0', ('--batch-size', '>= 1')),
    ('batch-negative', '--batch-size -1', ('--batch-size', '>= 1')),
    ('batch-text', '--batch-size all', ('--batch-size', 'all')),
    ('batch-float', '--batch-size 2.5', ('--batch-size', '2.5')),
    ('device-tpu', '--device tpu', ('--device', 'tpu')),
    ('device-empty', "--device ''", ('--device', 'non-empty')),
    ('unknown-flag', '--foo', ('--foo',)),
    ('train-flag', '--epochs 3', ('--epochs',)),
    ('use-gpu', '--use-gpu', ('--use-gpu',)),
    ('positional', 'ck/tft_best', ('ck/tft_best',)),
    ('split-no-value', '--split', ('--split', 'argument')),
] + ([] if CUDA else [('device-cuda-unavailable', '--device cuda', ('--device cuda', 'CUDA'))])


# %% data files: the bars a case reads, written from the 400 good bars
@lru_cache(maxsize=None)
def good() -> pd.DataFrame:
    "400 daily bars of the S&P 500 (the built-in data's last ones): the bars of the fixture's run."
    b = load_sample().query("symbol == 'sp500'").tail(400).reset_index(drop=True)
    return b.assign(symbol=b.symbol.astype(str))

def good_text() -> str: return good().to_csv(index=False)

def csv(edit):
    "A writer of the good bars as CSV, `edit(frame)` applied."
    return lambda p: edit(good().copy()).to_csv(p, index=False)

def text(edit):
    "A writer of the good bars' CSV text, `edit(text)` applied."
    return lambda p: p.write_text(edit(good_text()))

def raw(data: bytes): return lambda p: p.write_bytes(data)

def cell(row: int, col: str, value):
    "An edit setting one cell of the frame."
    def edit(df):
        df[col] = df[col].astype(object)
        df.loc[row, col] = value
        return df
    return edit

def swap_rows(df, i=100):
    "Bars i and i + 1 in each other's place."
    return df.iloc[np.r_[0:i, i + 1, i, i + 2:len(df)]]

def parquet(edit):
    return lambda p: edit(good().copy()).to_parquet(p)

def cut(writer, frac=0.5):
    "A writer of `writer`'s file cut to `frac` of its bytes."
    def write(p):
        writer(p)
        b = p.read_bytes()
        p.write_bytes(b[:int(len(b) * frac)])
    return write

def dbn_bytes(df=None, schema='ohlcv-1d') -> bytes:
    "DBN v3 bytes of `df` (default: the good bars)."
    with tempfile.TemporaryDirectory() as d:
        write_dbn(good() if df is None else df, Path(d) / 'bars.dbn', schema=schema)
        return (Path(d) / 'bars.dbn').read_bytes()

def meta_end(b: bytes) -> int: return 8 + int.from_bytes(b[4:8], 'little')

def zstd(b: bytes) -> bytes: return zstandard.ZstdCompressor().compress(b)

def dbn_file(edit=lambda b: b, compress=False):
    "A writer of the good bars as DBN, `edit(bytes)` applied (then zstd-compressed if `compress`)."
    return lambda p: p.write_bytes((zstd if compress else (lambda b: b))(edit(dbn_bytes())))

def trades_dbn(p):
    "A DBN file of trades, not bars."
    meta = dbn.Metadata(dataset='XNAS.ITCH', schema=dbn.Schema.TRADES, start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, symbols=['A'], partial=[], not_found=[], end=10, mappings=[])
    trade = dbn.TradeMsg(publisher_id=1, instrument_id=1, ts_event=5, price=100 * 10**9, size=1,
                         action=dbn.Action.TRADE, side=dbn.Side.NONE, depth=0, ts_recv=6, flags=0)
    p.write_bytes(bytes(meta.encode()) + bytes(trade) * 50)

def undefined_price(b: bytes) -> bytes:
    "The first record's open set to DBN's undefined price."
    at = meta_end(b) + 16
    return b[:at] + int(dbn.UNDEF_PRICE).to_bytes(8, 'little', signed=True) + b[at + 8:]

def folder(**files):
    "A writer of a folder holding `files` (name -> writer, or a str: a link to that name)."
    def write(p):
        p.mkdir()
        for name, w in files.items():
            if isinstance(w, str): os.symlink(w, p / name)
            else: w(p / name)
    return write

def dbn_of(schema, freq):
    return lambda p: p.write_bytes(dbn_bytes(good().assign(
        ts_event=pd.date_range('2024-01-02', periods=400, freq=freq, tz='UTC')), schema))

def hourly(p):
    good().assign(ts_event=pd.date_range('2024-01-02 14:00', periods=400, freq='h', tz='UTC')).to_csv(p, index=False)

def fifo(p): os.mkfifo(p)

RNG = np.random.default_rng(25)
GARBAGE = RNG.bytes(3000)
good_csv = csv(lambda df: df)
SEPARATOR = ('semicolon', 'separat', 'delimit', "';'")    # a ';'-separated file: the message says so

# (id, file or folder name, writer, expected parts besides the name, programs: 'tp' both, 't' train, 'p' predict)
DATA = [
    ('csv-no-volume', 'novol.csv', csv(lambda df: df.drop(columns='volume')), ("column 'volume'",), 'tp'),
    ('csv-no-close', 'noclose.csv', csv(lambda df: df.drop(columns='close')), ("column 'close'",), 'tp'),
    ('csv-no-time', 'notime.csv', csv(lambda df: df.drop(columns='ts_event')), ("column 'ts_event'",), 'tp'),
    ('csv-renamed-columns', 'cols.csv', csv(lambda df: df.set_axis(list('abcdefg'), axis=1)), ('missing column',),
     'tp'),
    ('csv-text-close', 'textclose.csv', csv(cell(50, 'close', 'abc')), ("'close'", 'non-numeric'), 'tp'),
    ('csv-text-volume', 'textvol.csv', csv(cell(50, 'volume', 'lots')), ("'volume'", 'non-numeric'), 'tp'),
    ('csv-bool-time', 'booltime.csv', csv(lambda df: df.assign(ts_event=np.arange(400) % 2 == 0)),
     ("'ts_event'", 'boolean'), 'tp'),
    ('csv-bad-time', 'badtime.csv', csv(cell(50, 'ts_event', 'notadate')), ("'ts_event'", 'not timestamps'), 'tp'),
    ('csv-epoch-overflow', 'epoch.csv', csv(lambda df: df.assign(ts_event=10**13 + np.arange(400) * 86_400_000)),
     ("'ts_event'", 'not timestamps'), 'tp'),
    ('csv-time-backwards', 'backwards.csv', csv(swap_rows), ('timestamps not increasing',), 'tp'),
    ('csv-time-duplicate', 'dup.csv', csv(lambda df: df.assign(ts_event=df.ts_event.where(df.index != 51,
                                                                                            df.ts_event[50]))),
     ('duplicate timestamp',), 'tp'),
    ('csv-missing-time', 'nat.csv', csv(cell(50, 'ts_event', '')), ('timestamp',), 'tp'),
    ('csv-nan-close', 'nanclose.csv', csv(cell(50, 'close', np.nan)), ('NaN',), 'tp'),
    ('csv-inf-close', 'infclose.csv', csv(cell(50, 'close', 'inf')), ('infinite',), 'tp'),
    ('csv-negative-price', 'negprice.csv', csv(lambda df: df.assign(low=df.low.where(df.index != 50, -1.0))),
     ('price <= 0',), 'tp'),
    ('csv-zero-prices', 'zero.csv', csv(lambda df: df.assign(**{c: 0.0 for c in ('open', 'high', 'low', 'close')})),
     ('price <= 0',), 'tp'),
    ('csv-high-below-low', 'highlow.csv', csv(lambda df: df.assign(high=df.low - 1)), ('high < low',), 'tp'),
    ('csv-open-above-high', 'open.csv', csv(lambda df: df.assign(open=df.high + 1)), ('outside [low, high]',), 'tp'),
    ('csv-negative-volume', 'negvol.csv', csv(cell(50, 'volume', -5.0)), ('negative volume',), 'tp'),
    ('csv-nan-volume', 'nanvol.csv', csv(cell(50, 'volume', np.nan)), ('volume',), 'tp'),
    ('csv-missing-symbol', 'nosym.csv', csv(cell(50, 'symbol', '')), ('missing symbol',), 'tp'),
    ('csv-header-only', 'header.csv', text(lambda t: t.splitlines()[0] + '\n'), ('no bars',), 'tp'),
    ('csv-empty', 'empty.csv', raw(b''), ('empty file',), 'tp'),
    ('csv-blank-lines', 'blank.csv', raw(b'\n\n\n'), ('CSV',), 'tp'),
    ('csv-binary', 'binary.csv', raw(GARBAGE), ('format',), 'tp'),
    ('csv-semicolons', 'semi.csv', text(lambda t: t.replace(',', ';')), (SEPARATOR,), 'tp'),
    ('csv-utf16', 'utf16.csv', lambda p: p.write_bytes(good_text().encode('utf-16')), ('CSV',), 'tp'),
    ('csv-latin1', 'latin1.csv', lambda p: p.write_bytes(good_text().replace('sp500', 'caf\xe9').encode('latin-1')),
     ('UTF-8',), 'tp'),
    ('csv-ragged', 'ragged.csv', text(lambda t: t.replace('\n2018-01-02', ',1,2,3\n2018-01-02', 1)), ('CSV',), 'tp'),
    ('csv-one-bar', 'one.csv', csv(lambda df: df.head(1)), ('too short',), 'tp'),
    ('csv-too-short', 'short.csv', csv(lambda df: df.head(15)), ('too short',), 'tp'),
    ('csv-hourly-for-daily-model', 'hourly.csv', hourly, ('apart',), 'p'),
    ('csv-untrained-symbol', 'newsym.csv', csv(lambda df: df.assign(symbol='XYZ')), ('XYZ', 'trained'), 'p'),
    ('gzip-corrupt', 'bars.csv.gz', raw(b'\x1f\x8b' + GARBAGE), ('gzip',), 'tp'),
    ('parquet-cut', 'cut.parquet', cut(parquet(lambda df: df)), ('Parquet',), 'tp'),
    ('parquet-garbage', 'garbage.parquet', raw(b'PAR1' + GARBAGE), ('Parquet',), 'tp'),
    ('parquet-wrong-schema', 'schema.parquet', lambda p: pd.DataFrame({'a': [1, 2], 'b': [3, 4]}).to_parquet(p),
     ('missing column',), 'tp'),
    ('parquet-text-prices', 'text.parquet', parquet(lambda df: df.assign(close='x')), ("'close'",), 'tp'),
    ('parquet-nan-prices', 'nan.parquet', parquet(lambda df: df.assign(open=np.nan)), ('NaN',), 'tp'),
    ('parquet-no-rows', 'norows.parquet', parquet(lambda df: df.head(0)), ('no bars',), 'tp'),
    ('dbn-cut-records', 'cut.dbn', dbn_file(lambda b: b[:-30]), ('truncated DBN',), 'tp'),
    ('dbn-cut-metadata', 'cutmeta.dbn', dbn_file(lambda b: b[:meta_end(b) - 9]), ('truncated DBN',), 'tp'),
    ('dbn-metadata-only', 'nobars.dbn', dbn_file(lambda b: b[:meta_end(b)]), ('no bars',), 'tp'),
    ('dbn-version-9', 'v9.dbn', dbn_file(lambda b: b[:3] + b'\x09' + b[4:]), ('version 9',), 'tp'),
    ('dbn-corrupt-metadata', 'meta.dbn', dbn_file(lambda b: b[:4] + b'\0\0\0\0' + b[8:]), ('metadata',), 'tp'),
    ('dbn-bad-record-type', 'rtype.dbn', dbn_file(lambda b: b[:meta_end(b) + 1] + b'\0' + b[meta_end(b) + 2:]),
     ('record type',), 'tp'),
    ('dbn-undefined-price', 'undef.dbn', dbn_file(undefined_price), ('price',), 'tp'),
    ('dbn-trades-schema', 'trades.dbn', trades_dbn, ('schema', 'trades'), 'tp'),
    ('dbn-legacy-dbz', 'old.dbz', raw(b'P*M\x18' + GARBAGE), ('DBZ',), 'tp'),
    ('dbn-garbage-zst', 'garbage.dbn.zst', raw(GARBAGE), ('DBN',), 'tp'),
    ('dbn-zst-garbage-payload', 'payload.dbn.zst', raw(zstd(GARBAGE)), ('DBN',), 'tp'),
    ('dbn-zst-cut', 'cut.dbn.zst', cut(dbn_file(compress=True), 0.6), ('truncated zstd',), 'tp'),
    ('dbn-zst-of-cut-dbn', 'inner.dbn.zst', dbn_file(lambda b: b[:-5], compress=True), ('truncated DBN',), 'tp'),
    ('dir-named-csv', 'x.csv', lambda p: p.mkdir(), ('no data files',), 'tp'),
    ('broken-link', 'gone.csv', lambda p: os.symlink('nothing-here.csv', p), ('no such file',), 'tp'),
    ('link-loop', 'loop.csv', lambda p: os.symlink(p.name, p), ('cannot be read', 'symbolic links'), 'tp'),
    ('dbn-zst-bomb', 'bomb.dbn.zst', raw(zstd(bytes(2**24)) * 64), ('unknown format',), 'tp'),
    ('csv-gz-bomb', 'bomb.csv.gz', raw(gzip.compress(bytes(2**24), 9) * 64), ('unknown format',), 'tp'),
    ('fifo', 'pipe.csv', fifo, ('not a regular file',), 'tp'),
    ('folder-empty', 'data', folder(), ('no data files',), 'tp'),
    ('folder-no-bar-files', 'data', folder(**{'README.md': raw(b'bars'), 'metadata.json': raw(b'{}')}),
     ('no data files',), 'tp'),
    ('folder-headers-only', 'data', folder(**{'a.csv': text(lambda t: t.splitlines()[0] + '\n')}),
     ('a.csv', 'hold'), 'tp'),
    ('folder-broken-link', 'data', folder(**{'a.csv': good_csv, 'b.csv': 'gone.csv'}), ('b.csv', 'no such file'), 'tp'),
    ('folder-one-bad-file', 'data', folder(**{'a.csv': good_csv, 'b.csv': csv(lambda df: df.assign(high=df.low - 1))}),
     ('b.csv', 'high < low'), 'tp'),
    ('folder-same-bars-twice', 'data', folder(**{'a.csv': good_csv, 'b.csv': good_csv}), ('duplicate',), 'tp'),
    ('folder-mixed-bar-sizes', 'data', folder(**{'a.dbn': dbn_of('ohlcv-1d', 'D'), 'b.dbn': dbn_of('ohlcv-1h', 'h')}),
     ('bar sizes',), 'tp'),
]


# %% checkpoints and sidecars: damage done to a copy of the fixture's run folder `run/` (holding `stem`)
def sealed(side: dict) -> dict:
    "`side` with its digest updated, as a tool that edits sidecars and reseals them would write it."
    return {**side, 'sidecar_sha256': sidecar_digest(side)}

def side_edit(edit):
    "A damage editing the sidecar: `edit(side)` changes the loaded JSON in place; the sidecar resealed."
    def damage(d: Path, stem: str):
        p = d / f'{stem}.json'
        side = json.loads(p.read_text())
        edit(side)
        p.write_text(json.dumps(sealed(side), indent=1))
    return damage

def setter(path: str, value):
    "A sidecar edit setting the entry at `path` ('a.b.c'); `DEL` removes it."
    *up, last = path.split('.')
    def edit(side):
        for k in up: side = side[k]
        if value is DEL: del side[last]
        else: side[last] = value
    return edit

DEL = object()

def file_edit(suffix: str, edit):
    "A damage changing the bytes of the checkpoint's file `stem + suffix` (the sidecar left as it was)."
    def damage(d: Path, stem: str):
        p = d / f'{stem}{suffix}'
        p.write_bytes(edit(p.read_bytes()))
    return damage

def resealed(suffix: str, edit):
    "A damage replacing the file `stem + suffix` by `edit(bytes)` and updating the sidecar's size and digest to match."
    def damage(d: Path, stem: str):
        p = d / f'{stem}{suffix}'
        b = edit(p.read_bytes())
        p.write_bytes(b)
        side = json.loads((d / f'{stem}.json').read_text())
        entry = next(f for f in side['files'].values() if f['name'] == p.name)
        entry.update(size=len(b), sha256=hashlib.sha256(b).hexdigest())
        (d / f'{stem}.json').write_text(json.dumps(sealed(side), indent=1))
    return damage

def tensors_edit(edit):
    "A bytes edit of a safetensors file through its tensors."
    def bytes_edit(b: bytes) -> bytes:
        from safetensors.torch import load
        return save_tensors(edit(load(b)))
    return bytes_edit

def with_nan(ts):
    k = sorted(ts)[0]
    ts[k] = ts[k].clone().fill_(float('nan'))
    return ts

def flip(b: bytes) -> bytes:
    at = len(b) - 100
    return b[:at] + bytes(x ^ 0xFF for x in b[at:at + 8]) + b[at + 8:]

def unlink(suffix: str): return lambda d, stem: (d / f'{stem}{suffix}').unlink()

def scaler_shift(side):
    side['data']['scaler']['loc'] = [[x + 0.5 for x in row] for row in side['data']['scaler']['loc']]

def quantiles4(side): side['model_config']['quantiles'] = [0.1, 0.25, 0.5, 0.9]

NON_FINITE = ('finite', 'nan')
# (id, damage(run folder, stem), expected parts for tft_predict --checkpoint run/tft_best, and for
# tft_train --resume run/tft_last; None: not a case for that program). '{stem}' stands for the checkpoint's stem.
CHECKPOINTS = [
    ('no-weights-file', unlink('.safetensors'), ('{stem}.safetensors', 'missing'), ('{stem}.safetensors', 'missing')),
    ('no-sidecar', unlink('.json'), ('{stem}.json', 'not found'), ('{stem}.json', 'not found')),
    ('no-train-state-file', unlink('.train.safetensors'), None, ('{stem}.train.safetensors', 'missing')),
    ('weights-cut', file_edit('.safetensors', lambda b: b[:len(b) // 2]), ('{stem}.safetensors', 'sidecar'),
     ('{stem}.safetensors', 'sidecar')),
    ('weights-empty', file_edit('.safetensors', lambda b: b''), ('{stem}.safetensors', 'sidecar'),
     ('{stem}.safetensors', 'sidecar')),
    ('weights-flipped', file_edit('.safetensors', flip), ('{stem}.safetensors', 'sidecar'),
     ('{stem}.safetensors', 'sidecar')),
    ('train-state-flipped', file_edit('.train.safetensors', flip), None, ('{stem}.train.safetensors', 'sidecar')),
    ('weights-nan-resealed', resealed('.safetensors', tensors_edit(with_nan)), ('{stem}', NON_FINITE),
     ('{stem}', NON_FINITE)),
    ('weights-garbage-resealed', resealed('.safetensors', lambda b: GARBAGE), ('{stem}.safetensors', 'safetensors'),
     ('{stem}.safetensors', 'safetensors')),
    ('weights-renamed-resealed', resealed('.safetensors', tensors_edit(lambda ts: {'x' + k: v for k, v in ts.items()})),
     ('{stem}', 'weights'), ('{stem}', 'weights')),
    ('train-state-empty-resealed', resealed('.train.safetensors', lambda b: save_tensors({})), None,
     ('{stem}.train.safetensors',)),
    ('sidecar-not-json', file_edit('.json', lambda b: b'{"epoch": 2, "files": '), ('{stem}.json', 'sidecar'),
     ('{stem}.json', 'sidecar')),
    ('sidecar-empty', file_edit('.json', lambda b: b''), ('{stem}.json', 'sidecar'), ('{stem}.json', 'sidecar')),
    ('sidecar-binary', file_edit('.json', lambda b: GARBAGE), ('{stem}.json', 'sidecar'), ('{stem}.json', 'sidecar')),
    ('sidecar-a-list', file_edit('.json', lambda b: b'[1, 2]'), ('{stem}.json', 'sidecar'), ('{stem}.json', 'sidecar')),
    ('sidecar-a-string', file_edit('.json', lambda b: b'"tft_best"'), ('{stem}.json', 'sidecar'),
     ('{stem}.json', 'sidecar')),
    ('sidecar-no-files', side_edit(setter('files', DEL)), ('{stem}.json', 'files'), ('{stem}.json', 'files')),
    ('files-a-list', side_edit(setter('files', [])), ('{stem}.json', 'files'), ('{stem}.json', 'files')),
    ('files-no-weights', side_edit(setter('files.weights', DEL)), ('{stem}.json', 'weights'),
     ('{stem}.json', 'weights')),
    ('files-entry-a-string', side_edit(setter('files.weights', 'tft_best.safetensors')), ('{stem}.json', 'weights'),
     ('{stem}.json', 'weights')),
    ('files-entry-no-digest', side_edit(setter('files.weights.sha256', DEL)), ('{stem}.json', 'weights'),
     ('{stem}.json', 'weights')),
    ('files-size-wrong', side_edit(lambda s: s['files']['weights'].update(size=s['files']['weights']['size'] + 1)),
     ('{stem}.safetensors', 'sidecar'), ('{stem}.safetensors', 'sidecar')),
    ('files-name-up-and-out', side_edit(setter('files.weights.name', '../../etc/passwd')), ('{stem}.json', 'files'),
     ('{stem}.json', 'files')),
    ('files-name-in-subfolder', side_edit(setter('files.weights.name', 'sub/x.safetensors')), ('{stem}.json', 'files'),
     ('{stem}.json', 'files')),
    ('files-name-absolute', side_edit(setter('files.weights.name', '/etc/passwd')), ('{stem}.json', 'files'),
     ('{stem}.json', 'files')),
    ('files-name-empty', side_edit(setter('files.weights.name', '')), ('{stem}.json', 'files'),
     ('{stem}.json', 'files')),
    ('model-config-hidden-size', side_edit(setter('model_config.hidden_size', 16)), ('{stem}', 'model_config'),
     ('{stem}', '--hidden-size')),
    ('model-config-quantiles', side_edit(quantiles4), ('{stem}', 'model_config'), ('{stem}', '--quantiles')),
    ('model-config-quantiles-decreasing', side_edit(setter('model_config.quantiles', [0.9, 0.5, 0.1])),
     ('{stem}', 'quantiles'), ('{stem}', '--quantiles')),
    ('model-config-field-removed', side_edit(setter('model_config.hidden_size', DEL)), ('{stem}', 'model_config'),
     ('{stem}', 'hidden')),
    ('model-config-wrong-type', side_edit(setter('model_config.hidden_size', '8')), ('{stem}', 'model_config'),
     ('{stem}', 'hidden')),
    ('model-config-a-list', side_edit(setter('model_config', [])), ('{stem}', 'model_config'),
     ('{stem}', 'model_config')),
    ('model-config-removed', side_edit(setter('model_config', DEL)), ('{stem}', 'model_config'),
     ('{stem}', 'model_config')),
    ('data-removed', side_edit(setter('data', DEL)), ('{stem}', 'data'), ('{stem}', 'data')),
    ('scaler-removed', side_edit(setter('data.scaler', DEL)), ('{stem}', 'data'), ('{stem}', 'scal')),
    ('scaler-shifted', side_edit(scaler_shift), None, ('{stem}', 'scaling')),
    ('scaler-method-unknown', side_edit(setter('data.scaler.method', 'robust')), ('{stem}', 'data'),
     ('{stem}', 'robust')),
    ('spec-symbols-removed', side_edit(setter('data.spec.symbols', DEL)), ('{stem}', 'data'), None),
    ('bar-seconds-text', side_edit(setter('data.bar_seconds', 'daily')), ('{stem}', 'bar_seconds'), None),
    ('epoch-text', side_edit(setter('epoch', 'two')), None, ('{stem}', 'epoch')),
    ('sidecar-edited', file_edit('.json', lambda b: b.replace(b'"run_id": "', b'"run_id": "x')),
     ('{stem}.json', 'changed after it was written'), ('{stem}.json', 'changed after it was written')),
    ('epoch-negative', side_edit(setter('epoch', -5)), None, ('{stem}', 'epoch -5', 'no run writes')),
    ('epoch-huge', side_edit(setter('epoch', 10**30)), None, ('{stem}', 'epoch 1' + '0' * 30, 'no run writes')),
    ('global-step-huge', side_edit(setter('global_step', 2**70)), None, ('{stem}', f'global_step {2**70}',)),
    ('history-short', side_edit(setter('history', [])), None, ('{stem}', 'a history of 0 epoch(s)')),
    ('best-epoch-after-last', side_edit(setter('early_stopping.best_epoch', 9)), None, ('{stem}', 'best_epoch 9')),
    ('optimizer-removed', side_edit(setter('optimizer', DEL)), None, ('{stem}', 'optimizer')),
    ('optimizer-groups-empty', side_edit(setter('optimizer.param_groups', [])), None, ('{stem}', 'optimizer')),
    ('rng-removed', side_edit(setter('rng', DEL)), None, ('{stem}', 'rng')),
    ('rng-python-text', side_edit(setter('rng.python', 'x')), None, ('{stem}', 'rng')),
    ('history-not-a-list', side_edit(setter('history', {})), None, ('{stem}', 'history')),
    ('early-stopping-empty', side_edit(setter('early_stopping', {})), None, ('{stem}', 'early_stopping')),
]

ANOTHER_RUN = ('another run', 'other run', 'different run', 'run id')
# (id, program, argv, expected parts, setup): checkpoints given wrongly, and resumes that do not continue the run
RESUMES = [
    ('resume-from-best', 'train', '--resume run/tft_best --checkpoint-dir run', ('tft_best', 'weights only'), 'run'),
    ('resume-other-horizon', 'train', '--resume run/tft_last --checkpoint-dir run --horizon 4',
     ('tft_last', '--horizon'), 'run'),
    ('resume-other-learning-rate', 'train', '--resume last --checkpoint-dir run --learning-rate 0.01',
     ('tft_last', '--learning-rate'), 'run'),
    ('resume-other-seed', 'train', '--resume last --checkpoint-dir run --seed 7', ('tft_last', '--seed'), 'run'),
    ('resume-other-hidden-size', 'train', '--resume last --checkpoint-dir run --hidden-size 16',
     ('tft_last', '--hidden-size'), 'run'),
    ('resume-other-bars', 'train', '--resume last --checkpoint-dir run --data other.csv', ('tft_last', 'bars'),
     'run+otherbars'),
    ('resume-last-empty-folder', 'train', '--resume last --checkpoint-dir empty', ('--resume last', 'tft_last'),
     'emptydir'),
    ('resume-last-no-folder', 'train', '--resume last --checkpoint-dir fresh', ('--resume last', 'tft_last'), ''),
    ('resume-last-without-tft-last', 'train', '--resume last --checkpoint-dir run', ('--resume last', 'tft_last'),
     'run+nolast'),
    ('resume-a-folder', 'train', '--resume run --checkpoint-dir run', ('run', 'folder'), 'run'),
    ('resume-a-data-file', 'train', '--resume bars.csv --checkpoint-dir run', ('bars.csv', 'not a checkpoint'), 'run'),
    ('resume-missing', 'train', '--resume nope/tft_last --checkpoint-dir run', ('nope/tft_last', 'not found'), 'run'),
    ('resume-into-another-run', 'train', '--resume run/tft_last --checkpoint-dir old', ('old', 'already holds'),
     'run+oldrun'),
    ('resume-best-of-another-run', 'train', '--resume last --checkpoint-dir run', ('tft_best', ANOTHER_RUN),
     'run+foreignbest'),
    ('checkpoint-a-run-folder', 'predict', '--checkpoint run', ('run', 'folder'), 'run'),
    ('checkpoint-sidecar-a-folder', 'predict', '--checkpoint ck/tft_best', ('tft_best.json', 'sidecar'),
     'sidecardir'),
    ('checkpoint-metrics-file', 'predict', '--checkpoint run/metrics.csv', ('metrics.csv', 'not a checkpoint'), 'run'),
]


# %% case folders
def _copy_run(src: Path, dst: Path, *names):
    dst.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        if not names or f.name in names: shutil.copy2(f, dst / f.name)

SETUPS = {   # name -> (case folder, runs) -> None; runs: the fixture's bars and run folders (NS(bars=, run=, other=))
    'ck': lambda d, r: _copy_run(r.run, d / 'ck', 'tft_best.safetensors', 'tft_best.json'),
    'run': lambda d, r: _copy_run(r.run, d / 'run'),
    'datadir': lambda d, r: (d / 'data').mkdir() or shutil.copy2(d / 'bars.csv', d / 'data' / 'bars.csv'),
    'oldrun': lambda d, r: (d / 'old').mkdir() or (d / 'old' / 'metrics.csv').write_text('epoch\n1\n'),
    'emptydir': lambda d, r: (d / 'empty').mkdir(),
    'otherbars': lambda d, r: load_sample().query("symbol == 'sp500'").iloc[-420:-20].assign(symbol='sp500').to_csv(
        d / 'other.csv', index=False),
    'nolast': lambda d, r: [f.unlink() for f in (d / 'run').glob('tft_last.*')],
    'foreignbest': lambda d, r: [shutil.copy2(f, d / 'run' / f.name) for f in r.other.glob('tft_best.*')],
    'sidecardir': lambda d, r: (_copy_run(r.run, d / 'ck', 'tft_best.safetensors'),
                                (d / 'ck' / 'tft_best.json').mkdir()),
}

# the data's own inputs (issue 30): (id, writer of cov.csv, flags after the train flags, expected parts)
OWN = [
    ('observed-text', csv(lambda df: df.assign(vix=np.where(df.index == 50, 'high', '1.5'))), '--observed r,vix',
     ("cov.csv", "column 'vix'", 'non-numeric', "'high'")),
    ('observed-missing-value', csv(lambda df: df.assign(vix=np.where(df.index == 50, np.nan, 1.5))), '--observed r,vix',
     ("cov.csv", "column 'vix'", 'missing value')),
    ('known-infinite', csv(lambda df: df.assign(ev=np.where(df.index == 50, np.inf, 0.0))), '--known dow,ev',
     ("column 'ev'", 'infinite')),
    ('static-varies', csv(lambda df: df.assign(sector=np.where(df.index % 2, 'a', 'b'))), '--static sector',
     ("static column 'sector'", 'one value per symbol')),
    ('static-missing', csv(lambda df: df.assign(sector=np.where(df.index == 50, None, 'a'))), '--static sector',
     ("static column 'sector'", 'no value')),
    ('observed-not-in-file', good_csv, '--observed r,vix', ('--observed', 'vix', 'column of the data')),
    ('observed-bar-column', good_csv, '--observed r,volume', ('--observed', "'volume'", 'rename')),
    ('static-also-observed', csv(lambda df: df.assign(vix=1.0)), '--observed r,vix --static vix', ('--static',)),
]

def _cases() -> list[tuple[Case, object]]:
    "Every case, with a function that writes its folder's own inputs (None: the setups alone)."
    out = []
    for cid, flags, expect, *setup in TRAIN_FLAGS:
        out.append((Case(f'train-flag-{cid}', 'tft_train', shlex.split(f'{TRAIN} {flags}'), expect, *setup or ['']),
                    None))
    for cid, flags, expect, *setup in PREDICT_FLAGS:
        setup = '+'.join(['ck', *setup])
        out.append((Case(f'predict-flag-{cid}', 'tft_predict', shlex.split(f'{PREDICT} {flags}'), expect, setup),
                    None))
    for cid, name, writer, expect, progs in DATA:
        write = (lambda w, n: lambda d: w(d / n))(writer, name)
        if 't' in progs:
            out.append((Case(f'train-data-{cid}', 'tft_train', ['--data', name, *shlex.split(TINY), '--epochs', '1'],
                             (name, *expect), ''), write))
        if 'p' in progs:
            out.append((Case(f'predict-data-{cid}', 'tft_predict', ['--checkpoint', 'ck/tft_best', '--data', name],
                             (name, *expect), 'ck'), write))
    for cid, writer, flags, expect in OWN:
        write = (lambda w: lambda d: w(d / 'cov.csv'))(writer)
        out.append((Case(f'train-own-{cid}', 'tft_train', ['--data', 'cov.csv', *shlex.split(TINY), '--epochs', '1',
                                                            *shlex.split(flags)], expect, ''), write))
    for cid, damage, on_predict, on_train in CHECKPOINTS:
        for prog, expect, stem, argv in (
                ('predict', on_predict, 'tft_best', '--checkpoint run/tft_best --data bars.csv'),
                ('train', on_train, 'tft_last', f'{RESUME} --resume run/tft_last --checkpoint-dir run')):
            if expect is None: continue
            expect = tuple(e.format(stem=stem) if isinstance(e, str) else e for e in expect)
            out.append((Case(f'{prog}-checkpoint-{cid}', f'tft_{prog}', shlex.split(argv), expect, 'run'),
                        (lambda f, s: lambda d: f(d / 'run', s))(damage, stem)))
    for cid, prog, flags, expect, setup in RESUMES:
        base = RESUME if prog == 'train' else '--data bars.csv'
        out.append((Case(f'{prog}-{cid}', f'tft_{prog}', shlex.split(f'{base} {flags}'), expect, setup), None))
    return out

CASES = _cases()
BY_ID = {c.id: (c, w) for c, w in CASES}
assert len(BY_ID) == len(CASES), 'case ids repeat'


def build(case: Case, write, d: Path, runs):
    "Write the folder of `case` at `d`: bars.csv, its setups, then its own inputs."
    d.mkdir(parents=True)
    shutil.copyfile(runs.bars, d / 'bars.csv')
    for name in filter(None, case.setup.split('+')): SETUPS[name](d, runs)
    if write: write(d)

def tree(d: Path) -> dict:
    "Every entry under `d`: kind, and for a file its size, modification time and digest (FIFOs and links not opened)."
    out = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = Path(root) / name
            st = p.lstat()
            rel = str(p.relative_to(d))
            if stat.S_ISLNK(st.st_mode): out[rel] = ('link', os.readlink(p))
            elif stat.S_ISDIR(st.st_mode): out[rel] = ('folder',)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ('file', st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            else: out[rel] = ('other', stat.S_IFMT(st.st_mode), st.st_mtime_ns)
    return out

# a run that outlasts its time limit (a second): the fork server kills it and says so, and goes on
PROBE = dict(id='probe-killed', program='tft_train', limit_s=1.0,
             argv=shlex.split(f'--data bars.csv {TINY} --epochs 100000 --no-compile --checkpoint-dir ck'))

def run_corpus(cases: list[tuple[Case, Path]], work: Path, runs) -> dict:
    "Results of PROBE and `cases` (case, folder) run by the fork server: id -> status, signal, timed_out, stdout, ..."
    build(Case('probe', '', [], (), ''), None, work / 'probe', runs)
    spec = dict(jobs=2, limit_s=procs.limit(60),
                cases=[dict(PROBE, cwd=str(work / 'probe'))] +
                      [dict(id=c.id, program=c.program, argv=c.argv, cwd=str(d)) for c, d in cases])
    (work / 'cases.json').write_text(json.dumps(spec))
    r = procs.run([sys.executable, RUNNER, work / 'cases.json', work / 'results.json'])
    assert r.returncode == 0, f'the fork server failed:\n{r.stderr[-3000:]}'
    return json.loads((work / 'results.json').read_text())


@pytest.fixture(scope='session')
def runs(tmp_path_factory):
    """The fixture's tiny run (two epochs, a checkpoint each), another like it (its own seed, one epoch) for the case
    that mixes runs, and their bars."""
    from tft_nb.cli import tft_train
    root = tmp_path_factory.mktemp('runs')
    out = NS(bars=root / 'bars.csv', run=root / 'run', other=root / 'other')
    good().to_csv(out.bars, index=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                # two threads on two busy cores: several times slower
    try:
        tft_train(data=str(out.bars), checkpoint_dir=str(out.run), **RUN)
        tft_train(data=str(out.bars), checkpoint_dir=str(out.other), **{**RUN, 'seed': 7, 'epochs': 1})
    finally: torch.set_num_threads(threads)
    best = json.loads((out.run / 'tft_best.json').read_text())['epoch']
    side = json.loads((out.other / 'tft_best.json').read_text())
    if side['epoch'] != best:
        (out.other / 'tft_best.json').write_text(json.dumps(sealed(dict(side, epoch=best)), indent=1))
    return out

@pytest.fixture(scope='session')
def corpus(runs, tmp_path_factory):
    "Every case built, its folder's tree taken, run by the fork server, and the tree taken again."
    root = tmp_path_factory.mktemp('corpus')
    folders = {}
    for c, write in CASES:
        build(c, write, folders.setdefault(c.id, root / c.id), runs)
    before = {cid: tree(d) for cid, d in folders.items()}
    results = run_corpus([(c, folders[c.id]) for c, _ in CASES], root, runs)
    out = {cid: (results.get(cid), before[cid], tree(d)) for cid, d in folders.items()}
    out[PROBE['id']] = results.get(PROBE['id']), None, None
    return out


def problems(case: Case, r: dict | None, before: dict, after: dict) -> list[str]:
    "What `case`'s result breaks of the contract (empty: nothing)."
    if r is None: return ['no result from the fork server']
    out, prog = [], case.program
    if r['signal'] is not None:
        out.append(f"killed by signal {r['signal']}" + (' at the time limit' if r['timed_out'] else ''))
    elif r['status'] != 2: out.append(f"exit status {r['status']}, expected 2")
    lines = r['stderr'].splitlines()
    if len(lines) != 1: out.append(f'{len(lines)} lines on stderr, expected 1')
    line = next((x for x in lines if x.startswith(f'{prog}: error:')), None)
    if line is None: out.append(f"no line starting '{prog}: error:'")
    else:
        msg = line[len(f'{prog}: error:'):].lower()
        for part in case.expect:
            alts = (part,) if isinstance(part, str) else part
            if not any(a.lower() in msg for a in alts): out.append(f'the line lacks {" / ".join(map(repr, alts))}')
    if before != after:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        out.append(f'the folder changed: {", ".join(changed[:8])}')
    return out

@pytest.mark.parametrize('cid', list(BY_ID))
def test_bad_input(corpus, cid):
    case = BY_ID[cid][0]
    r, before, after = corpus[cid]
    if bad := problems(case, r, before, after):
        lines = (r or {}).get('stderr', '').splitlines()
        shown = lines if len(lines) <= 8 else [*lines[:3], f'... ({len(lines) - 6} lines)', *lines[-3:]]
        pytest.fail(f"{case.program} {shlex.join(case.argv)}\n" + '\n'.join(bad) + '\nstderr:\n' +
                    '\n'.join(x[:500] for x in shown), pytrace=False)

def test_fork_server_kills_overdue_runs(corpus):
    "A run still going at its time limit is killed and reported so (signal 9, timed out); the cases after it ran."
    r = corpus[PROBE['id']][0]
    assert r and (r['status'], r['signal'], r['timed_out']) == (None, 9, True), r
    assert all(corpus[cid][0] for cid in BY_ID)

def test_corpus_size():
    "At least 150 cases, over flags, data files and checkpoints, for both commands."
    kinds = {(c.program, c.id.split('-')[1]) for c, _ in CASES}
    assert len(CASES) >= 150 and len(kinds) >= 6, (len(CASES), kinds)

FAITHFUL = ['train-flag-fp32-with-bf16', 'predict-data-csv-high-below-low', 'train-checkpoint-weights-flipped']

def test_fork_server_is_faithful(corpus, runs, tmp_path):
    """Three cases run as the console scripts themselves (at once), in folders built anew: the same status, stdout and
    stderr as in the fork server."""
    with ExitStack() as stack:
        started = {}
        for cid in FAITHFUL:
            case, write = BY_ID[cid]
            build(case, write, tmp_path / cid, runs)
            started[cid] = stack.enter_context(procs.started([case.program, *case.argv], cwd=tmp_path / cid,
                                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for cid, p in started.items():
            out, err = procs.communicate(p)
            forked = corpus[cid][0]
            assert (p.returncode, out, err) == (forked['status'], forked['stdout'], forked['stderr']), cid
