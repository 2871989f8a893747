"""`TrainConfig.compile` (issue 27): the compiled model trains like the eager one, in whole graphs, compiled once per
mode whatever the batch size. Inductor's C++ compiling takes minutes on two cores, so these tests compile with the
`aot_eager` backend: the same graph capture (Dynamo, fullgraph, the `keep_mask` operator, AOT autograd) without code
generation; the speed of the inductor backend is `bench/`'s business."""
import logging
from unittest import mock
import pytest, torch
from tft_nb.data import load_sample
from tft_nb.windows import DataConfig, make_windows
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.train import TrainConfig
from tft_nb.fit import fit
from tft_nb import gating

COMPILE = TemporalFusionTransformer.compile


@pytest.fixture(scope='module')
def data():
    bars = load_sample()
    return make_windows(bars[bars.ts_event >= '2016-01-01'], DataConfig(encoder_length=20, horizon=3))


def train(data, tmp_path, compiled: bool, caplog):
    "Two epochs of a tiny model with dropout; the model, its history, and the log."
    torch.manual_seed(0)
    model = TemporalFusionTransformer(TFTConfig(**data.spec.model_sizes(), hidden_size=8, attention_heads=2,
                                                lstm_layers=2, dropout=0.3))
    cfg = TrainConfig(epochs=2, batch_size=96, device='cpu', compile=compiled, checkpoint_dir=str(tmp_path),
                      checkpoint_frequency=0)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger='tft_nb'):
        out = fit(model, data, cfg, progress=False)
    return model, out.history, caplog.text


def test_compiled_training_is_the_eager_training(data, tmp_path, caplog):
    assert len(data.train) % 96 and len(data.val) % 256, 'the test needs short last batches'
    torch._dynamo.reset()
    aot = lambda self, **kw: COMPILE(self, backend='aot_eager', **kw)
    with mock.patch.object(TemporalFusionTransformer, 'compile', aot):
        torch._dynamo.utils.counters.clear()
        compiled, h1, log = train(data, tmp_path / 'compiled', True, caplog)
        graphs = torch._dynamo.utils.counters['stats']['unique_graphs']
    with mock.patch.object(gating, 'PACKED_MIN', 0):                # eager dropout as the compiled model's
        eager, h0, log0 = train(data, tmp_path / 'eager', False, caplog)
    assert 'torch.compile: the training and evaluation graphs compiled in' in log
    assert 'torch.compile' not in log0
    assert graphs == 4, f'{graphs} graphs: two stages, training and evaluation, and no recompiles for other sizes'
    losses = ['train_loss', 'val_loss']
    assert h1[losses].to_numpy() == pytest.approx(h0[losses].to_numpy(), abs=1e-6)
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name


def test_a_graph_break_is_an_error():
    model = TemporalFusionTransformer(TFTConfig(encoder_vars=4, decoder_vars=2, encoder_length=6, horizon=3,
                                                hidden_size=8, attention_heads=2, lstm_layers=1))
    torch._dynamo.reset()
    model.compile(backend='eager')
    with mock.patch.object(model.static, 'forward', lambda s: print('a graph break') or s):
        from tft_nb.windows import Batch
        b = Batch(torch.zeros(2, 1, dtype=torch.long), torch.randn(2, 6, 4), torch.randn(2, 3, 2), torch.randn(2, 3),
                  torch.arange(2), torch.arange(2))
        with pytest.raises(Exception, match='(?i)graph break|unsupported|print'):
            model(b)
