"""tft_nb against pytorch-forecasting on the shared peer task (`bench/TASK.md`), runs interleaved, ratios with spread.

The task and its scoring come from the peer harness itself: `run_peer.py` beside this project
(`../shared/bench/peer/`) is imported for `score`, `window_origins`, `targets_for`, `build_panel`, `load_raw`,
`run_baselines`, the contention guard `Contention` and the reference workload `calibrate`; nothing of it is
copied. The tft_nb side (`--side tft`) builds the task's windows with `make_windows(load_sample(),
PRESETS['ohlcv_gk_logvol_tft_v1'])`, checks that its test targets equal the harness's, and measures what
TASK.md section 9 asks, the way `run_peer.py` does:

- a throughput run: a fresh model, `--throughput-epochs` epochs of `train_epoch` (batching included), no validation;
  training samples/s over epochs 2..N;
- an accuracy run (unless `--no-accuracy`): `fit` with early stopping on the validation loss (patience 5, threshold
  0, constant learning rate, gradient clipping 1.0), the best epoch's weights, the test set scored by `score`;
- inference: the test windows, batch 256 (which `infer` runs in passes of 45 windows at hidden 256, 08_evaluate),
  under `torch.inference_mode()`, one warm-up pass then the mean of 5;
- peak RSS (`ru_maxrss`) of the process, imports included: `rss` at the end of the run, `rss_train` after the
  throughput run (the peer's throughput-only run ends there; tft_nb's goes on to time inference).

Like `fit`, the tft_nb side hands the model to the acceleration layer (`accelerate`, 24_accelerate) before the first
epoch, with the settings of a 50-epoch run (the accuracy run's, and `tft_train`'s default): `--side tft` with neither
`--compile` nor `--bf16` measures the path a user gets by default, the layer choosing; `--compile`/`--no-compile` and
`--bf16`/`--no-bf16` say instead (the time `accelerate` took, a compile included, is in the JSON as `speed_s`, not in
the throughput; `compiled` and `bf16` say what it chose).

The driver (default) runs the sides of `--sides` in turn (peer first; `tft` is the default path, `tft-eager` adds
`--no-compile`, `tft-compile` `--compile`, `tft-bf16` `--bf16`, bfloat16 autocast on the CPU (training, the accuracy
run's `fit` through `TrainConfig.cpu_bf16`, and the inference timing; the scored test forecasts are float32, as
`tft_predict` makes them), `tft-f32` `--no-bf16`, and the names combine: `tft-bf16-compile`), `--pairs` rounds, each run
in a fresh process, and prints each run, then the median and min-max of each figure and of each side's ratio to the
peer within each round. It needs the peer's venv (`--peer-python`, made as `../shared/bench/peer/README.md` says).

Each side runs in a venv of its own requirements. The tft_nb side's Python (`--tft-python`, by default the one running
this script) should be a venv of what `pip install tft_nb` installs; the runs import this tree's package:
`python3 -m venv ../tft-venv && ../tft-venv/bin/pip install torch==2.13.0 && ../tft-venv/bin/pip install
torch==2.13.0 -e .`. The project's development venv also holds pyarrow (a development requirement, for the Parquet
tests), which pandas imports whenever it is installed; the peer's venv has none, so runs in the development venv count
that import against tft_nb alone (about 48 MiB of a compiled run's peak, bench/RESULTS.md 8.13).
Run: `python bench/peer_bench.py --peer-python PEER_VENV/bin/python --tft-python TFT_VENV/bin/python [--pairs 3]
[--no-accuracy] [--sides peer,tft,tft-compile] [--hidden 256 --heads 8 --lstm 2 --batch 32] [--throughput-epochs 10]
[--seed 42]`."""
from __future__ import annotations
import argparse, json, os, resource, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT.parent / 'shared' / 'bench' / 'peer'

def rss_mib() -> float:
    "Peak resident memory of this process, MiB."
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

def aligned(rp, data, pred):
    "The test targets and tft_nb's forecasts (original units), in the harness's window order; targets checked."
    import numpy as np
    from tft_nb.evaluate import original_units
    w = data.test
    panel = rp.build_panel(rp.load_raw())
    origins = rp.window_origins(panel, 'test')
    y = rp.stack_series(rp.targets_for(panel, origins))
    names = [data.spec.symbols[i] for i in w.series[w.rows].tolist()]
    at = {(n, int(t)): i for i, (n, t) in enumerate(zip(names, w.time_idx[w.rows].tolist()))}
    order = np.array([at[(s, int(o))] for s in rp.SERIES for o in origins[s]])
    ours = original_units(data, w, w.targets().cpu())[order]
    assert np.abs(ours - y).max() < 1e-6, 'tft_nb test targets differ from the harness'
    return y, original_units(data, w, pred)[order]

