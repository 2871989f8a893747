"""Checks that need CUDA, run by `tools/gpu_check.sh` on a GPU machine (`python -m pytest -q tests/cuda_checks.py`);
not collected by the CPU test run (the name does not start with `test_`). `fit` compiles with CUDA graphs on a GPU
(`compile_stages(model, cudagraphs=True)`, 24_accelerate): the compiled run must train like the eager one, record its
graphs without falling back, keep every batch's forecasts intact, and bf16 autocast must train, with the LSTMs
in float32 (on the CPU they follow autocast, 06_model)."""
import logging
import pytest, torch
from tft_nb.data import load_sample
from tft_nb.data_config import DataConfig
from tft_nb.windows import make_windows
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.train import TrainConfig
from tft_nb.fit import fit
from tft_nb.evaluate import predict
from tft_nb.accelerate import compile_stages

if not torch.cuda.is_available(): raise SystemExit('tests/cuda_checks.py needs CUDA')


@pytest.fixture(scope='module')
def data():
    bars = load_sample()
    return make_windows(bars[bars.ts_event >= '2016-01-01'], DataConfig(encoder_length=20, horizon=3))


def model_for(data, dropout: float) -> TemporalFusionTransformer:
    torch.manual_seed(0)
    return TemporalFusionTransformer(TFTConfig(**data.spec.model_sizes(), hidden_size=16, attention_heads=2,
                                               lstm_layers=2, dropout=dropout))


def train(data, tmp_path, caplog, compiled: bool, bf16: bool = False, dropout: float = 0.0):
    "Two epochs on CUDA; the model, its history, and the log."
    model = model_for(data, dropout)
    cfg = TrainConfig(epochs=2, batch_size=96, device='cuda', bf16=bf16, compile=compiled, checkpoint_dir=str(tmp_path),
                      checkpoint_frequency=0, calibrate=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger='tft_nb'):
        out = fit(model, data, cfg, progress=False)
    return model, out.history, caplog.text


def test_cuda_graphs_train_like_eager(data, tmp_path, caplog):
    assert len(data.train) % 96, 'the test needs a short last batch'
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled, h1, log = train(data, tmp_path / 'graphs', caplog, True)
    graphs = torch._dynamo.utils.counters['stats']['unique_graphs']
    skips = dict(torch._dynamo.utils.counters['inductor'])
    eager, h0, _ = train(data, tmp_path / 'eager', caplog, False)
    assert 'torch.compile: the training and evaluation graphs compiled in' in log
    assert graphs == 4, f'{graphs} graphs: two stages, training and evaluation, and no recompiles for other sizes'
    assert not skips.get('cudagraph_skips'), f'CUDA graphs were skipped: {skips}'
    losses = ['train_loss', 'val_loss']          # fused kernels round differently: 0.14% apart after 2 CPU epochs
    assert h1[losses].to_numpy() == pytest.approx(h0[losses].to_numpy(), rel=1e-2)
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        assert torch.allclose(p, q, atol=1e-2), name


def test_cuda_graph_forecasts_of_every_batch_are_kept(data):
    torch._dynamo.reset()
    model = model_for(data, 0.1).cuda().eval()
    windows = data.val.to('cuda')
    eager = predict(model, windows, batch_size=64)
    compile_stages(model, cudagraphs=True)
    for _ in range(3): graphs = predict(model, windows, batch_size=64)   # warm-up, recording, replays
    assert len(windows) > 3 * 64
    torch.testing.assert_close(graphs, eager, atol=1e-4, rtol=1e-4)


def test_dropout_under_cuda_graphs_trains(data, tmp_path, caplog):
    torch._dynamo.reset()
    _, h, log = train(data, tmp_path / 'dropout', caplog, True, bf16=True, dropout=0.3)   # compiled: packed masks
    assert 'bf16 autocast' in log
    assert h[['train_loss', 'val_loss']].notna().all().all() and (h.train_loss < 10).all(), h


def test_bf16_trains(data, tmp_path, caplog):
    _, h, log = train(data, tmp_path / 'bf16', caplog, False, bf16=True, dropout=0.1)
    assert 'bf16 autocast' in log
    assert h.val_loss.iloc[-1] < h.val_loss.iloc[0] * 1.5 and h.val_loss.notna().all(), h


def test_lstms_stay_float32_under_cuda_autocast(data):
    model = model_for(data, 0.0).cuda()
    dtypes = []
    hook = model.lstm_encoder.register_forward_hook(lambda mod, args, out: dtypes.append(out[0].dtype))
    batch = data.val.to('cuda').batch(torch.arange(8, device='cuda'))
    with torch.no_grad(), torch.autocast('cuda', dtype=torch.bfloat16): model(batch)
    hook.remove()
    assert dtypes == [torch.float32], dtypes
