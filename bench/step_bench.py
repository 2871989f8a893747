"""A training step of tft_nb timed, with its variants: one subcommand each.

`speed`, `profile` and `versus` share a set-up: the benchmark task's windows, the model of `--hidden`, `--heads` and
`--lstm` (dropout 0.1, seed 42), `train_step` with gradient clipping 1.0 and fused Adam (on the CPU over flat buffers
where `flat_pays`, as `fit` steps it) at batch `--batch` on shuffled batches (seed 0), `keep_freed_memory` as `fit`
calls it for every CPU run, compiled as `fit` compiles (`warm_up`).

- `speed`: what each speed lever of issue 27 gives to a training step and to inference, each measured on its own.
  Variants, each in a fresh process, interleaved over `--rounds` rounds (these machines are noisy): `eager`, the model
  as it runs without any lever (glibc's default allocator thresholds); `keep`: `keep_freed_memory()` (24_accelerate);
  `compile`: `keep` plus `compile_stages(model)` (24_accelerate); `bf16`: `keep` plus bfloat16 autocast
  (`train_step(..., autocast=True)`, `predict(..., autocast=True)`), which `fit` uses on CUDA, and on the CPU with
  `TrainConfig.cpu_bf16` (native on CPUs with AVX-512 BF16 or AMX); `compile-bf16`: both; `compile-free`: `compile`
  without `keep_freed_memory`; `graphs` and `graphs-bf16`: `compile(cudagraphs=True)`, the compiled stages replayed
  as CUDA graphs (what `fit` compiles on CUDA), without and with bf16. Ablations, each a variant with one lever undone,
  its baseline: `bf16-lstm32` (`bf16` with the LSTMs kept in float32 under autocast, as before they followed it on the
  CPU, 06_model), `unfolded` and `bf16-unfolded` (`keep` and `bf16` with the real inputs embedded before their
  selection networks, not folded in: 24_accelerate's `fold_embeddings` left out), `uncapped` and `bf16-uncapped`
  (`keep` and `bf16` with inference passes of all 256 windows of a batch, the cap `INFER_ELEMENTS` of 08_evaluate
  lifted). A process trains `--steps`
  steps after `--warm` untimed ones, then runs inference over the test windows (batch 256, one untimed pass, then
  `--passes`), on `--device` (CUDA timings end with a synchronize). It prints training and inference samples/s, the
  compile time, and peak memory (RSS at the end and after training, `rss_train`; on CUDA also the peak allocated on
  the GPU). The driver prints each run, then per variant the median and min-max, and the ratio to `eager` per round.
- `model`: size and speed of the default model (hidden 256, 8 heads, 2 LSTM layers, dropout 0.1) on random batches of
  the benchmark task's shape (60 past bars, 5 ahead, 6 encoder inputs, 2 decoder inputs, one static input of
  cardinality 2; batch 32, the trainer's default). Prints the parameter count and the median time of one training
  forward+backward pass on the CPU (float32; with `--cpu-bf16` also bfloat16 autocast, as `TrainConfig.cpu_bf16`
  runs), and on CUDA when available (float32 and bfloat16 autocast, as the trainer runs). As a physical reference, the
  FLOPs of that pass are counted with `torch.utils.flop_counter.FlopCounterMode` (it does not see the fused LSTM
  kernels, whose matmul FLOPs are added analytically: 2 * B * T * 4H * (d_in + H) per layer forward, twice that
  backward) and a plain matmul workload of the same FLOPs is timed in the same run, giving the achieved FLOP/s of
  both. Like `fit`, it calls `keep_freed_memory()`; `--compile` compiles the model first (on CUDA with CUDA graphs, as
  `fit` compiles there). On CUDA it also times large (8192^3) matmuls of each precision, the ceiling a small model's
  matmuls cannot reach, and runs the batch sizes of `--cuda-batches`.
- `profile`: where a training step's CPU time goes, by PyTorch operator: `torch.profiler` over `--steps` steps of the
  original configuration (hidden 256, 8 heads, 2 LSTM layers, batch 32; or the sizes given) after `--warm` untimed
  ones, in float32 or under bfloat16 autocast, eager or compiled (`--compile`). Prints the time a step took, then the
  profiler's table of the `--rows` operators with the most self CPU time (with `--shapes`, one row per operator and
  input shapes).
- `optimizer`: the part of a training step after its backward pass (for the flat side the gradients gathered into its
  buffers, then the gradient norm, clipping to 1.0, Adam, `zero_grad`) with the optimizer over flat buffers
  (`flatten_optimizer`, 24a_flat_optimizer, applied at any size) against the reference optimizer, per parameter, in one
  process: `--block` steps on fixed random gradients alternate between the two for `--rounds` rounds, the order
  reversed every round; prints each side's median time a step and the ratio flat / reference per round.
- `versus`: this working tree's training step and inference against another commit's, side by side in one process.
  The other commit's package is unpacked (`git archive`) into a temporary folder and imported as `tft_nb_base` (every
  `tft_nb` in its source renamed, its custom operators included), beside this tree's `tft_nb`. Both build the model
  with the same weights and train on the same batches, eager or compiled, in float32 or under bfloat16 autocast.
  Blocks of `--block` training steps alternate between the two (the order reversed every round) for `--rounds` rounds,
  then inference passes over the test windows (batch 256) alternate the same way, so that the host's changes of speed
  hit both alike. Prints the largest difference of their forecasts at the same weights, each side's median time and,
  per round, the ratio this tree / base with its median and min-max (below 1: this tree is faster).
Run: `python bench/step_bench.py speed [--hidden 32 --heads 4 --lstm 1 --batch 64] [--rounds 3]
[--variants eager,keep,compile,bf16] [--device cuda]`
Run: `python bench/step_bench.py optimizer [--hidden 256 --heads 8 --lstm 2] [--rounds 15 --block 50]`
Run: `python bench/step_bench.py model [--batch 32] [--reps 10] [--threads N] [--compile] [--cpu-bf16]
[--devices cpu,cuda] [--cuda-batches 32,512]`
Run: `python bench/step_bench.py profile --precision fp32|bf16 [--threads 2] [--steps 7] [--warm 3] [--rows 18]
[--hidden 32 --heads 4 --lstm 1 --batch 64] [--compile] [--shapes]`
Run: `python bench/step_bench.py versus --base REV [--compile] [--bf16] [--hidden 32 --heads 4 --lstm 1 --batch 64]
[--rounds 10] [--block 10]`"""
from __future__ import annotations
import argparse, importlib, json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

