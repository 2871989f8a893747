"""Overhead of the global gradient norm in a training step (issue: must be < 0.5% of a step).

The default TFT (hidden 256, 8 heads, 2 LSTM layers, fused Adam as `fit` builds it) on batches of 32 windows of the
benchmark task's shape (60 past days, 5 ahead, 6 encoder and 2 decoder inputs, one static id). In one run:
  (a) full training steps, `tft_nb.train.train_step` itself (zero_grad, forward, loss, backward, norm, Adam step);
  (b) steps of a copy of `train_step` without the norm, alternating with (a) so that machine noise hits both alike;
  (c) inside the steps of (a), the time of the norm call alone (`grad_norm` is wrapped with a timer, so it is timed
      where it runs: right after the backward pass, on the gradients it just wrote) plus `GradNormStats.update`,
      which `fit` calls once per step: the norm's own time;
  (e) the tail of each step, where (a) and (b) differ: from the end of the backward pass to the end of `opt.step()`,
      that is norm + Adam in (a) and Adam alone in (b) (timed by the optimizer's step hooks). The forward and
      backward passes before it are the same code in both, so the difference of the tails is what the norm adds
      to a step: its own time, less what the Adam step saves by finding gradients the norm just read in cache;
  (d) the norm repeated 200 times on the same gradients (warm caches); for comparison, `get_total_norm` called on
      the gradients directly, and `dot_norm`, grad_norm's CPU path until 2026-12-07 (a BLAS dot product per
      gradient of 65,536 elements or more, the others' norms by the foreach kernel);
  (f) the host's time per call of grad_norm and of `get_total_norm` on one-element stand-ins for the model's
      gradients (alternating, no synchronisation): what each costs to launch, which counts where launches bound a step;
  (g) the norm against the cheapest read of the same fresh gradients (a plain sum of each, not a norm), alternating
      after backward passes: how far the norm is above what reading the gradients from memory costs at all.
Printed: the overhead, (e) with norm - (e) without, over (a); the norm's own time (c) over (a), which is larger by
the cache effect; and (a - b) / b, the A/B of whole steps, which on a shared machine is noisier than the norm.
On CUDA the steps run under bf16 autocast, as `fit` runs them, and (c) and (e) are read from CUDA events recorded
in the step (no synchronisation there, so the queue stays as full as in training): the GPU time between them,
which includes any wait for the host to launch the kernels.
Usage: python bench/grad_norm_bench.py [--steps N] [--device cpu|cuda]
                                      [--hidden 256 --heads 8 --lstm-layers 2 --batch 32]
"""
import argparse, statistics, time
import torch
import tft_nb.train as F
from step_bench import make_batch              # bench/ is on sys.path when this file runs as a script
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.loss import quantile_loss
from tft_nb.train import grad_norm, GradNormStats

def dot_norm(params, dot_min: int = 65536):
    "grad_norm's CPU path until 2026-12-07: a BLAS dot product per large gradient, the foreach kernel for the rest."
    grads = [p.grad for p in params if p.grad is not None]
    big, small = [g for g in grads if g.numel() >= dot_min], [g for g in grads if g.numel() < dot_min]
    rest = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(small))) if small else torch.zeros(())
    return torch.stack([torch.dot(g.reshape(-1), g.reshape(-1)) for g in big] + [rest.square()]).sum().sqrt()

def sync(dev):
    if dev.type == 'cuda': torch.cuda.synchronize()

