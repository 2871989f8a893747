"""The gating blocks' formulations against the ones they replaced, on the CPU:
  - `VariableLinear` (V independent affine maps of a variable-first tensor): one `torch.baddbmm` over its (V, N, d_in)
    view, against an `einsum` followed by the bias;
  - `GatedLinearUnit`: `F.glu` on the doubled projection, against `chunk` + `sigmoid` + product;
  - `VariableLayerNorm`: `addcmul(bias, layer_norm(x), weight)`, against `layer_norm(x) * weight + bias`.

Prints, side by side in one run:
  1. forward + backward of one call of each at the shapes the TFT uses (static contexts (4, 32, H), decoder and
     encoder per-variable networks (2, 32, 5, H) and (6, 32, 60, H)), for H = 16 and H = 256, after checking that
     both formulations give the same result;
  2. training steps (zero_grad, forward, pinball loss, backward, fused Adam), batch 32, of the hidden-16 model (and,
     with --default-steps N > 0, the default hidden-256 one) with all three old or all three new, alternating so that
     machine noise hits both alike.
Usage: python bench/gating_bench.py [--steps N] [--default-steps N]
"""
import argparse, statistics, time
import torch, torch.nn.functional as F
import tft_nb.gating as G
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.loss import quantile_loss
from step_bench import make_batch, timed          # bench/ is on sys.path when this file runs as a script

CPU = torch.device('cpu')

def linear_einsum(self, x):
    bias = self.bias.view(len(self.bias), *[1] * (x.dim() - 2), -1)
    return torch.einsum('v...i,vio->v...o', x, self.weight) + bias

def glu_chunk(self, x):
    a, g = self.proj(self.drop(x)).chunk(2, dim=-1)
    return a * torch.sigmoid(g)

def norm_mul_add(self, x):
    shape = (len(x), *[1] * (x.dim() - 2), -1)
    return F.layer_norm(x, x.shape[-1:]) * self.weight.view(shape) + self.bias.view(shape)

OLD = {G.VariableLinear: linear_einsum, G.GatedLinearUnit: glu_chunk, G.VariableLayerNorm: norm_mul_add}
NEW = {cls: cls.forward for cls in OLD}

def use(forwards: dict):
    for cls, f in forwards.items(): cls.forward = f

def compare_calls():
    for H in (16, 256):
        for shape in ((4, 32, H), (2, 32, 5, H), (6, 32, 60, H)):
            V = shape[0]
            torch.manual_seed(0)
            mods = {'VariableLinear': G.VariableLinear(V, H, 2 * H),
                    'GatedLinearUnit': G.GatedLinearUnit(H, H, variables=V),
                    'VariableLayerNorm': G.VariableLayerNorm(V, H)}
            for name, m in mods.items():
                cls, d_out = type(m), 2 * H if name == 'VariableLinear' else H
                x, g = torch.randn(*shape, requires_grad=True), torch.randn(*shape[:-1], d_out)
                torch.testing.assert_close(NEW[cls](m, x), OLD[cls](m, x), rtol=1e-4, atol=1e-4)
                reps = 200 if x.numel() < 100_000 else 20
                a, b = (timed(lambda: f(m, x).backward(g), CPU, reps, 3) for f in (OLD[cls], NEW[cls]))
                print(f"{name:17s} forward+backward on {str(shape):16s}: old {a * 1e3:8.3f} ms, "
                      f"new {b * 1e3:8.3f} ms ({a / b:.2f}x)")

def compare_steps(steps, H, heads, B=32):
    torch.manual_seed(0)
    cfg = TFTConfig(hidden_size=H, attention_heads=heads)
    m = TemporalFusionTransformer(cfg).train()
    opt = torch.optim.Adam(m.parameters(), 1e-3, fused=True)
    batch, ts = make_batch(cfg, B, CPU), {'old': [], 'new': []}
    try:
        for i in range(steps + 2):
            for k, fs in (('old', OLD), ('new', NEW)):
                use(fs)
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                quantile_loss(m(batch).quantiles, batch.target, cfg.quantiles).backward()
                opt.step()
                if i >= 2: ts[k].append(time.perf_counter() - t0)
    finally: use(NEW)
    med = {k: statistics.median(v) for k, v in ts.items()}
    print(f"training step, hidden {H}, batch {B} (median of {steps}, alternating): old {med['old'] * 1e3:.1f} ms, "
          f"new {med['new'] * 1e3:.1f} ms; saving {100 * (1 - med['new'] / med['old']):.1f}%")

def main(steps=40, default_steps=0):
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, CPU")
    compare_calls()
    compare_steps(steps, 16, 2)
    if default_steps: compare_steps(default_steps, 256, 8)

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=40)
    ap.add_argument('--default-steps', type=int, default=0)
    main(**vars(ap.parse_args()))
