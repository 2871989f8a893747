"""`VariableLinear` (V independent affine maps, used by the variable selection networks and the static context GRN):
one `torch.baddbmm` over a (V, N, d_in) view against the `einsum` formulation it replaced.

Prints, side by side in one run on the CPU:
  1. forward + backward of one call at the shapes the TFT uses (static contexts (32, 4, H), decoder and encoder
     per-variable GRNs (32, 5, 2, H) and (32, 60, 6, H)), for H = 16 and H = 256, and that both give the same result;
  2. training steps (zero_grad, forward, pinball loss, backward, fused Adam), batch 32, of the hidden-16 model with
     either forward, alternating so that machine noise hits both alike.
Usage: python bench/variable_linear_bench.py [--steps N]
"""
import argparse, statistics, time
import torch
import tft_nb.gating as G
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.loss import quantile_loss
from model_bench import make_batch, timed          # bench/ is on sys.path when this file runs as a script

CPU = torch.device('cpu')
BADDBMM = G.VariableLinear.forward

def einsum_forward(self, x):
    "The earlier formulation: one einsum, then the bias."
    return torch.einsum('...vi,vio->...vo', x, self.weight) + self.bias

def call(fwd, lin, x, g):
    "Forward with `fwd` and backward with upstream gradient `g`."
    fwd(lin, x).backward(g)

def compare_calls():
    for H in (16, 256):
        for shape in ((32, 4, H), (32, 5, 2, H), (32, 60, 6, H)):
            torch.manual_seed(0)
            lin = G.VariableLinear(shape[-2], H, 2 * H)               # the GLU's map, the widest per-variable one
            x, g = torch.randn(*shape, requires_grad=True), torch.randn(*shape[:-1], 2 * H)
            torch.testing.assert_close(BADDBMM(lin, x), einsum_forward(lin, x), rtol=1e-4, atol=1e-4)
            reps = 200 if x.numel() < 100_000 else 20
            a, b = (timed(lambda: call(f, lin, x, g), CPU, reps, 3) for f in (einsum_forward, BADDBMM))
            print(f"forward+backward on {shape} -> {2 * H}: einsum {a * 1e3:.3f} ms, baddbmm {b * 1e3:.3f} ms ({a / b:.2f}x)")

def compare_steps(steps, H=16, heads=2, B=32):
    torch.manual_seed(0)
    cfg = TFTConfig(hidden_size=H, attention_heads=heads)
    m = TemporalFusionTransformer(cfg).train(); opt = torch.optim.Adam(m.parameters(), 1e-3, fused=True)
    batch, ts = make_batch(cfg, B, CPU), {'einsum': [], 'baddbmm': []}
    try:
        for i in range(steps + 3):
            for k, f in (('einsum', einsum_forward), ('baddbmm', BADDBMM)):
                G.VariableLinear.forward = f
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True); quantile_loss(m(batch).quantiles, batch.target, cfg.quantiles).backward(); opt.step()
                if i >= 3: ts[k].append(time.perf_counter() - t0)
    finally: G.VariableLinear.forward = BADDBMM
    med = {k: statistics.median(v) for k, v in ts.items()}
    print(f"training step, hidden {H}, batch {B} (median of {steps}, alternating): "
          + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in med.items())
          + f"; saving {100 * (1 - med['baddbmm'] / med['einsum']):.1f}%")

def main(steps=40):
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, CPU")
    compare_calls()
    compare_steps(steps)

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--steps', type=int, default=40)
    main(**vars(ap.parse_args()))
