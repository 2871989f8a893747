"""Training throughput under torchrun (DistributedDataParallel) at 1, 2, ... processes: weak and strong scaling.

The script starts each run as `python -m torch.distributed.run --standalone --nproc-per-node N` on itself (its
hidden `--worker` mode), so every run has torchrun's process group (gloo on the CPU, NCCL on CUDA) and a fresh
process per rank. Each rank loads the sample data (`load_sample`, the `ohlcv_gk_logvol_tft_v1` windows), builds
the model, and trains it through the library's own path: `TrainingState.begin`, `distributed`, `wrap` and
`train_epoch`, with the per-step stop check that `fit` makes (`World.stop`). The 1-process run is therefore a DDP
world of one, as `torchrun --nproc-per-node 1` gives. After `--warmup` steps, `--steps` steps are timed between two
collectives: samples/s is the global batch times the steps over the slowest rank's time, so process start-up,
data loading and validation are not in it.

Weak scaling keeps the batch of each process (`--batch`), so N processes step on N times as many windows; with
`--strong` the global batch stays `--batch` and each of N processes takes `--batch / N`. The runs interleave,
round by round (1, 2, 1, 2, ...); the script prints each run, then the median and min-max of each setting, the
ratio of N processes to 1 within each round (median and min-max), and the scaling efficiency (ratio / N). On the CPU
each process runs `--threads` threads (default 1: OMP_NUM_THREADS and `torch.set_num_threads`).
Run: `python bench/ddp_bench.py [--procs 1,2] [--rounds 3] [--strong] [--device cpu|cuda] [--hidden 64]`."""
from __future__ import annotations
import argparse, datetime, json, os, platform, signal, statistics, subprocess, sys, time
from pathlib import Path

import torch

from tft_nb.data import load_sample
from tft_nb.distributed import World, distributed
from tft_nb.fit import train_epoch
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.run_state import TrainingState
from tft_nb.train import TrainConfig
from tft_nb.data_config import PRESETS
from tft_nb.windows import Windows, make_windows

ROOT = Path(__file__).resolve().parents[1]
TAG = 'ddp_bench:'   # the start of rank 0's line of figures, which the parent reads

def first(w: Windows, n: int) -> Windows:
    "The first `n` windows of `w`."
    return w.subset(w.rows[:n])

def sync(world: World, device: torch.device):
    "Wait for this rank's device, then for every rank."
    if device.type == 'cuda': torch.cuda.synchronize(device)
    world.total(torch.zeros(1))

def train_steps(state: TrainingState, train: Windows, cfg: TrainConfig, steps: int, world: World, autocast: bool):
    "`steps` optimizer steps of `train_epoch` (with fit's per-step stop check), in as many epochs as they need."
    stop = lambda: world.stop([])
    per = len(train) // (cfg.batch_size * world.size)        # whole global batches in the training windows
    if per == 0: raise SystemExit(f"a global batch of {cfg.batch_size * world.size} is more than the {len(train)} "
                                  "training windows")
    while steps > 0:
        k = min(steps, per)
        train_epoch(state, first(train, k * cfg.batch_size * world.size), cfg, autocast, False, stop=stop, world=world)
        steps -= k

def worker(a: argparse.Namespace):
    "One rank of a run: `a.warmup` steps, then `a.steps` timed steps; rank 0 prints the figures on one line."
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    data = make_windows(load_sample(), PRESETS['ohlcv_gk_logvol_tft_v1'])
    with distributed(device) as world:
        device = world.device(device)
        torch.manual_seed(a.seed)
        config = TFTConfig(**data.spec.model_sizes(), hidden_size=a.hidden, attention_heads=a.heads,
                           lstm_layers=a.lstm_layers)
        model = TemporalFusionTransformer(config).to(device)
        cfg = TrainConfig(batch_size=a.batch, seed=a.seed, device=a.device, bf16=a.bf16)
        train = data.train.to(device)
        state = TrainingState.begin(model, cfg)
        world.seed(cfg.seed)
        state.net = world.wrap(model, device)
        autocast = a.bf16 and device.type == 'cuda'
        train_steps(state, train, cfg, a.warmup, world, autocast)
        sync(world, device)
        t0 = time.perf_counter()
        train_steps(state, train, cfg, a.steps, world, autocast)
        sync(world, device)
        seconds = max(world.gather(time.perf_counter() - t0))     # the slowest rank's
        if not world.main: return
        params = sum(p.numel() for p in model.parameters())
        backend = torch.distributed.get_backend() if torch.distributed.is_initialized() else 'none'
        out = dict(procs=world.size, batch=a.batch, global_batch=a.batch * world.size, steps=a.steps,
                   seconds=seconds, samples_per_s=a.steps * a.batch * world.size / seconds, params=params,
                   train_windows=len(train), backend=backend, threads=torch.get_num_threads())
        print(TAG, json.dumps(out), flush=True)

