"""This working tree's training step and inference against another commit's, side by side in one process.

The other commit's package is unpacked (`git archive`) into a temporary folder and imported as `tft_nb_base` (every
`tft_nb` in its source renamed, its custom operators included), beside this tree's `tft_nb`. Both build the model of
the given sizes with the same weights, train on the same batches of the benchmark task's windows (`speed_bench`'s
set-up: dropout 0.1, gradient clipping 1.0, fused Adam, `keep_freed_memory`), eager or compiled as `fit` compiles,
in float32 or under bfloat16 autocast. Blocks of `--block` training steps alternate between the two (the order
reversed every round) for `--rounds` rounds, then inference passes over the test windows (batch 256) alternate the
same way, so that the host's changes of speed hit both alike. Prints the largest difference of their forecasts
at the same weights, each side's median time and, per round, the
ratio this tree / base with its median and min-max (below 1: this tree is faster).
Run: `python bench/versus.py --base REV [--compile] [--bf16] [--hidden 32 --heads 4 --lstm 1 --batch 64]
[--rounds 10] [--block 10]`"""
from __future__ import annotations
import argparse, importlib, statistics, subprocess, sys, tempfile, time
from pathlib import Path
import torch

ROOT = Path(__file__).resolve().parents[1]


def base_package(rev: str, folder: Path) -> str:
    "Unpack `rev`'s package into `folder` as `tft_nb_base`; its name."
    tar = subprocess.run(['git', '-C', str(ROOT), 'archive', rev, 'tft_nb'], capture_output=True, check=True).stdout
    subprocess.run(['tar', '-x', '-C', str(folder)], input=tar, check=True)
    (folder / 'tft_nb').rename(folder / 'tft_nb_base')
    for f in (folder / 'tft_nb_base').glob('*.py'): f.write_text(f.read_text().replace('tft_nb', 'tft_nb_base'))
    sys.path.insert(0, str(folder))
    return 'tft_nb_base'


def side(pkg: str, a: argparse.Namespace, data, weights: dict | None):
    "`pkg`'s model of `a`'s sizes (with `weights` when given), its optimizer, train_step and predict; compile seconds."
    m, t, f, e = (importlib.import_module(f'{pkg}.{n}') for n in ('model', 'train', 'fit', 'evaluate'))
    torch.manual_seed(42)
    model = m.TemporalFusionTransformer(m.TFTConfig(**data.spec.model_sizes(), hidden_size=a.hidden,
                                                    attention_heads=a.heads, lstm_layers=a.lstm, dropout=0.1))
    if weights is not None: model.load_state_dict(weights)
    state = t.TrainingState.begin(model, t.TrainConfig(batch_size=a.batch, grad_clip=1.0, device='cpu'))
    seconds = f.warm_up(model.compile(), data.train, a.batch, a.bf16) if a.compile else 0.0
    return model, state.opt, t.train_step, e.predict, seconds


def alternate(runs: dict, work, rounds: int) -> dict:
    "Seconds of `work(name, run)` for each run, alternating, the order reversed every round."
    names, times = list(runs), {n: [] for n in runs}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            work(n, runs[n])
            times[n].append(time.perf_counter() - t0)
    return times


def report(what: str, times: dict, per: int):
    "Each side's median time per unit and the per-round ratio tree / base, median and min-max."
    tree, base = times['tree'], times['base']
    ratios = [x / y for x, y in zip(tree, base)]
    print(f"{what}: tree {statistics.median(tree) / per * 1e3:.2f} ms, base {statistics.median(base) / per * 1e3:.2f}"
          f" ms (medians); tree / base median {statistics.median(ratios):.3f}, "
          f"min-max {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} rounds", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--base', required=True, help="the commit to compare against")
    p.add_argument('--compile', action='store_true')
    p.add_argument('--bf16', action='store_true', help="bfloat16 autocast, as TrainConfig.cpu_bf16")
    p.add_argument('--hidden', type=int, default=32)
    p.add_argument('--heads', type=int, default=4)
    p.add_argument('--lstm', type=int, default=1)
    p.add_argument('--batch', type=int, default=64)
    p.add_argument('--rounds', type=int, default=10)
    p.add_argument('--block', type=int, default=10)
    p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    from tft_nb.data import load_sample
    from tft_nb.windows import PRESETS, make_windows
    from tft_nb.device import keep_freed_memory
    keep_freed_memory()
    data = make_windows(load_sample(), PRESETS['ohlcv_gk_logvol_tft_v1'])
    with tempfile.TemporaryDirectory() as d:
        base = base_package(a.base, Path(d))
        runs = {'tree': side('tft_nb', a, data, None)}
        runs['base'] = side(base, a, data, runs['tree'][0].state_dict())
    print(f"versus: this tree against {a.base}; hidden {a.hidden}, heads {a.heads}, lstm {a.lstm}, batch {a.batch}, "
          f"{'compiled' if a.compile else 'eager'}, {'bf16' if a.bf16 else 'float32'}, {a.threads} threads; "
          f"compile s: tree {runs['tree'][4]:.1f}, base {runs['base'][4]:.1f}", flush=True)
    with torch.inference_mode():                                         # same weights: the same forecasts
        q = [runs[n][0].eval()(data.test.batch(torch.arange(64))).quantiles for n in runs]
    for run in runs.values(): run[0].train()
    print(f"max |forecast difference| of the two at the same weights: {(q[0] - q[1]).abs().max():.2e}")
    gen = torch.Generator().manual_seed(0)
    batches = list(data.train.batches(a.batch, shuffle=True, generator=gen, drop_last=True))
    step = {n: 0 for n in runs}
    def train(n, run):
        model, opt, train_step = run[:3]
        for _ in range(a.block):
            train_step(model, opt, [batches[step[n] % len(batches)]], 1.0, a.bf16)
            step[n] += 1
    alternate(runs, train, 2)                                            # warm-up, untimed
    report(f"training step (batch {a.batch})", alternate(runs, train, a.rounds), a.block)
    def infer(n, run): run[3](run[0], data.test, batch_size=256, autocast=a.bf16)
    alternate(runs, infer, 2)
    report(f"inference over the {len(data.test)} test windows", alternate(runs, infer, a.rounds), 1)


if __name__ == '__main__': main()
