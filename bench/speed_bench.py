"""What each speed lever of issue 27 gives to a training step and to inference, each measured on its own.

Variants, each in a fresh process, interleaved over `--rounds` rounds (these machines are noisy):
- `eager`: the model as it runs without any lever (glibc's default allocator thresholds);
- `keep`: `keep_freed_memory()` (13_device), which `fit` calls for every CPU run;
- `compile`: `keep` plus `TemporalFusionTransformer.compile()` (06_model), warmed up by `fit.warm_up`;
- `bf16`: `keep` plus bfloat16 autocast (`train_step(..., autocast=True)`, `predict(..., autocast=True)`), which
  `fit` uses on CUDA, and on the CPU with `TrainConfig.cpu_bf16` (native on CPUs with AVX-512 BF16 or AMX);
- `compile-bf16`: both; `compile-free`: `compile` without `keep_freed_memory`;
- `graphs` and `graphs-bf16`: `compile(cudagraphs=True)`, the compiled stages replayed as CUDA graphs (what `fit`
  compiles on CUDA), without and with bf16;
- ablations, each a variant with one lever undone, its baseline: `bf16-lstm32` (`bf16` with the LSTMs kept in
  float32 under autocast, as before they followed it on the CPU, 06_model), `unfolded` and `bf16-unfolded` (`keep`
  and `bf16` with the real inputs embedded before their selection networks, not folded in, 04_selection),
  `uncapped` and `bf16-uncapped` (`keep` and `bf16` with inference passes of all 256 windows of a batch, the cap
  `INFER_ELEMENTS` of 08_evaluate lifted).
A process trains `--steps` steps of `train_step` on the benchmark task's windows (batch `--batch`, gradient clipping
1.0, fused Adam, dropout 0.1) after `--warm` untimed ones, then runs inference over the test windows (batch 256, one
untimed pass, then `--passes`; passes of fewer windows where `infer` caps them), on `--device` (CUDA timings end
with a synchronize). It prints training and inference samples/s, the compile time, and peak memory (RSS at the end
and after training, `rss_train`; on CUDA also the peak allocated on the GPU). The driver prints each run, then per
variant the median and min-max, and the ratio to `eager` within each round.
Run: `python bench/speed_bench.py [--hidden 32 --heads 4 --lstm 1 --batch 64] [--rounds 3]
[--variants eager,keep,compile,bf16] [--device cuda]`"""
from __future__ import annotations
import argparse, json, os, resource, subprocess, sys, time
from pathlib import Path
from peer_bench import spread   # bench/ is on sys.path when a script there runs

ROOT = Path(__file__).resolve().parents[1]


VARIANTS = {  # name: (keep_freed_memory, compile, CUDA graphs, bf16 autocast)
    'eager': (False, False, False, False), 'keep': (True, False, False, False), 'compile': (True, True, False, False),
    'bf16': (True, False, False, True), 'compile-bf16': (True, True, False, True),
    'graphs': (True, True, True, False), 'graphs-bf16': (True, True, True, True),
    'compile-free': (False, True, False, False)}


def float32_lstms():
    "Keep the LSTMs in float32 under autocast, as on CUDA."
    import tft_nb.model
    tft_nb.model._lstm = tft_nb.model._lstm_float32


def unfolded_selection():
    "Embed the real inputs before their selection networks instead of folding the embedding in."
    from tft_nb.selection import VariableSelectionNetwork
    forward = VariableSelectionNetwork.forward
    def unfolded(self, x, c=None, embedding=None): return forward(self, x if embedding is None else embedding(x), c)
    VariableSelectionNetwork.forward = unfolded


def uncapped_inference():
    "Run each inference batch in one pass, whatever the model's size."
    import tft_nb.evaluate
    tft_nb.evaluate.INFER_ELEMENTS = 2 ** 62


ABLATIONS = {  # name: (variant, what it undoes)
    'bf16-lstm32': ('bf16', float32_lstms), 'unfolded': ('keep', unfolded_selection),
    'bf16-unfolded': ('bf16', unfolded_selection), 'uncapped': ('keep', uncapped_inference),
    'bf16-uncapped': ('bf16', uncapped_inference)}