def main(steps=20, device='cpu', hidden=256, heads=8, lstm_layers=2, batch=32):
    dev = torch.device(device)
    torch.manual_seed(0)
    cfg = TFTConfig(encoder_vars=6, decoder_vars=2, static_cardinalities=(2,), encoder_length=60, horizon=5,
                    hidden_size=hidden, attention_heads=heads, lstm_layers=lstm_layers)
    m = TemporalFusionTransformer(cfg).to(dev).train()
    opt = F.make_optimizer(m, F.TrainConfig())
    B = batch
    b = make_batch(cfg, B, dev)
    cuda = dev.type == 'cuda'
    def mark():                                   # a point in time: the CPU clock, or a CUDA event in the stream
                                                  # (no sync)
        if not cuda: return time.perf_counter()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e
    def secs(t0, t1): return t0.elapsed_time(t1) / 1e3 if cuda else t1 - t0
    stats, marks = GradNormStats(), {}
    def timed_norm(params):                       # replaces grad_norm inside tft_nb.train.train_step
        marks['tail'] = t0 = mark()               # the tail of a step with the norm starts here
        n = grad_norm(params)
        stats.update(n)
        marks['norm'] = (t0, mark())
        return n
    F.grad_norm = timed_norm
    def step_starts(*_):                          # the tail of a step without the norm starts with opt.step()
        if 'tail' not in marks: marks['tail'] = mark()
    opt.register_step_pre_hook(step_starts)
    opt.register_step_post_hook(lambda *_: marks.__setitem__('end', mark()))
    def forward_backward():                       # train_step's zero_grad, forward (bf16 on CUDA), loss and backward
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            pred = m(b).quantiles
        quantile_loss(pred.float(), b.target, cfg.quantiles).backward()
    def without_norm():                           # train_step minus the norm
        forward_backward()
        opt.step()
    with_norm = lambda: F.train_step(m, opt, [b], autocast=cuda)
    for _ in range(3):
        with_norm()
        without_norm()
    runs = {with_norm: [], without_norm: []}      # per step: (seconds, its marks)
    for _ in range(steps):
        for fn in runs:                           # alternating, so that machine noise hits both alike
            marks.clear()
            sync(dev)
            t0 = time.perf_counter()
            fn()
            sync(dev)
            runs[fn].append((time.perf_counter() - t0, dict(marks)))
    med = statistics.median
    a, bb = (med(t for t, _ in runs[fn]) for fn in (with_norm, without_norm))
    tail_a, tail_b = ([secs(mk['tail'], mk['end']) for _, mk in runs[fn]] for fn in (with_norm, without_norm))
    inside = [secs(*mk['norm']) for _, mk in runs[with_norm]]
    params = [p for g in opt.param_groups for p in g['params']]
    td, te = [], []
    for _ in range(200):
        sync(dev)
        t0 = time.perf_counter()
        stats.update(grad_norm(params))
        sync(dev)
        td.append(time.perf_counter() - t0)
    grads = [p.grad for p in params]
    for _ in range(200):
        sync(dev)
        t0 = time.perf_counter()
        torch.nn.utils.get_total_norm(grads, foreach=True)
        sync(dev)
        te.append(time.perf_counter() - t0)
    tg = []
    for _ in range(200):
        sync(dev)
        t0 = time.perf_counter()
        dot_norm(params)
        sync(dev)
        tg.append(time.perf_counter() - t0)
    floor = {'norm': lambda: grad_norm(params),   # each gathers the gradients from `params` itself, as a step would
             'sum': lambda: torch.stack([p.grad.sum() for p in params if p.grad is not None]).sum()}
    tf = {k: [] for k in floor}
    for i in range(2 * steps):                    # fresh gradients each time, read right after the backward pass,
                                                  # as in a step
        k = list(floor)[i % 2]
        forward_backward()
        sync(dev)
        t0 = time.perf_counter()
        floor[k]()
        sync(dev)
        tf[k].append(time.perf_counter() - t0)
    stand_ins = [torch.nn.Parameter(torch.zeros(1, device=dev)) for _ in params]
    for q in stand_ins: q.grad = torch.ones(1, device=dev)
    host = {'grad_norm': lambda: grad_norm(stand_ins),
            'get_total_norm': lambda: torch.nn.utils.get_total_norm([q.grad for q in stand_ins], foreach=True)}
    th = {k: [] for k in host}
    for i in range(2000):
        for k, fn in host.items():
            t0 = time.perf_counter()
            fn()
            th[k].append(time.perf_counter() - t0)
        if i % 100 == 99: sync(dev)               # keep the launch queue short
    c, d, e = med(inside), med(td), med(te)
    added = med(tail_a) - med(tail_b)
    n = sum(p.numel() for p in params)
    print(f"device {torch.cuda.get_device_name() if cuda else dev}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, bf16 autocast {cuda}, hidden {hidden}, heads {heads}, "
          f"LSTM layers {lstm_layers}, params {n:,}, batch {B}")
    print(f"(a) train_step (with norm)          {a * 1e3:9.2f} ms (median of {steps})")
    print(f"(b) the same step without the norm  {bb * 1e3:9.2f} ms (median of {steps}, alternating with (a))")
    print(f"(c) norm + stats inside (a)         {c * 1e3:9.3f} ms (median of {steps}; "
          f"min {min(inside) * 1e3:.3f}, max {max(inside) * 1e3:.3f})")
    print(f"(d) norm + stats, warm, repeated    {d * 1e3:9.3f} ms (median of 200)")
    print(f"    dot_norm (the CPU path before), warm: {med(tg) * 1e3:.3f} ms;   "
          f"torch.nn.utils.get_total_norm(foreach=True), warm: {e * 1e3:.3f} ms (medians of 200)")
    print(f"(e) step tail, backward end to opt.step end: norm + Adam {med(tail_a) * 1e3:.2f} ms in (a), "
          f"Adam alone {med(tail_b) * 1e3:.2f} ms in (b): "
          f"the norm adds {added * 1e3:.3f} ms (medians of {steps})")
    print(f"overhead of the norm, (e)/(a): {100 * added / a:.3f}% of a step;   "
          f"its own time, (c)/(a): {100 * c / a:.3f}% (max single step {100 * max(inside) / a:.3f}%);   "
          f"(a-b)/b: {100 * (a - bb) / bb:+.2f}% (noise-limited A/B of whole steps)")
    print(f"(f) host time per call on {len(params)} one-element gradients: "
          f"grad_norm {med(th['grad_norm']) * 1e6:.1f} us, "
          f"get_total_norm {med(th['get_total_norm']) * 1e6:.1f} us (medians of 2000, alternating)")
    print(f"(g) reading every gradient once right after the backward pass: grad_norm {med(tf['norm']) * 1e3:.3f} ms, "
          f"a plain sum of each (not a norm; the cheapest reduction that reads them) {med(tf['sum']) * 1e3:.3f} ms "
          f"(medians of {steps}, alternating)")

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=20)
    ap.add_argument('--device', default='cpu')
    for k, v in (('hidden', 256), ('heads', 8), ('lstm-layers', 2), ('batch', 32)):
        ap.add_argument(f'--{k}', type=int, default=v)
    main(**vars(ap.parse_args()))
