"""`TrainConfig.cpu_bf16` (issue 27): bfloat16 autocast on the CPU. A run with it trains under autocast (other
arithmetic than float32, close to it), repeats bit for bit, and resumes bit for bit, as a float32 run does."""
import logging
import pytest, torch
from tft_nb.data import load_sample
from tft_nb.data_config import DataConfig
from tft_nb.windows import make_windows
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.train import TrainConfig
from tft_nb.fit import fit

pytestmark = pytest.mark.slow   # the second tier (pytest.ini)


@pytest.fixture(scope='module')
def data():
    bars = load_sample()
    return make_windows(bars[bars.ts_event >= '2016-01-01'], DataConfig(encoder_length=20, horizon=3))


def train(data, folder, caplog, cpu_bf16: bool, epochs: int = 2, resume: str | None = None):
    "A tiny model with dropout trained on the CPU; the model, its history, and the log."
    torch.manual_seed(0)
    model = TemporalFusionTransformer(TFTConfig(**data.spec.model_sizes(), hidden_size=8, attention_heads=2,
                                                lstm_layers=2, dropout=0.3))
    cfg = TrainConfig(epochs=epochs, batch_size=96, device='cpu', cpu_bf16=cpu_bf16, checkpoint_dir=str(folder),
                      checkpoint_frequency=0, calibrate=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger='tft_nb'):
        out = fit(model, data, cfg, resume=resume, progress=False)
    return model, out.history, caplog.text


def differing(a, b) -> list[str]:
    "Names of the parameters that differ between two models."
    return [n for (n, p), q in zip(a.named_parameters(), b.parameters()) if not torch.equal(p, q)]


def test_cpu_bf16_trains_under_autocast_and_repeats(data, tmp_path, caplog):
    m1, h1, log1 = train(data, tmp_path / 'a', caplog, True)
    m2, h2, _ = train(data, tmp_path / 'b', caplog, True)
    m0, h0, log0 = train(data, tmp_path / 'fp32', caplog, False)
    assert 'bf16 autocast' in log1 and 'parameters on cpu, fp32' in log0
    assert differing(m1, m2) == [] and h1.train_loss.tolist() == h2.train_loss.tolist()
    assert h1.train_loss.tolist() != h0.train_loss.tolist(), 'autocast changed no arithmetic'
    assert h1.val_loss.to_numpy() == pytest.approx(h0.val_loss.to_numpy(), rel=0.05)
    assert all(p.dtype == torch.float32 for p in m1.parameters())     # weights stay float32 under autocast


def test_cpu_bf16_resumes_bit_for_bit(data, tmp_path, caplog):
    full, hf, _ = train(data, tmp_path / 'full', caplog, True, epochs=2)
    train(data, tmp_path / 'cut', caplog, True, epochs=1)
    resumed, hr, log = train(data, tmp_path / 'cut', caplog, True, epochs=2, resume='last')
    assert 'bf16 autocast' in log
    assert differing(full, resumed) == []
    assert hr.val_loss.tolist() == hf.val_loss.tolist()