def training_setup(a: argparse.Namespace, compiled: bool = False, graphs: bool = False, bf16: bool = False):
    "The task's windows on `a.device`, the model of `a`'s sizes with its training state, `a.warm + a.steps` batches."
    import torch
    from tft_nb.data import load_sample
    from tft_nb.windows import PRESETS, make_windows
    from tft_nb.model import TFTConfig, TemporalFusionTransformer
    from tft_nb.train import TrainConfig, TrainingState
    from tft_nb.fit import warm_up
    data = make_windows(load_sample(), PRESETS['ohlcv_gk_logvol_tft_v1']).to(a.device)
    torch.manual_seed(42)
    model = TemporalFusionTransformer(TFTConfig(**data.spec.model_sizes(), hidden_size=a.hidden,
                                                attention_heads=a.heads, lstm_layers=a.lstm, dropout=0.1)).to(a.device)
    state = TrainingState.begin(model, TrainConfig(batch_size=a.batch, grad_clip=1.0, device=a.device))
    compile_s = warm_up(model.compile(cudagraphs=graphs), data.train, a.batch, bf16) if compiled else 0.0
    gen = torch.Generator().manual_seed(0)
    batches = [b for b, _ in zip(data.train.batches(a.batch, shuffle=True, generator=gen, drop_last=True),
                                 range(a.warm + a.steps))]
    return data, model, state, batches, compile_s


def one(a: argparse.Namespace) -> dict:
    "One variant's run: training and inference samples/s, compile seconds, peak RSS (end, after training), GPU MiB."
    import torch
    torch.set_num_threads(a.threads)
    from tft_nb.train import train_step
    from tft_nb.device import keep_freed_memory
    from tft_nb.evaluate import predict
    variant, undo = ABLATIONS.get(a.variant, (a.variant, None))
    if undo: undo()
    keep, compiled, graphs, bf16 = VARIANTS[variant]
    if keep: keep_freed_memory()
    device = torch.device(a.device)
    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
    data, model, state, batches, compile_s = training_setup(a, compiled, graphs, bf16)
    for b in batches[:a.warm]: train_step(model, state.opt, [b], 1.0, bf16)
    sync()
    t0 = time.perf_counter()
    for b in batches[a.warm:]: train_step(model, state.opt, [b], 1.0, bf16)
    sync()
    train = a.steps * a.batch / (time.perf_counter() - t0)
    rss_train = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    predict(model, data.test, batch_size=256, autocast=bf16)
    t0 = time.perf_counter()
    for _ in range(a.passes): predict(model, data.test, batch_size=256, autocast=bf16)
    infer = a.passes * len(data.test) / (time.perf_counter() - t0)
    gpu = torch.cuda.max_memory_allocated() / 2 ** 20 if device.type == 'cuda' else 0.0
    return dict(train=train, infer=infer, compile_s=compile_s,
                rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, rss_train=rss_train, gpu=gpu)


def drive(a: argparse.Namespace):
    "Interleaved rounds of the variants; each figure and its ratio to `eager` with median and min-max."
    variants = a.variants.split(',')
    print(f"speed_bench: hidden {a.hidden}, heads {a.heads}, lstm {a.lstm}, batch {a.batch}, {a.steps} steps, "
          f"{a.rounds} round(s) of {', '.join(variants)}; {os.cpu_count()} CPUs, {a.threads} threads", flush=True)
    rows = []
    for i in range(a.rounds):
        row = {}
        for v in variants:
            cmd = [sys.executable, __file__, '--one', v, *sum(([f'--{k}', str(getattr(a, k))] for k in
                   ('hidden', 'heads', 'lstm', 'batch', 'steps', 'warm', 'passes', 'threads', 'device')), [])]
            env = {**os.environ, 'PYTHONPATH': f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode: raise SystemExit(f"{v} failed:\n{r.stderr[-3000:]}")
            row[v] = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"round {i + 1} {v:12s} " + ', '.join(f"{k} {x:.4g}" for k, x in row[v].items()), flush=True)
        rows.append(row)
    for v in variants:
        for k in ('train', 'infer', 'rss', 'rss_train') + (('gpu',) if a.device == 'cuda' else ()):
            xs = [r[v][k] for r in rows]
            ratio = f"; / eager {spread([r[v][k] / r['eager'][k] for r in rows])}" if 'eager' in variants else ''
            print(f"{v:12s} {k:9s} {spread(xs)}{ratio}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--one', choices=(*VARIANTS, *ABLATIONS))
    p.add_argument('--variants', default='eager,keep,compile')
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--hidden', type=int, default=32)
    p.add_argument('--heads', type=int, default=4)
    p.add_argument('--lstm', type=int, default=1)
    p.add_argument('--batch', type=int, default=64)
    p.add_argument('--steps', type=int, default=40)
    p.add_argument('--warm', type=int, default=5)
    p.add_argument('--passes', type=int, default=5)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--device', default='cpu', choices=('cpu', 'cuda'))
    a = p.parse_args()
    if a.one is None: return drive(a)
    a.variant = a.one
    print(json.dumps(one(a)))


if __name__ == '__main__': main()
