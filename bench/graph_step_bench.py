"""The whole training step captured as one CUDA graph, against the steps `fit` runs on CUDA (issue 49, item 2).

Variants, each in a fresh process, interleaved over `--rounds` rounds, at the sizes given (by default the original
configuration, hidden 256, 8 heads, 2 LSTM layers, batch 32, dropout 0.1) on the benchmark task's windows:

- `eager`: `train_step` (10_train) on the eager model, the fused Adam of `make_optimizer`;
- `graphs`: `train_step` with the model's two stages compiled and replayed as CUDA graphs, what `fit` runs on CUDA
  (`compile_stages(model, cudagraphs=True)`, 24_accelerate); the LSTMs, the loss, the norm and Adam run between them;
- `whole`: `train_step` itself on the eager model (forward, pinball loss, backward, gradient norm, clipping at 1.0,
  `make_optimizer`'s fused Adam made `capturable`) captured once with `torch.cuda.graph` after three warm-up steps on
  a side stream, as PyTorch's CUDA graphs notes capture a whole network; each batch is copied into the graph's input
  tensors and the graph replayed;
- `whole-compiled`: the same over the two stages compiled without CUDA graphs of their own.

All train under bfloat16 autocast, as `fit` trains on CUDA (`--fp32`: without). A run prints its training samples/s
over `--steps` steps after `--warm` untimed ones (in which the compiled variants compile), its set-up seconds (the
capture, with the warm-up steps before it, which compile `whole-compiled`) and the peak GPU memory; in the first round
also, from the same weights and optimizer state, on the same batches and with dropout 0, the largest difference
between its weights after `--check` steps and the eager ones (`max_dw`; the captured Adam is `capturable`, whose
arithmetic differs from the other in the last bits; Adam's first steps move each weight by about the learning rate,
1e-3, whatever its gradient's size, so a gradient near 0 whose sign the two paths' rounding flips leaves up to 2e-3 a
step between them). A variant that fails (a capture refused) prints its error and the others go on. The driver prints
each run, then per variant the median and min-max, and the ratio to `eager` within each round.
On the CPU (`--device cpu`, to check the script) nothing is captured: `whole` calls its step function directly.
Run: `python bench/graph_step_bench.py [--rounds 3] [--steps 100] [--variants eager,graphs,whole,whole-compiled]
[--hidden 256 --heads 8 --lstm 2 --batch 32] [--fp32] [--device cuda]`"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, time
from pathlib import Path

import torch

from tft_nb.accelerate import compile_stages, keep_freed_memory
from tft_nb.train import train_step
from tft_nb.windows import Batch
from peer_bench import spread                       # bench/ is on sys.path when a script there runs
from step_bench import ORIGINAL, build, synchronizer, task_windows, train_batches

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {'eager': (False, False), 'graphs': (True, False), 'whole': (False, True),   # (compiled, captured)
            'whole-compiled': (True, True)}

def prepared(a: argparse.Namespace, data, variant: str, dropout: float):
    "The model, optimizer and step function (of a batch) of `variant`; compiled graphs are made by the first steps."
    compiled, captured = VARIANTS[variant]
    model, state, _ = build(a, data, dropout=dropout)                   # `make_optimizer`'s fused Adam
    device, bf16 = torch.device(a.device), not a.fp32
    if compiled: compile_stages(model, cudagraphs=device.type == 'cuda' and not captured)
    if not captured: return model, state.opt, lambda b: train_step(model, state.opt, [b], 1.0, bf16)
    for g in state.opt.param_groups: g['capturable'] = device.type == 'cuda'   # before its state is made
    first = data.train.batch(torch.arange(a.batch, device=device))
    return model, state.opt, whole_step(lambda b: train_step(model, state.opt, [b], 1.0, bf16), first)

def whole_step(train, first: Batch):
    "`train` (a function of a batch) over batches of `first`'s shapes, captured once as a CUDA graph (not on the CPU)."
    if first.target.device.type != 'cuda': return train
    static = Batch(*(t.clone() for t in first))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                  # warm-up: lazy state (Adam's, cuDNN's) made outside the capture
        for _ in range(3): train(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph): out = train(static)   # its `zero_grad` first: .grad is made in the graph's pool
    def step(b: Batch):
        for s, t in zip(static, b): s.copy_(t, non_blocking=True)
        graph.replay()
        return out
    return step

def one(a: argparse.Namespace) -> dict:
    "One variant's run: training samples/s, set-up seconds, peak GPU MiB, and its weights' distance from eager's."
    if a.device == 'cpu': keep_freed_memory()
    device = torch.device(a.device)
    sync = synchronizer(device)
    data = task_windows(a.device)
    batches = train_batches(data, a.batch, a.warm + a.steps)
    t0 = time.perf_counter()
    _, _, step = prepared(a, data, a.one, 0.1)
    sync()
    setup = time.perf_counter() - t0
    for b in batches[:a.warm]: step(b)
    sync()
    t0 = time.perf_counter()
    for b in batches[a.warm:]: step(b)
    sync()
    train = a.steps * a.batch / (time.perf_counter() - t0)
    gpu = torch.cuda.max_memory_allocated() / 2 ** 20 if device.type == 'cuda' else 0.0
    out = dict(train=train, setup_s=setup, gpu=gpu)
    return out | (dict(max_dw=distance(a, data, batches[:a.check])) if a.check else {})

def distance(a: argparse.Namespace, data, batches: list) -> float:
    "The largest difference of the weights of `a.one` and of eager after `batches`, from one start, dropout 0."
    weights = []
    for variant in (a.one, 'eager'):
        model, opt, step = prepared(a, data, variant, 0.0)
        if VARIANTS[variant][1]:                   # undo the capture's warm-up steps in place (the graph's memory)
            with torch.no_grad():
                for p, p0 in zip(model.parameters(), build(a, data, dropout=0.0)[0].parameters()): p.copy_(p0)
                for t in (t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)): t.zero_()
        for b in batches: step(b)
        weights.append({k: v.float() for k, v in model.state_dict().items()})
    return max(float((weights[0][k] - weights[1][k]).abs().max()) for k in weights[1])

def driver(a: argparse.Namespace):
    "Interleaved rounds of the variants, each in a fresh process: each run, then medians and ratios to `eager`."
    variants = a.variants.split(',')
    print(f"graph_step_bench: hidden {a.hidden}, heads {a.heads}, lstm {a.lstm}, batch {a.batch}, {a.steps} steps, "
          f"{'float32' if a.fp32 else 'bf16 autocast'}, {a.rounds} round(s) of {', '.join(variants)} on {a.device}",
          flush=True)
    rows = []
    for i in range(a.rounds):
        row = {}
        for v in variants:
            flags = sum(([f'--{k}', str(getattr(a, k))] for k in ('hidden', 'heads', 'lstm', 'batch', 'steps', 'warm',
                                                                  'device')), []) + ['--check', str(a.check * (i == 0))]
            cmd = [sys.executable, __file__, '--one', v, *flags, *(['--fp32'] if a.fp32 else [])]
            env = {**os.environ, 'PYTHONPATH': f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode:
                print(f"round {i + 1} {v:15s} failed:\n{r.stderr[-2000:]}", flush=True)
                continue
            row[v] = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"round {i + 1} {v:15s} " + ', '.join(f"{k} {x:.4g}" for k, x in row[v].items()), flush=True)
        rows.append(row)
    for v in variants:
        runs = [r for r in rows if v in r]
        for k in [k for k in ('train', 'setup_s', 'gpu', 'max_dw') if runs and k in runs[0][v]]:
            ratio = [r[v][k] / r['eager'][k] for r in runs if 'eager' in r] if k == 'train' else []
            per_eager = f"; / eager {spread(ratio)}" if ratio else ''
            print(f"{v:15s} {k:8s} {spread([r[v][k] for r in runs if k in r[v]])}{per_eager}")

def main():
    "Parse the flags; run the driver, or one variant (`--one`)."
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--one', choices=VARIANTS)
    p.add_argument('--variants', default=','.join(VARIANTS))
    for name, default in dict(rounds=3, **ORIGINAL, steps=100, warm=5, check=5).items():
        p.add_argument(f'--{name}', type=int, default=default)
    p.add_argument('--fp32', action='store_true', help="train in float32 (default: bfloat16 autocast, as fit on CUDA)")
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu', choices=('cpu', 'cuda'))
    a = p.parse_args()
    if a.one is None: return driver(a)
    print(json.dumps(one(a)))

if __name__ == '__main__': main()
