"""Where a training step's CPU time goes, by PyTorch operator: `torch.profiler` over `--steps` `train_step`s of the
original configuration (hidden 256, 8 heads, 2 LSTM layers, batch 32; or the sizes given; `speed_bench`'s set-up:
dropout 0.1, gradient clipping 1.0) after `--warm` untimed ones, in float32 or under bfloat16 autocast, eager or
compiled (`--compile`, as `fit` compiles), as `fit` runs it on the CPU (`keep_freed_memory`). Prints the time a step
took, then the profiler's table of the `--rows` operators with the most self CPU time (with `--shapes`, one row per
operator and input shapes).
Run: `python bench/profile_step.py --precision fp32|bf16 [--threads 2] [--steps 7] [--warm 3] [--rows 18]
[--hidden 32 --heads 4 --lstm 1 --batch 64] [--compile] [--shapes]`."""
from __future__ import annotations
import argparse, time
import torch
from torch.profiler import profile, ProfilerActivity
from tft_nb.train import train_step
from tft_nb.device import keep_freed_memory
from speed_bench import training_setup   # bench/ is on sys.path when a script there runs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--precision', choices=('fp32', 'bf16'), default='fp32')
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--steps', type=int, default=7)
    p.add_argument('--rows', type=int, default=18)
    p.add_argument('--warm', type=int, default=3)
    p.add_argument('--hidden', type=int, default=256)
    p.add_argument('--heads', type=int, default=8)
    p.add_argument('--lstm', type=int, default=2)
    p.add_argument('--batch', type=int, default=32)
    p.add_argument('--compile', action='store_true', help="compile the model as --compile does (warm-up untimed)")
    p.add_argument('--shapes', action='store_true', help="a row per operator and input shapes")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    keep_freed_memory()
    bf16 = a.precision == 'bf16'
    setup = argparse.Namespace(hidden=a.hidden, heads=a.heads, lstm=a.lstm, batch=a.batch, device='cpu', warm=a.warm,
                               steps=a.steps)
    _, model, state, batches, _ = training_setup(setup, compiled=a.compile, bf16=bf16)
    for b in batches[:a.warm]: train_step(model, state.opt, [b], 1.0, bf16)
    t = time.perf_counter()
    for b in batches[a.warm:]: train_step(model, state.opt, [b], 1.0, bf16)
    step = (time.perf_counter() - t) / a.steps
    print(f"a step: {step * 1e3:.1f} ms ({a.batch / step:.0f} samples/s), over {a.steps} after {a.warm}")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=a.shapes) as prof:
        for b in batches[a.warm:]: train_step(model, state.opt, [b], 1.0, bf16)
    table = prof.key_averages(group_by_input_shape=a.shapes).table(sort_by='self_cpu_time_total', row_limit=a.rows,
                                                                   max_name_column_width=45, max_shapes_column_width=60)
    print(table)


if __name__ == '__main__': main()
