"""Overhead of the global gradient norm in a training step (issue: must be < 0.5% of a step).

The default TFT (hidden 256, 8 heads, 2 LSTM layers, fused Adam as `fit` builds it) on batches of 32 windows of the
benchmark task's shape (60 past days, 5 ahead, 6 encoder and 2 decoder inputs, one static id). In one run:
  (a) full training steps, `tft_nb.fit.train_step` itself (zero_grad, forward, loss, backward, norm, Adam step);
  (c) inside those same steps, the time of the norm call alone (`grad_norm` is wrapped with a timer, so it is timed
      where it runs: right after the backward pass, on the gradients it just wrote) plus `GradNormStats.update`,
      which `fit` calls once per step;
  (b) steps of a copy of `train_step` without the norm, alternating with (a) so that machine noise hits both alike;
  (d) the norm repeated 200 times on the same gradients (warm caches), and `torch.nn.utils.get_total_norm`
      (what `grad_norm` uses on a GPU) for comparison;
  (e) after a fresh backward pass each time (untimed), norm + Adam step against Adam step alone, alternating:
      whether reading the gradients for the norm makes the optimizer's own read of them cheaper (it would if the
      marginal cost were below the norm's own time).
The overhead is (c) / (a). (a) - (b) is printed too, but on a shared machine its noise is larger than the norm.
On CUDA the steps run under bf16 autocast, as `fit` runs them, and (c) is read from CUDA events recorded around the
norm inside the step (no synchronisation there, so the queue stays as full as in training): the GPU time between
them, which includes any wait for the host to launch the norm's kernels.
Usage: python bench/grad_norm_bench.py [--steps N] [--device cpu|cuda] [--hidden 256 --heads 8 --lstm-layers 2 --batch 32]
"""
import argparse, statistics, time
import torch
import tft_nb.fit as F
from model_bench import make_batch              # bench/ is on sys.path when this file runs as a script
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.loss import quantile_loss
from tft_nb.train import grad_norm, GradNormStats

def sync(dev):
    if dev.type == 'cuda': torch.cuda.synchronize()

def main(steps=20, device='cpu', hidden=256, heads=8, lstm_layers=2, batch=32):
    dev = torch.device(device); torch.manual_seed(0)
    cfg = TFTConfig(encoder_vars=6, decoder_vars=2, static_cardinalities=(2,), encoder_length=60, horizon=5,
                    hidden_size=hidden, attention_heads=heads, lstm_layers=lstm_layers)
    m = TemporalFusionTransformer(cfg).to(dev).train(); opt = F._make_optimizer(m, F.TrainConfig())
    B = batch
    b = make_batch(cfg, B, dev)
    stats, inside, events, cuda = GradNormStats(), [], [], dev.type == 'cuda'
    def timed_norm(params):                       # replaces grad_norm inside tft_nb.fit.train_step
        if cuda:                                  # GPU time between two events: no sync inside the step
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); n = grad_norm(params); stats.update(n); e1.record(); events.append((e0, e1))
            return n
        t0 = time.perf_counter()
        n = grad_norm(params); stats.update(n)
        inside.append(time.perf_counter() - t0)
        return n
    F.grad_norm = timed_norm
    def forward_backward():                       # train_step's zero_grad, forward (bf16 on CUDA), loss and backward
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            pred = m(b).quantiles
        quantile_loss(pred.float(), b.target, cfg.quantiles).backward()
    def without_norm():                           # train_step minus the norm
        forward_backward(); opt.step()
    for _ in range(3): F.train_step(m, opt, [b], autocast=cuda); without_norm()
    inside.clear(); events.clear()
    ta, tb = [], []
    for _ in range(steps):
        for fn, acc in ((lambda: F.train_step(m, opt, [b], autocast=cuda), ta), (without_norm, tb)):
            sync(dev); t0 = time.perf_counter(); fn(); sync(dev); acc.append(time.perf_counter() - t0)
    if cuda: sync(dev); inside = [e0.elapsed_time(e1) / 1e3 for e0, e1 in events]
    params = [p for g in opt.param_groups for p in g['params']]
    td, te = [], []
    for _ in range(200):
        sync(dev); t0 = time.perf_counter(); stats.update(grad_norm(params)); sync(dev); td.append(time.perf_counter() - t0)
    grads = [p.grad for p in params]
    for _ in range(200):
        sync(dev); t0 = time.perf_counter(); torch.nn.utils.get_total_norm(grads, foreach=True); sync(dev); te.append(time.perf_counter() - t0)
    tn, to = [], []
    for i in range(2 * steps + 4):
        with_norm = i % 2 == 0
        forward_backward()
        sync(dev); t0 = time.perf_counter()
        if with_norm: grad_norm(params)
        opt.step(); sync(dev)
        if i >= 4: (tn if with_norm else to).append(time.perf_counter() - t0)
    med = statistics.median
    a, bb, c, d, e = med(ta), med(tb), med(inside), med(td), med(te)
    n = sum(p.numel() for p in params)
    print(f"device {torch.cuda.get_device_name() if cuda else dev}, torch {torch.__version__}, threads {torch.get_num_threads()}, bf16 autocast {cuda}, hidden {hidden}, heads {heads}, "
          f"LSTM layers {lstm_layers}, params {n:,}, batch {B}")
    print(f"(a) train_step (with norm)          {a * 1e3:9.2f} ms (median of {steps})")
    print(f"(b) the same step without the norm  {bb * 1e3:9.2f} ms (median of {steps}, alternating with (a))")
    print(f"(c) norm + stats inside (a)         {c * 1e3:9.3f} ms (median of {steps}; min {min(inside) * 1e3:.3f}, max {max(inside) * 1e3:.3f})")
    print(f"(d) norm + stats, warm, repeated    {d * 1e3:9.3f} ms (median of 200)")
    print(f"    torch.nn.utils.get_total_norm(foreach=True), warm: {e * 1e3:.3f} ms (median of 200)")
    print(f"(e) norm + Adam step {med(tn) * 1e3:.2f} ms, Adam step alone {med(to) * 1e3:.2f} ms: marginal {(med(tn) - med(to)) * 1e3:.3f} ms (medians of {steps})")
    print(f"overhead (c)/(a): {100 * c / a:.3f}% of a step (max single step {100 * max(inside) / a:.3f}%);"
          f"   (a-b)/b: {100 * (a - bb) / bb:+.2f}% (noise-limited A/B)")

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--steps', type=int, default=20); ap.add_argument('--device', default='cpu')
    for k, v in (('hidden', 256), ('heads', 8), ('lstm-layers', 2), ('batch', 32)): ap.add_argument(f'--{k}', type=int, default=v)
    main(**vars(ap.parse_args()))
