"""Size and speed of the default Temporal Fusion Transformer (hidden 256, 8 heads, 2 LSTM layers, dropout 0.1).

Shape of the benchmark task: 60 past bars, 5 ahead, 6 encoder inputs, 2 decoder inputs, one static input of
cardinality 2; batch 32 (the trainer's default). Prints the parameter count and the median time of one training
forward+backward pass on the CPU (float32; with `--cpu-bf16` also bfloat16 autocast, as `TrainConfig.cpu_bf16` runs),
and on CUDA when available (float32 and bfloat16 autocast, as the trainer runs).

As a physical reference, the FLOPs of that pass are counted with `torch.utils.flop_counter.FlopCounterMode` (it
does not see the fused LSTM kernels, whose matmul FLOPs are added analytically: 2 * B * T * 4H * (d_in + H) per
layer forward, twice that backward) and a plain matmul workload of the same FLOPs is timed in the same run, giving
the achieved FLOP/s of both. Like `fit`, it calls `keep_freed_memory()`; `--compile` compiles the model first
(`TemporalFusionTransformer.compile`; on CUDA with CUDA graphs, as `fit` compiles there). On CUDA it also times
large (8192^3) matmuls of each precision, the ceiling a small model's matmuls cannot reach, and runs the batch sizes of
`--cuda-batches`. Run: `python bench/model_bench.py [--batch 32] [--reps 10] [--threads N] [--compile] [--cpu-bf16]
[--devices cpu,cuda] [--cuda-batches 32,512]`."""
from __future__ import annotations
import argparse, statistics, time

import torch
from torch.utils.flop_counter import FlopCounterMode

from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.windows import Batch
from tft_nb.device import keep_freed_memory

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
    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
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

def bench(device, B: int, reps: int, autocast: bool, compiled: bool = False) -> dict:
    torch.manual_seed(0)
    cfg = TFTConfig()
    model = TemporalFusionTransformer(cfg).to(device).train()
    b = make_batch(cfg, B, device)
    with FlopCounterMode(display=False) as fc: step_fn(model, b, autocast)()
    counted = fc.get_total_flops()
    if compiled: model.compile(cudagraphs=device.type == 'cuda')
    step = step_fn(model, b, autocast)
    total = counted + lstm_flops(cfg, B)
    t_model = timed(step, device, reps)
    n = 1024 if device.type == 'cuda' else 512
    work, k = matmul_reference(total, device, torch.bfloat16 if autocast else torch.float32, n)
    t_mm = timed(work, device, reps)
    return dict(cfg=cfg, params=sum(p.numel() for p in model.parameters()), counted=counted, total=total,
                t_model=t_model, t_mm=t_mm, k=k, n=n, rate_model=total / t_model, rate_mm=k * 2 * n ** 3 / t_mm)

def report(name: str, r: dict, B: int):
    print(f"\n[{name}] batch {B}: forward+backward {r['t_model'] * 1e3:.1f} ms/batch "
          f"({B / r['t_model']:,.0f} windows/s)")
    print(f"  FLOPs per batch: {r['total'] / 1e9:.2f} GFLOP ({r['counted'] / 1e9:.2f} counted by FlopCounterMode"
          f" + {(r['total'] - r['counted']) / 1e9:.2f} LSTM, analytic)")
    print(f"  model achieved: {r['rate_model'] / 1e9:.1f} GFLOP/s")
    print(f"  plain matmuls, {r['k']} x {r['n']}^3 (same FLOPs): {r['t_mm'] * 1e3:.1f} ms, "
          f"{r['rate_mm'] / 1e9:.1f} GFLOP/s"
          f" -> the model runs at {100 * r['rate_model'] / r['rate_mm']:.0f}% of the matmul rate")

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--reps', type=int, default=10)
    ap.add_argument('--threads', type=int, default=0, help='CPU threads (0: torch default)')
    ap.add_argument('--compile', action='store_true', help='TemporalFusionTransformer.compile() first')
    ap.add_argument('--cpu-bf16', action='store_true', help='CPU: also bf16 autocast (cpu_bf16)')
    ap.add_argument('--devices', default='cpu,cuda', help='where to run: cpu, cuda (when available), or both')
    ap.add_argument('--cuda-batches', default='32', help='batch sizes to run on CUDA, comma-separated')
    a = ap.parse_args()
    if a.threads: torch.set_num_threads(a.threads)
    keep_freed_memory()
    c = TFTConfig()
    print(f"TFTConfig: hidden {c.hidden_size}, heads {c.attention_heads}, LSTM layers {c.lstm_layers}, "
          f"dropout {c.dropout}, quantiles {c.quantiles}; "
          f"Te {c.encoder_length}, Td {c.horizon}, Ve {c.encoder_vars}, Vd {c.decoder_vars}, "
          f"static {c.static_cardinalities}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; median of {a.reps} after 3 warm-ups; "
          f"{'compiled' if a.compile else 'eager'}")
    if 'cpu' in a.devices:
        cpu = bench(torch.device('cpu'), a.batch, a.reps, autocast=False, compiled=a.compile)
        print(f"parameters: {cpu['params']:,}")
        report('cpu float32', cpu, a.batch)
        if a.cpu_bf16: report('cpu bf16', bench(torch.device('cpu'), a.batch, a.reps, True, a.compile), a.batch)
    if 'cuda' not in a.devices: return
    if not torch.cuda.is_available(): return print("\nCUDA: not available")
    dev = torch.device('cuda')
    fp32, bf16 = (peak_rate(dev, t) / 1e12 for t in (torch.float32, torch.bfloat16))
    print(f"\nCUDA: {torch.cuda.get_device_name(dev)}; 8192^3 matmuls: float32 {fp32:.1f} TFLOP/s, bf16 {bf16:.1f}")
    for B in map(int, a.cuda_batches.split(',')):
        report('cuda float32', bench(dev, B, max(a.reps, 50), autocast=False, compiled=a.compile), B)
        report('cuda bf16 autocast', bench(dev, B, max(a.reps, 50), autocast=True, compiled=a.compile), B)

if __name__ == '__main__':
    main()
