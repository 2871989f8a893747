"""Peak memory through the phases of a run of `fit`: the process's peak RSS (`ru_maxrss`) printed at each line the run
logs (its configuration, each epoch, the checkpoints' summary, the calibrations), so that a rise shows which phase
made it. The task's windows (`bench/TASK.md`), the original configuration (hidden 256, 8 heads, 2 LSTM layers,
batch 32) or the sizes given, float32 on the CPU, checkpoints in a temporary folder (`fit`'s defaults: one every 5
epochs and at the last). Its last line is the run's end, as `peer_bench.py`'s `rss` is.
Run: `python bench/fit_memory.py [--epochs 1] [--hidden 256 --heads 8 --lstm 2 --batch 32] [--threads 2]`."""
from __future__ import annotations
import argparse, logging, tempfile
from peer_bench import rss_mib   # bench/ is on sys.path when a script there runs


class PeakAtEachLine(logging.Handler):
    "Print the peak RSS so far beside each line the run logs (but the settings)."
    def emit(self, record):
        line = record.getMessage()
        if line.startswith(' '): return                                  # the configuration's settings
        print(f"peak {rss_mib():7.1f} MiB  {line[:100]}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--epochs', type=int, default=1)
    p.add_argument('--hidden', type=int, default=256)
    p.add_argument('--heads', type=int, default=8)
    p.add_argument('--lstm', type=int, default=2)
    p.add_argument('--batch', type=int, default=32)
    p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    import torch
    from tft_nb.data import load_sample
    from tft_nb.data_config import PRESETS
    from tft_nb.windows import make_windows
    from tft_nb.model import TFTConfig, TemporalFusionTransformer
    from tft_nb.train import TrainConfig
    from tft_nb.fit import fit
    torch.set_num_threads(a.threads)
    log = logging.getLogger('fit_memory')
    log.addHandler(PeakAtEachLine())
    log.propagate = False
    log.setLevel(logging.INFO)
    data = make_windows(load_sample(), PRESETS['ohlcv_gk_logvol_tft_v1'])
    print(f"peak {rss_mib():7.1f} MiB  the task's windows made ({len(data.train)} training)", flush=True)
    torch.manual_seed(1)
    model = TemporalFusionTransformer(TFTConfig(**data.spec.model_sizes(), hidden_size=a.hidden,
                                                attention_heads=a.heads, lstm_layers=a.lstm))
    with tempfile.TemporaryDirectory() as d:
        cfg = TrainConfig(epochs=a.epochs, batch_size=a.batch, grad_clip=1.0, checkpoint_dir=d, device='cpu')
        fit(model, data, cfg, log=log)
    print(f"peak {rss_mib():7.1f} MiB  end", flush=True)


if __name__ == '__main__': main()