import torch
from torch.profiler import profile as profiled, ProfilerActivity
from torch.utils.flop_counter import FlopCounterMode

from tft_nb.data import load_sample
from tft_nb.accelerate import compile_stages, keep_freed_memory
from tft_nb.evaluate import predict
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.train import grad_norm, train_step
from tft_nb.data_config import PRESETS
from tft_nb.windows import Batch, make_windows
from peer_bench import rss_mib, spread   # bench/ is on sys.path when a script there runs

ROOT = Path(__file__).resolve().parents[1]
TASK = dict(hidden=32, heads=4, lstm=1, batch=64)         # the task configuration (the peer's)
ORIGINAL = dict(hidden=256, heads=8, lstm=2, batch=32)    # the original configuration, the default model

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
    "Embed the real inputs before their selection networks, as 06_model writes it, instead of folding the embedding in."
    import tft_nb.accelerate
    tft_nb.accelerate.fold_embeddings = lambda model: model

def uncapped_inference():
    "Run each inference batch in one pass, whatever the model's size."
    import tft_nb.evaluate
    tft_nb.evaluate.INFER_ELEMENTS = 2 ** 62

ABLATIONS = {  # name: (variant, what it undoes)
    'bf16-lstm32': ('bf16', float32_lstms), 'unfolded': ('keep', unfolded_selection),
    'bf16-unfolded': ('bf16', unfolded_selection), 'uncapped': ('keep', uncapped_inference),
    'bf16-uncapped': ('bf16', uncapped_inference)}