def tft_side(a: argparse.Namespace) -> dict:
    "The tft_nb run of the task: throughput, accuracy, inference, peak RSS."
    sys.path.insert(0, str(PEER))
    import run_peer as rp
    import torch
    torch.set_num_threads(a.threads)
    from tft_nb.data import load_sample
    from tft_nb.data_config import PRESETS
    from tft_nb.windows import make_windows
    from tft_nb.model import TFTConfig, TemporalFusionTransformer
    from tft_nb.run_state import TrainingState
    from tft_nb.train import TrainConfig
    from tft_nb.fit import train_epoch, fit
    from tft_nb.evaluate import predict
    from tft_nb.accelerate import accelerate
    data = make_windows(load_sample(), PRESETS['ohlcv_gk_logvol_tft_v1'])
    mcfg = TFTConfig(**data.spec.model_sizes(), hidden_size=a.hidden, attention_heads=a.heads, lstm_layers=a.lstm,
                     dropout=0.1)
    tcfg = dict(batch_size=a.batch, learning_rate=1e-3, lr_schedule='constant', grad_clip=1.0, seed=a.seed,
                device='cpu', compile=a.compile, cpu_bf16=a.bf16)   # None: the acceleration layer chooses
    res = dict(library='tft_nb', config=dict(hidden=a.hidden, heads=a.heads, lstm=a.lstm, batch=a.batch))
    res['calibration_before'] = rp.calibrate(torch)
    torch.manual_seed(a.seed)
    model = TemporalFusionTransformer(mcfg)
    cfg = TrainConfig(epochs=a.throughput_epochs, **tcfg)
    state = TrainingState.begin(model, cfg)
    t0 = time.perf_counter()                         # as `fit` does, choosing as the accuracy run's 50 epochs would
    settled = accelerate(model, data, TrainConfig(epochs=50, **tcfg), torch.device('cpu'), opt=state.opt)
    autocast = bool(settled.cpu_bf16)
    res['speed'] = dict(seconds=time.perf_counter() - t0, compiled=bool(settled.compile), autocast=autocast)
    times = []
    with rp.Contention() as cont:
        for _ in range(a.throughput_epochs):
            t0 = time.perf_counter()
            train_epoch(state, data.train, cfg, autocast, progress=False)
            state.epoch += 1
            times.append(time.perf_counter() - t0)
    warm = times[1:] or times
    res['throughput'] = dict(epoch_seconds=[round(t, 3) for t in times], n_params=sum(p.numel() for p in
                             model.parameters()), train_samples_per_s=len(data.train) * len(warm) / sum(warm),
                             contention=cont.result, peak_rss_mib_after_train=rss_mib())
    if not a.no_accuracy:
        torch.manual_seed(a.seed)
        model = TemporalFusionTransformer(mcfg)
        with tempfile.TemporaryDirectory() as d, rp.Contention() as cont:
            out = fit(model, data, TrainConfig(epochs=50, early_stopping_patience=5, early_stopping_threshold=0.0,
                                               checkpoint_dir=d, checkpoint_frequency=0, **tcfg),
                      progress=False)
        y, p = aligned(rp, data, predict(model, data.test))
        res['tft'] = dict(test=rp.score(y, p), epochs_run=len(out.history), best_epoch=out.best_epoch,
                          contention=cont.result)
    ts = []
    with rp.Contention() as cont, torch.inference_mode():
        for _ in range(6):
            t0 = time.perf_counter()
            predict(model, data.test, batch_size=256, autocast=autocast)
            ts.append(time.perf_counter() - t0)
    res['inference'] = dict(forward_samples_per_s=len(data.test) / statistics.mean(ts[1:]), contention=cont.result)
    res['peak_rss_mib'] = rss_mib()
    return res

def headline(r: dict) -> dict:
    "The figures compared: training and inference samples/s, peak RSS (end, after training), test q-risk, contention."
    t = r['throughput']
    out = dict(train=t['train_samples_per_s'], other_cpu=t['contention']['other_cpu_share'],
               rss=r['peak_rss_mib'], rss_train=t['peak_rss_mib_after_train'])
    if 'inference' in r: out['infer'] = r['inference']['forward_samples_per_s']
    if 'tft' in r: out.update(q50=r['tft']['test']['q_risk_p50'], q90=r['tft']['test']['q_risk_p90'])
    if 'speed' in r: out.update(speed_s=r['speed']['seconds'], compiled=float(r['speed']['compiled']),
                                bf16=float(r['speed']['autocast']))
    return out