def worker_args(a: argparse.Namespace, batch: int) -> list[str]:
    "The worker's command-line arguments for a run at per-process batch `batch`."
    args = ['--worker', '--device', a.device, '--threads', str(a.threads), '--hidden', str(a.hidden),
            '--heads', str(a.heads), '--lstm-layers', str(a.lstm_layers), '--batch', str(batch),
            '--steps', str(a.steps), '--warmup', str(a.warmup), '--seed', str(a.seed)]
    return args + (['--bf16'] if a.bf16 else [])

def launch(a: argparse.Namespace, procs: int, batch: int) -> dict:
    "One run under torchrun: `procs` processes at per-process batch `batch`; rank 0's figures."
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', str(procs),
           str(Path(__file__).resolve()), *worker_args(a, batch)]
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get('PYTHONPATH')) if p)
    env = {**os.environ, 'OMP_NUM_THREADS': str(a.threads), 'PYTHONPATH': path}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                         start_new_session=True)                # torchrun and its workers: one process group
    try: out, err = p.communicate(timeout=a.timeout)
    finally: kill_group(p)
    lines = [line for line in out.splitlines() if line.startswith(TAG)]
    if p.returncode or not lines:
        raise SystemExit(f"the run of {procs} process(es) at batch {batch} failed (status {p.returncode}):\n"
                         + workers_error(err))
    return json.loads(lines[-1][len(TAG):])

def workers_error(err: str) -> str:
    "The last lines of the workers' stderr, before torchrun's own report of the failure (or its last lines)."
    lines = err.strip().splitlines()
    cut = next((i for i, line in enumerate(lines) if 'torch/distributed/elastic' in line), len(lines))
    return '\n'.join(lines[:cut][-20:] or lines[-20:])

def kill_group(p: subprocess.Popen):
    "Kill the process group of `p` (torchrun and its workers), whatever is left of it, and reap `p`."
    try: os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError: pass
    p.wait()

def cpu_model() -> str:
    "The CPU's model name as lscpu gives it."
    try: out = subprocess.run(['lscpu'], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired): out = ''
    names = [line.split(':', 1)[1].strip() for line in out.splitlines() if line.startswith('Model name:')]
    return names[0] if names else (platform.processor() or 'unknown')

def host_lines(a: argparse.Namespace) -> list[str]:
    "The host facts: CPU, cores, GPUs, versions, date, load."
    usable = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    lines = [f"host: {cpu_model()} (lscpu), {os.cpu_count()} CPUs ({usable} usable), {platform.node()}",
             f"torch {torch.__version__}, Python {platform.python_version()}; "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; load {load()}"]
    if a.device == 'cuda':
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        lines.append(f"GPUs: {len(names)}: {', '.join(names)}; CUDA {torch.version.cuda}")
    return lines

def load() -> str:
    "The 1-minute load average."
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, 'getloadavg') else 'n/a'

