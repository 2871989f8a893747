"""CPU dropout: PyTorch's `F.dropout` against `tft_nb.accelerate.dropout` (on large CPU tensors `packed_dropout`: four
elements per random 64-bit draw; below 8192 elements `F.dropout` itself).

Prints, side by side in one run on the CPU:
  1. the time of one dropout call (p = 0.1) on the largest activation the TFT drops, the encoder's per-variable
     GRN input (B, Te, V, H) = (32, 60, 6, H), for H = 16 (the smoke run `tft_train --epochs 3 --hidden-size 16
     --attention-heads 2` that tests/test_cli.py runs) and H = 256 (the default);
  2. forward + backward of one call on small tensors, around the 8192 elements below which `dropout` calls
     `F.dropout` (the packed version's fixed cost of six small kernels outweighs the draws it saves there);
  3. the time of a training step (zero_grad, forward, pinball loss, backward, fused Adam), batch 32, of the
     smoke-run model (hidden 16, 2 heads) and of the default model (hidden 256, 8 heads), each built with
     `nn.Dropout` and with `tft_nb.accelerate.FastDropout`, the two steps alternating so that machine noise hits both
     alike (`fast_dropout` also makes the LSTMs `FastLSTM`s);
  4. forward + backward of the default model's encoder LSTM (2 layers, hidden 256, dropout 0.1 between them) on the
     encoder's (32, 60, 256) input, `nn.LSTM` against `tft_nb.accelerate.FastLSTM` (the same weights), alternating,
     in float32 and under bfloat16 autocast (what the CPU's default path runs where bf16 is native), with the median
     and min-max over rounds of the ratio FastLSTM / nn.LSTM.
Usage: python bench/dropout_bench.py [--steps N] [--default-steps N] [--lstm-rounds N]
"""
import argparse, statistics, time
import torch, torch.nn.functional as F
from torch import nn
import tft_nb.accelerate as G
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.loss import quantile_loss
from step_bench import make_batch, timed          # bench/ is on sys.path when this file runs as a script

CPU = torch.device('cpu')

def build(drop_cls, H=16, heads=2):
    "A TFT of the task's shape with dropout modules of class `drop_cls` (seeded: same weights for either class)."
    torch.manual_seed(0)
    cfg = TFTConfig(encoder_vars=6, decoder_vars=2, static_cardinalities=(2,), encoder_length=60, horizon=5,
                    hidden_size=H, attention_heads=heads)
    m = TemporalFusionTransformer(cfg).train()
    if drop_cls is G.FastDropout: G.fast_dropout(m)                      # as `accelerate` does for a run
    return m, torch.optim.Adam(m.parameters(), 1e-3, fused=True), cfg

def compare_steps(H, heads, steps):
    B = 32
    runs = {'nn.Dropout': build(nn.Dropout, H, heads), 'tft_nb Dropout': build(G.FastDropout, H, heads)}
    batch = make_batch(runs['nn.Dropout'][2], B, CPU)
    assert type(runs['tft_nb Dropout'][0].positionwise.gate_norm.glu.drop) is G.FastDropout
    assert type(runs['nn.Dropout'][0].positionwise.gate_norm.glu.drop) is nn.Dropout
    ts = {k: [] for k in runs}
    for i in range(steps + 3):
        for k, (m, opt, cfg) in runs.items():
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            quantile_loss(m(batch).quantiles, batch.target, cfg.quantiles).backward()
            opt.step()
            if i >= 3: ts[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in ts.items()}
    print(f"training step, hidden {H}, batch {B} (median of {steps}, alternating): "
          + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in med.items())
          + f"; saving {100 * (1 - med['tft_nb Dropout'] / med['nn.Dropout']):.1f}%")

def compare_lstm(rounds, reps=10):
    "Forward + backward of the encoder LSTM, `nn.LSTM` against `FastLSTM`: alternating, the median of `reps` calls."
    torch.manual_seed(0)
    fused = nn.LSTM(256, 256, 2, batch_first=True, dropout=0.1)
    fast = G.FastLSTM(256, 256, 2, batch_first=True, dropout=0.1)
    fast.load_state_dict(fused.state_dict())
    x, hx = torch.randn(32, 60, 256, requires_grad=True), (torch.zeros(2, 32, 256), torch.zeros(2, 32, 256))
    for bf16 in (False, True):
        def call(m):
            with torch.autocast('cpu', torch.bfloat16, enabled=bf16): out, _ = m(x, hx)
            out.float().sum().backward()
        ts, order = {'nn.LSTM': [], 'FastLSTM': []}, [('nn.LSTM', fused), ('FastLSTM', fast)]
        for r in range(rounds + 1):                                     # round 0 warms up, untimed
            for k, m in (order if r % 2 else order[::-1]):
                t = timed(lambda: call(m), CPU, reps, 0)
                if r: ts[k].append(t)
        ratios = [b / a for a, b in zip(ts['nn.LSTM'], ts['FastLSTM'])]
        print(f"encoder LSTM forward+backward, {'bf16 autocast' if bf16 else 'float32'} ({rounds} rounds of {reps}): "
              + ", ".join(f"{k} {statistics.median(v) * 1e3:.2f} ms" for k, v in ts.items())
              + f"; FastLSTM / nn.LSTM median {statistics.median(ratios):.3f}, min-max {min(ratios):.3f}-"
              + f"{max(ratios):.3f}")

def main(steps=40, default_steps=8, lstm_rounds=7):
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, CPU")
    for H in (16, 256):
        x = torch.randn(32, 60, 6, H)
        a, b = timed(lambda: F.dropout(x, 0.1, True), CPU, 200, 1), timed(lambda: G.dropout(x, 0.1), CPU, 200, 1)
        print(f"dropout on {tuple(x.shape)}: F.dropout {a * 1e3:.3f} ms, tft_nb dropout {b * 1e3:.3f} ms "
              f"({a / b:.1f}x)")
    for n in (512, 2048, 8192, 32768):
        x, g = torch.randn(n, requires_grad=True), torch.randn(n)
        a, b = (timed(lambda: f(x, 0.1).backward(g), CPU, 300, 5)
                for f in (lambda x, p: F.dropout(x, p, True), G.packed_dropout))
        print(f"forward+backward on {n} elements: F.dropout {a * 1e3:.3f} ms, packed_dropout {b * 1e3:.3f} ms "
              f"({a / b:.2f}x)")
    compare_steps(16, 2, steps)
    compare_steps(256, 8, default_steps)
    compare_lstm(lstm_rounds)

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=40)
    ap.add_argument('--default-steps', type=int, default=8)
    ap.add_argument('--lstm-rounds', type=int, default=7)
    main(**vars(ap.parse_args()))