def prepare(threads: int, keep: bool = True):
    "Use `threads` CPU threads (0: torch's default) and, with `keep`, keep freed memory as `fit` does."
    if threads: torch.set_num_threads(threads)
    if keep: keep_freed_memory()

def synchronizer(device: torch.device):
    "A function that waits for `device`'s queued work (CUDA), or does nothing."
    return torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)

def task_windows(device: str = 'cpu'):
    "The benchmark task's windows on `device`."
    return make_windows(load_sample(), PRESETS['ohlcv_gk_logvol_tft_v1']).to(device)

def _module(pkg: str, name: str):
    "`pkg`'s module `name` (the acceleration layer, its flat optimizer), or None in a base commit before it."
    try: return importlib.import_module(f'{pkg}.{name}')
    except ModuleNotFoundError: return None

def _state_module(pkg: str):
    "`pkg`'s module of `TrainingState`: run_state (10c), or train in a base commit before it."
    try: return importlib.import_module(f'{pkg}.run_state')
    except ModuleNotFoundError: return importlib.import_module(f'{pkg}.train')

def build(a: argparse.Namespace, data, pkg: str = 'tft_nb', weights: dict | None = None, compiled: bool = False,
          graphs: bool = False, bf16: bool = False, dropout: float = 0.1, flat: bool = True):
    "`pkg`'s model of `a`'s sizes on `a.device` (with `weights` when given), its training state, compile seconds."
    m, t = (importlib.import_module(f'{pkg}.{n}') for n in ('model', 'train'))
    torch.manual_seed(42)
    model = m.TemporalFusionTransformer(m.TFTConfig(**data.spec.model_sizes(), hidden_size=a.hidden,
                                                    attention_heads=a.heads, lstm_layers=a.lstm, dropout=dropout))
    model = model.to(a.device)
    if weights is not None: model.load_state_dict(weights)
    if hasattr(acc := _module(pkg, 'accelerate'), 'fast_dropout'): acc.fast_dropout(model)   # as `fit` does
    if hasattr(acc, 'fold_embeddings'): acc.fold_embeddings(model)                # a base commit: folded in its model
    cfg = t.TrainConfig(batch_size=a.batch, grad_clip=1.0, device=a.device)
    state = _state_module(pkg).TrainingState.begin(model, cfg)
    fo = _module(pkg, 'flat_optimizer')
    if flat and a.device == 'cpu' and fo is not None and fo.flat_pays(state.opt): fo.flatten_optimizer(state.opt, model)
    if not compiled: return model, state, 0.0
    if acc is None:                                                       # a base commit before the layer
        compiled_model = model.compile(cudagraphs=True) if graphs else model.compile()
        return model, state, importlib.import_module(f'{pkg}.fit').warm_up(compiled_model, data.train, a.batch, bf16)
    compiled_model = acc.compile_stages(model, cudagraphs=graphs)
    return model, state, acc.warm_up(compiled_model, data.train, a.batch, bf16)

def train_batches(data, batch: int, n: int | None = None) -> list:
    "The first `n` (default: all) shuffled training batches of size `batch` (seed 0)."
    gen = torch.Generator().manual_seed(0)
    batches = data.train.batches(batch, shuffle=True, generator=gen, drop_last=True)
    return [b for _, b in zip(range(n), batches)] if n is not None else list(batches)

def training_setup(a: argparse.Namespace, compiled: bool = False, graphs: bool = False, bf16: bool = False):
    "The task's windows on `a.device`, the model of `a`'s sizes with its training state, `a.warm + a.steps` batches."
    data = task_windows(a.device)
    model, state, compile_s = build(a, data, compiled=compiled, graphs=graphs, bf16=bf16)
    return data, model, state, train_batches(data, a.batch, a.warm + a.steps), compile_s

