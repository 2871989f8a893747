"""Overhead of the global gradient norm in a training step (issue: must be < 0.5% of a step).

Times, side by side in one run, for the default TFT (hidden 256, 8 heads, 2 LSTM layers) on a batch of 32 windows
of the benchmark task's shape (60 past days, 5 ahead, 6 encoder and 2 decoder inputs, one static id):
  (a) a full training step as `tft_nb.fit.train_step` runs it (zero_grad, forward, loss, backward, norm, Adam step);
  (b) the same step without the norm;
  (c) the norm alone (`grad_norm` + `GradNormStats.update`) on the gradients of a real backward pass;
  (d) PyTorch's `get_total_norm` on the same gradients (what `grad_norm` uses on a GPU).
Steps (a) and (b) alternate so that machine noise hits both alike. Prints medians and the overhead ratios.
Usage: python bench/grad_norm_bench.py [--steps N] [--device cpu|cuda]
"""
import argparse, statistics, time
import torch
from tft_nb.windows import Batch
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.loss import quantile_loss
from tft_nb.train import grad_norm, GradNormStats

def sync(dev):
    if dev.type == 'cuda': torch.cuda.synchronize()

def main(steps=20, device='cpu'):
    dev = torch.device(device); torch.manual_seed(0)
    cfg = TFTConfig(encoder_vars=6, decoder_vars=2, static_cardinalities=(2,), encoder_length=60, horizon=5)
    m = TemporalFusionTransformer(cfg).to(dev); opt = torch.optim.Adam(m.parameters(), 1e-3)
    B = 32
    b = Batch(torch.randint(0, 2, (B, 1)), torch.randn(B, 60, 6), torch.randn(B, 5, 2), torch.randn(B, 5),
              torch.zeros(B, dtype=torch.long), torch.zeros(B, dtype=torch.long)).to(dev)
    stats = GradNormStats()
    def step(with_norm):
        opt.zero_grad(set_to_none=True)
        quantile_loss(m(b).quantiles, b.target, cfg.quantiles).backward()
        if with_norm: stats.update(grad_norm(m.parameters()))
        opt.step()
    for _ in range(3): step(True); step(False)
    ta, tb = [], []
    for _ in range(steps):
        for with_norm, acc in ((True, ta), (False, tb)):
            sync(dev); t0 = time.perf_counter(); step(with_norm); sync(dev); acc.append(time.perf_counter() - t0)
    tc = []
    for _ in range(200):
        sync(dev); t0 = time.perf_counter(); stats.update(grad_norm(m.parameters())); sync(dev); tc.append(time.perf_counter() - t0)
    td = []
    grads = [p.grad for p in m.parameters()]
    for _ in range(200):
        sync(dev); t0 = time.perf_counter(); torch.nn.utils.get_total_norm(grads, foreach=True); sync(dev); td.append(time.perf_counter() - t0)
    a, bb, c, d = statistics.median(ta), statistics.median(tb), statistics.median(tc), statistics.median(td)
    n = sum(p.numel() for p in m.parameters())
    print(f"device {dev}, torch {torch.__version__}, threads {torch.get_num_threads()}, params {n:,}, batch {B}")
    print(f"(a) step with norm     {a * 1e3:9.2f} ms (median of {steps})")
    print(f"(b) step without norm  {bb * 1e3:9.2f} ms")
    print(f"(c) norm alone         {c * 1e3:9.3f} ms (median of 200)")
    print(f"(d) torch.nn.utils.get_total_norm(foreach=True) alone, for comparison: {d * 1e3:.3f} ms")
    print(f"norm / step: {100 * c / a:.3f}%   (a-b)/b: {100 * (a - bb) / bb:+.2f}% (noise-limited A/B)")

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--steps', type=int, default=20); ap.add_argument('--device', default='cpu')
    main(**vars(ap.parse_args()))