def settings(a: argparse.Namespace) -> list[tuple[str, int, int]]:
    "The runs of one round, in order: (name, processes, per-process batch)."
    out = []
    for n in a.procs:
        out.append((f"{n} proc{'s' if n > 1 else ''}" + (', weak' if n > 1 else ''), n, a.batch))
        if a.strong and n > 1: out.append((f"{n} procs, strong", n, a.batch // n))
    return out

def shape(n: int, b: int) -> str:
    "The batch of a run: per process x processes = global."
    return f"batch {b} x {n} = {b * n}"

def spread(xs: list[float], fmt: str = '{:,.1f}') -> str:
    "Median and min-max of `xs`."
    m, lo, hi = (fmt.format(x) for x in (statistics.median(xs), min(xs), max(xs)))
    return f"median {m}, min-max {lo}-{hi}"

def summary(runs: dict[str, list[dict]], plan: list[tuple[str, int, int]], base: str):
    "Each setting's samples/s, and its ratio to one process within each round, with the efficiency."
    print("\nsamples/s over the rounds:")
    for name, n, b in plan:
        xs = [r['samples_per_s'] for r in runs[name]]
        print(f"  {name:<16} {shape(n, b):<20} {len(xs)} runs: {spread(xs)}")
    if base not in runs: return
    print(f"\nratio to {base} (each round's run over that round's {base}), and efficiency (ratio / N):")
    for name, n, _ in plan:
        if name == base: continue
        ratios = [r['samples_per_s'] / r1['samples_per_s'] for r, r1 in zip(runs[name], runs[base])]
        print(f"  {name:<16} ratio {spread(ratios, '{:.3f}')}; efficiency {spread([x / n for x in ratios], '{:.3f}')}")

def check(a: argparse.Namespace):
    "Refuse settings that cannot run here."
    if a.device == 'cuda' and torch.cuda.device_count() < max(a.procs):
        raise SystemExit(f"--procs {max(a.procs)} needs as many GPUs; this machine has {torch.cuda.device_count()}")
    if a.strong and (bad := [n for n in a.procs if a.batch % n]):
        raise SystemExit(f"--strong splits --batch {a.batch} among the processes: not divisible by {bad}")
    if min(a.procs) < 1 or a.rounds < 1 or a.steps < 1 or a.batch < 1:
        raise SystemExit("--procs, --rounds, --steps and --batch must be >= 1")

def main(a: argparse.Namespace):
    "Interleaved rounds of runs, then the summary."
    check(a)
    for line in host_lines(a): print(line)
    threads = f"{a.threads} thread(s) per process (OMP_NUM_THREADS={a.threads}, torch.set_num_threads)"
    print(f"command: python {' '.join(sys.argv)}")
    print(f"device {a.device}; {threads}; model hidden {a.hidden}, {a.heads} heads, {a.lstm_layers} LSTM layer(s)"
          f"{', bf16 autocast' if a.bf16 and a.device == 'cuda' else ''}")
    print(f"each run: torchrun --standalone, {a.warmup} warm-up steps, then {a.steps} timed steps of train_epoch;")
    print("samples/s = global batch x timed steps / the slowest rank's time")
    plan = settings(a)
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in plan}
    t0 = time.perf_counter()
    for r in range(a.rounds):
        for name, n, b in plan:
            before = load()
            x = launch(a, n, b)
            runs[name].append(x)
            if r == 0 and name == plan[0][0]:
                print(f"model: {x['params']:,} parameters; {x['train_windows']:,} training windows; "
                      f"backend {x['backend']}; {x['threads']} torch thread(s) per process")
            print(f"round {r + 1}  {name:<16} {shape(n, b):<20} {x['samples_per_s']:>10,.1f} samples/s  "
                  f"({x['seconds'] / x['steps'] * 1e3:.1f} ms/step; load {before})", flush=True)
    summary(runs, plan, plan[0][0] if plan[0][1] == 1 else '')
    print(f"\n{a.rounds} rounds of {len(plan)} runs in {time.perf_counter() - t0:.0f} s; load {load()}")

def parse() -> argparse.Namespace:
    "The command line."
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--procs', type=lambda s: [int(x) for x in s.split(',')], default=[1, 2],
                    help='numbers of processes, comma-separated (default 1,2)')
    ap.add_argument('--rounds', type=int, default=3, help='interleaved rounds of every setting')
    ap.add_argument('--strong', action='store_true', help='also the same global batch (--batch split among N)')
    ap.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    ap.add_argument('--threads', type=int, default=1, help='CPU threads per process')
    ap.add_argument('--hidden', type=int, default=64, help='hidden size (the original configuration: 256)')
    ap.add_argument('--heads', type=int, default=8, help='attention heads')
    ap.add_argument('--lstm-layers', type=int, default=2)
    ap.add_argument('--batch', type=int, default=32, help='windows per process per step (strong: the global batch)')
    ap.add_argument('--steps', type=int, default=40, help='timed steps per run')
    ap.add_argument('--warmup', type=int, default=5, help='untimed steps before them')
    ap.add_argument('--seed', type=int, default=42)
    ap.add_argument('--bf16', action='store_true', help='bfloat16 autocast (CUDA only)')
    ap.add_argument('--timeout', type=float, default=1800, help='seconds a run may take before it is killed')
    ap.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    return ap.parse_args()

if __name__ == '__main__':
    args = parse()
    if args.worker: worker(args)
    else: main(args)