def one_run(side: str, a: argparse.Namespace, out: Path) -> dict:
    "One side's run in a fresh process; its JSON."
    sizes = ['--hidden', a.hidden, '--heads', a.heads, '--lstm', a.lstm, '--batch', a.batch, '--throughput-epochs',
             a.throughput_epochs, '--seed', a.seed]
    extra = ['--no-accuracy'] if a.no_accuracy else []
    if side == 'peer': cmd = [a.peer_python, PEER / 'run_peer.py', '--out', out, *sizes, *extra]
    else:
        compiled = ['--compile'] * side.endswith('compile') + ['--no-compile'] * side.endswith('eager')
        bf16 = ['--bf16'] * ('bf16' in side) + ['--no-bf16'] * ('f32' in side)
        cmd = [a.tft_python, __file__, '--side', 'tft', '--out', out, *sizes, *extra, *compiled, *bf16]
    env = {**os.environ, 'PYTHONPATH': f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if r.returncode: raise SystemExit(f"{side} run failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(out.read_text())

def spread(xs: list[float]) -> str:
    "Median and min-max of `xs`."
    return f"median {statistics.median(xs):.3f}, min-max {min(xs):.3f}-{max(xs):.3f}"

def drive(a: argparse.Namespace):
    "Interleaved rounds (peer first), each figure and each ratio to the peer's with its median and min-max."
    sides = a.sides.split(',')
    print(f"peer_bench: {a.pairs} round(s) of {', '.join(sides)}; hidden {a.hidden}, heads {a.heads}, lstm {a.lstm}, "
          f"batch {a.batch}, {'throughput only' if a.no_accuracy else 'with accuracy runs'}; {os.cpu_count()} CPUs; "
          f"tft_nb in {a.tft_python}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(a.pairs):
            row = {}
            for side in sides:
                row[side] = headline(one_run(side, a, Path(d) / f'{side}{i}.json'))
                figures = ", ".join(f"{k} {v:.4g}" for k, v in row[side].items())
                print(f"round {i + 1} {side:11s} {figures}", flush=True)
            rows.append(row)
    for side in [s for s in sides if s != 'peer']:
        for k in rows[0][side]:
            line = f"{side:11s} {k:9s} {spread([r[side][k] for r in rows])}"
            if k != 'other_cpu' and k in rows[0].get('peer', {}):        # a throughput-only peer run: no inference
                line += (f"; peer {spread([r['peer'][k] for r in rows])}; "
                         f"/ peer {spread([r[side][k] / r['peer'][k] for r in rows])}")
            print(line)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--side', choices=('drive', 'tft'), default='drive')
    p.add_argument('--out', type=Path)
    p.add_argument('--peer-python', default=str(ROOT.parent / 'peer-venv' / 'bin' / 'python'))
    p.add_argument('--tft-python', default=sys.executable, help="the tft_nb side's Python (see above)")
    p.add_argument('--pairs', type=int, default=3)
    p.add_argument('--hidden', type=int, default=32)
    p.add_argument('--heads', type=int, default=4)
    p.add_argument('--lstm', type=int, default=1)
    p.add_argument('--batch', type=int, default=64)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--throughput-epochs', type=int, default=10)
    p.add_argument('--seed', type=int, default=42, help="both sides' seed (the harness's default)")
    p.add_argument('--no-accuracy', action='store_true')
    p.add_argument('--compile', action=argparse.BooleanOptionalAction, help="tft_nb: TrainConfig.compile (default: "
                   "None, the acceleration layer's choice)")
    p.add_argument('--bf16', action=argparse.BooleanOptionalAction, help="tft_nb: TrainConfig.cpu_bf16 (default: "
                   "None, the acceleration layer's choice)")
    p.add_argument('--sides', default='peer,tft', help="the runs of a round, in order: peer, tft (the default path: "
                   "the layer chooses), tft-eager, tft-compile, tft-bf16, tft-bf16-eager, tft-bf16-compile, tft-f32")
    a = p.parse_args()
    if a.side == 'drive': return drive(a)
    a.out.write_text(json.dumps(tft_side(a), indent=1))

if __name__ == '__main__': main()