def run_steps(model, opt, batches: list, bf16: bool, sync=lambda: None) -> float:
    "Seconds of a `train_step` (gradient clipping 1.0) on each of `batches`, `sync` called at the end."
    t0 = time.perf_counter()
    for b in batches: train_step(model, opt, [b], 1.0, bf16)
    sync()
    return time.perf_counter() - t0

def speed_one(a: argparse.Namespace) -> dict:
    "One variant's run: training and inference samples/s, compile seconds, peak RSS (end, after training), GPU MiB."
    variant, undo = ABLATIONS.get(a.one, (a.one, None))
    if undo: undo()
    keep, compiled, graphs, bf16 = VARIANTS[variant]
    prepare(a.threads, keep)
    device = torch.device(a.device)
    data, model, state, batches, compile_s = training_setup(a, compiled, graphs, bf16)
    sync = synchronizer(device)
    run_steps(model, state.opt, batches[:a.warm], bf16, sync)
    train = a.steps * a.batch / run_steps(model, state.opt, batches[a.warm:], bf16, sync)
    rss_train = rss_mib()
    predict(model, data.test, batch_size=256, autocast=bf16)
    t0 = time.perf_counter()
    for _ in range(a.passes): predict(model, data.test, batch_size=256, autocast=bf16)
    infer = a.passes * len(data.test) / (time.perf_counter() - t0)
    gpu = torch.cuda.max_memory_allocated() / 2 ** 20 if device.type == 'cuda' else 0.0
    return dict(train=train, infer=infer, compile_s=compile_s, rss=rss_mib(), rss_train=rss_train, gpu=gpu)

def speed(a: argparse.Namespace):
    "One variant's run (`--one`), or interleaved rounds of the variants: each figure and its ratio to `eager`."
    if a.one is not None: return print(json.dumps(speed_one(a)))
    variants = a.variants.split(',')
    print(f"speed_bench: hidden {a.hidden}, heads {a.heads}, lstm {a.lstm}, batch {a.batch}, {a.steps} steps, "
          f"{a.rounds} round(s) of {', '.join(variants)}; {os.cpu_count()} CPUs, {a.threads} threads", flush=True)
    rows = []
    for i in range(a.rounds):
        row = {}
        for v in variants:
            cmd = [sys.executable, __file__, 'speed', '--one', v, *sum(([f'--{k}', str(getattr(a, k))] for k in
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

def make_batch(cfg: TFTConfig, B: int, device) -> Batch:
    "A random batch of the config's shape on `device`."
    g = torch.Generator().manual_seed(0)
    static = torch.stack([torch.randint(0, n, (B,), generator=g) for n in cfg.static_cardinalities], 1)
    b = Batch(static, torch.randn(B, cfg.encoder_length, cfg.encoder_vars, generator=g),
              torch.randn(B, cfg.horizon, cfg.decoder_vars, generator=g), torch.randn(B, cfg.horizon, generator=g),
              torch.arange(B), torch.zeros(B, dtype=torch.long))
    return b.to(device)

def step_fn(model, b: Batch, autocast: bool):
    "One training forward+backward pass (pinball-style loss on the quantiles)."
    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast(b.target.device.type, dtype=torch.bfloat16, enabled=autocast):
            q = model(b).quantiles
        (q.float() - b.target[..., None]).abs().mean().backward()
    return step

def lstm_flops(cfg: TFTConfig, B: int) -> int:
    "Matmul FLOPs of the encoder and decoder LSTMs, forward and backward (3x forward)."
    H, T = cfg.hidden_size, cfg.encoder_length + cfg.horizon
    return 3 * cfg.lstm_layers * 2 * B * T * 4 * H * (H + H)

def timed(fn, device, reps: int, warmup: int = 3) -> float:
    "Median wall time of `fn` over `reps` calls after `warmup`, synchronising CUDA."
    sync = synchronizer(device)
    for _ in range(warmup): fn()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)

def matmul_reference(flops: float, device, dtype, n: int):
    "A workload of k (n x n) @ (n x n) matmuls with k * 2n^3 ~ `flops`; returns (workload, k)."
    k = max(1, round(flops / (2 * n ** 3)))
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    def work():
        for _ in range(k): a @ b
    return work, k

def peak_rate(device, dtype, n: int = 8192, reps: int = 10) -> float:
    "FLOP/s of large (n x n) @ (n x n) matmuls in `dtype` on `device`."
    work, _ = matmul_reference(2 * n ** 3, device, dtype, n)       # one product
    return 2 * n ** 3 / timed(work, device, reps)

def model_pass(device, B: int, reps: int, autocast: bool, compiled: bool = False) -> dict:
    "The default model's forward+backward pass at batch `B`: its FLOPs, median time, and matmuls of the same FLOPs."
    torch.manual_seed(0)
    cfg = TFTConfig()
    model = TemporalFusionTransformer(cfg).to(device).train()
    b = make_batch(cfg, B, device)
    with FlopCounterMode(display=False) as fc: step_fn(model, b, autocast)()
    counted = fc.get_total_flops()
    if compiled: compile_stages(model, cudagraphs=device.type == 'cuda')
    step = step_fn(model, b, autocast)
    total = counted + lstm_flops(cfg, B)
    t_model = timed(step, device, reps)
    n = 1024 if device.type == 'cuda' else 512
    work, k = matmul_reference(total, device, torch.bfloat16 if autocast else torch.float32, n)
    t_mm = timed(work, device, reps)
    return dict(cfg=cfg, params=sum(p.numel() for p in model.parameters()), counted=counted, total=total,
                t_model=t_model, t_mm=t_mm, k=k, n=n, rate_model=total / t_model, rate_mm=k * 2 * n ** 3 / t_mm)

def report_pass(name: str, r: dict, B: int):
    "Print a `model_pass` result: time, FLOPs, and achieved FLOP/s against the matmul rate."
    print(f"\n[{name}] batch {B}: forward+backward {r['t_model'] * 1e3:.1f} ms/batch "
          f"({B / r['t_model']:,.0f} windows/s)")
    print(f"  FLOPs per batch: {r['total'] / 1e9:.2f} GFLOP ({r['counted'] / 1e9:.2f} counted by FlopCounterMode"
          f" + {(r['total'] - r['counted']) / 1e9:.2f} LSTM, analytic)")
    print(f"  model achieved: {r['rate_model'] / 1e9:.1f} GFLOP/s")
    print(f"  plain matmuls, {r['k']} x {r['n']}^3 (same FLOPs): {r['t_mm'] * 1e3:.1f} ms, "
          f"{r['rate_mm'] / 1e9:.1f} GFLOP/s"
          f" -> the model runs at {100 * r['rate_model'] / r['rate_mm']:.0f}% of the matmul rate")

def model(a: argparse.Namespace):
    "Size, FLOPs and speed of the default model on the CPU and on CUDA."
    prepare(a.threads)
    c = TFTConfig()
    print(f"TFTConfig: hidden {c.hidden_size}, heads {c.attention_heads}, LSTM layers {c.lstm_layers}, "
          f"dropout {c.dropout}, quantiles {c.quantiles}; "
          f"Te {c.encoder_length}, Td {c.horizon}, Ve {c.encoder_vars}, Vd {c.decoder_vars}, "
          f"static {c.static_cardinalities}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; median of {a.reps} after 3 warm-ups; "
          f"{'compiled' if a.compile else 'eager'}")
    if 'cpu' in a.devices:
        cpu = model_pass(torch.device('cpu'), a.batch, a.reps, autocast=False, compiled=a.compile)
        print(f"parameters: {cpu['params']:,}")
        report_pass('cpu float32', cpu, a.batch)
        if a.cpu_bf16:
            report_pass('cpu bf16', model_pass(torch.device('cpu'), a.batch, a.reps, True, a.compile), a.batch)
    if 'cuda' not in a.devices: return
    if not torch.cuda.is_available(): return print("\nCUDA: not available")
    dev = torch.device('cuda')
    fp32, bf16 = (peak_rate(dev, t) / 1e12 for t in (torch.float32, torch.bfloat16))
    print(f"\nCUDA: {torch.cuda.get_device_name(dev)}; 8192^3 matmuls: float32 {fp32:.1f} TFLOP/s, bf16 {bf16:.1f}")
    for B in map(int, a.cuda_batches.split(',')):
        report_pass('cuda float32', model_pass(dev, B, max(a.reps, 50), autocast=False, compiled=a.compile), B)
        report_pass('cuda bf16 autocast', model_pass(dev, B, max(a.reps, 50), autocast=True, compiled=a.compile), B)

def profile(a: argparse.Namespace):
    "The time of a step, then the profiler's table of the operators with the most self CPU time."
    prepare(a.threads)
    bf16 = a.precision == 'bf16'
    _, model, state, batches, _ = training_setup(a, compiled=a.compile, bf16=bf16)
    run_steps(model, state.opt, batches[:a.warm], bf16)
    step = run_steps(model, state.opt, batches[a.warm:], bf16) / a.steps
    print(f"a step: {step * 1e3:.1f} ms ({a.batch / step:.0f} samples/s), over {a.steps} after {a.warm}")
    with profiled(activities=[ProfilerActivity.CPU], record_shapes=a.shapes) as prof:
        run_steps(model, state.opt, batches[a.warm:], bf16)
    table = prof.key_averages(group_by_input_shape=a.shapes).table(sort_by='self_cpu_time_total', row_limit=a.rows,
                                                                   max_name_column_width=45, max_shapes_column_width=60)
    print(table)

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
    model, state, seconds = build(a, data, pkg, weights, compiled=a.compile, bf16=a.bf16)
    t, e = (importlib.import_module(f'{pkg}.{n}') for n in ('train', 'evaluate'))
    return model, state.opt, t.train_step, e.predict, seconds

def alternate(runs: dict, work, rounds: int) -> dict:
    "Seconds of `work(name, run)` (or those it returns) for each run, alternating, the order reversed every round."
    names, times = list(runs), {n: [] for n in runs}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            timed = work(n, runs[n])
            times[n].append(time.perf_counter() - t0 if timed is None else timed)
    return times

def report_ratio(what: str, times: dict, per: int):
    "Each side's median time per unit and the per-round ratio tree / base, median and min-max."
    tree, base = times['tree'], times['base']
    ratios = [x / y for x, y in zip(tree, base)]
    print(f"{what}: tree {statistics.median(tree) / per * 1e3:.2f} ms, base {statistics.median(base) / per * 1e3:.2f}"
          f" ms (medians); tree / base median {statistics.median(ratios):.3f}, "
          f"min-max {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} rounds", flush=True)

def versus(a: argparse.Namespace):
    "This tree's training step and inference against `a.base`'s, alternating in one process."
    prepare(a.threads)
    data = task_windows()
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
    batches = train_batches(data, a.batch)
    step = {n: 0 for n in runs}
    def train(n, run):
        model, opt, train_step = run[:3]
        for _ in range(a.block):
            train_step(model, opt, [batches[step[n] % len(batches)]], 1.0, a.bf16)
            step[n] += 1
    alternate(runs, train, 2)                                            # warm-up, untimed
    report_ratio(f"training step (batch {a.batch})", alternate(runs, train, a.rounds), a.block)
    def infer(n, run): run[3](run[0], data.test, batch_size=256, autocast=a.bf16)
    alternate(runs, infer, 2)
    report_ratio(f"inference over the {len(data.test)} test windows", alternate(runs, infer, a.rounds), 1)

def optimizer(a: argparse.Namespace):
    "The part of a step after its backward pass, the optimizer over flat buffers against per parameter, alternating."
    prepare(a.threads)
    data, fo = task_windows(), _module('tft_nb', 'flat_optimizer')
    runs = {n: build(a, data, flat=False)[:2] for n in ('tree', 'base')}
    fo.flatten_optimizer(runs['tree'][1].opt, runs['tree'][0])         # at any size, `flat_pays` or not
    grads = [torch.randn_like(p) * 1e-3 for p in runs['base'][0].parameters()]
    def part(n: str, run: tuple) -> float:
        model, state = run
        params, t = [p for g in state.opt.param_groups for p in g['params']], 0.0
        for _ in range(a.block):
            for p, g in zip(model.parameters(), grads): p.grad = g.clone()
            t0 = time.perf_counter()
            if n == 'tree': fo.gather_grads(state.opt)                 # what a backward pass ends with
            torch.nn.utils.clip_grads_with_norm_(params, 1.0, grad_norm(params))
            state.opt.step()
            state.opt.zero_grad(set_to_none=True)
            t += time.perf_counter() - t0
        return t
    times = alternate(runs, part, a.rounds)                           # the seconds of the optimizer's part only
    print(f"optimizer: flat buffers (tree) against per parameter (base); hidden {a.hidden}, heads {a.heads}, "
          f"lstm {a.lstm}; {sum(p.numel() for p in grads)} parameters in {len(grads)} tensors; {a.threads} threads")
    report_ratio(f"gather, norm, clipping, Adam and zero_grad, {a.block} a round", times, a.block)

def ints(p: argparse.ArgumentParser, **defaults: int):
    "An integer flag `--name` of `p` for each of `defaults`."
    for name, default in defaults.items(): p.add_argument(f'--{name}', type=int, default=default)

def main():
    "Parse the subcommand and its flags, and run it."
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest='command', required=True)
    def command(run, doc: str) -> argparse.ArgumentParser:
        s = sub.add_parser(run.__name__, help=doc, description=doc)
        s.set_defaults(run=run, device='cpu')
        return s
    s = command(speed, "What each speed lever of issue 27 gives to a training step and to inference, each on its own.")
    s.add_argument('--one', choices=(*VARIANTS, *ABLATIONS))
    s.add_argument('--variants', default='eager,keep,compile')
    ints(s, rounds=3, **TASK, steps=40, warm=5, passes=5, threads=2)
    s.add_argument('--device', default='cpu', choices=('cpu', 'cuda'))
    s = command(model, "Size and speed of the default Temporal Fusion Transformer (hidden 256, 8 heads, 2 LSTM "
                       "layers, dropout 0.1).")
    ints(s, batch=32, reps=10)
    s.add_argument('--threads', type=int, default=0, help='CPU threads (0: torch default)')
    s.add_argument('--compile', action='store_true', help='compile_stages(model) first')
    s.add_argument('--cpu-bf16', action='store_true', help='CPU: also bf16 autocast (cpu_bf16)')
    s.add_argument('--devices', default='cpu,cuda', help='where to run: cpu, cuda (when available), or both')
    s.add_argument('--cuda-batches', default='32', help='batch sizes to run on CUDA, comma-separated')
    s = command(profile, "Where a training step's CPU time goes, by PyTorch operator.")
    s.add_argument('--precision', choices=('fp32', 'bf16'), default='fp32')
    ints(s, threads=2, steps=7, rows=18, warm=3, **ORIGINAL)
    s.add_argument('--compile', action='store_true', help="compile the model as --compile does (warm-up untimed)")
    s.add_argument('--shapes', action='store_true', help="a row per operator and input shapes")
    s = command(versus, "This working tree's training step and inference against another commit's, side by side "
                        "in one process.")
    s.add_argument('--base', required=True, help="the commit to compare against")
    s.add_argument('--compile', action='store_true')
    s.add_argument('--bf16', action='store_true', help="bfloat16 autocast, as TrainConfig.cpu_bf16")
    ints(s, **TASK, rounds=10, block=10, threads=2)
    s = command(optimizer, "The part of a training step after its backward pass: the optimizer over flat buffers "
                           "(24a_flat_optimizer) against the reference, per parameter, alternating in one process.")
    ints(s, **TASK, rounds=15, block=50, threads=2)
    a = p.parse_args()
    a.run(a)

if __name__ == '__main__': main()
