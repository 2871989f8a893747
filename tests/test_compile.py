"""`TrainConfig.compile` (issue 27): the compiled model trains like the eager one, in whole graphs, compiled once per
mode whatever the batch size. Inductor's C++ compiling takes minutes on two cores, so these tests compile with the
`aot_eager` backend: the same graph capture (Dynamo, fullgraph, the hashed dropout, AOT autograd) without code
generation, except for the hashed dropout's mask, compiled with inductor once; the speed of the inductor backend is
`bench/`'s business."""
import contextlib, logging
from unittest import mock
import pytest, torch
from tft_nb.data import load_sample
from tft_nb.data_config import DataConfig
from tft_nb.windows import make_windows
from tft_nb.model import TFTConfig, TemporalFusionTransformer
from tft_nb.train import TrainConfig
from tft_nb.fit import fit
from tft_nb import accelerate

pytestmark = pytest.mark.slow   # the second tier (pytest.ini)

COMPILE = accelerate.compile_stages


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


@contextlib.contextmanager
def hashed_dropout():
    "Every CPU dropout hashed, as in compiled code: in an eager model, and between the LSTMs' layers (run eagerly)."
    with mock.patch.object(accelerate, 'PACKED_MIN', 0), mock.patch.object(accelerate, 'packed_dropout',
                                                                           accelerate.hashed_dropout):
        yield


def test_compiled_training_is_the_eager_training(data, tmp_path, caplog):
    assert len(data.train) % 96 and len(data.val) % 256, 'the test needs short last batches'
    torch._dynamo.reset()
    aot = lambda model, **kw: COMPILE(model, backend='aot_eager', **kw)
    with mock.patch.object(accelerate, 'compile_stages', aot), hashed_dropout():
        torch._dynamo.utils.counters.clear()
        compiled, h1, log = train(data, tmp_path / 'compiled', True, caplog)
        graphs = torch._dynamo.utils.counters['stats']['unique_graphs']
    with hashed_dropout():
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
    COMPILE(model, backend='eager')
    with mock.patch.object(model.static, 'forward', lambda s: print('a graph break') or s):
        from tft_nb.windows import Batch
        b = Batch(torch.zeros(2, 1, dtype=torch.long), torch.randn(2, 6, 4), torch.randn(2, 3, 2), torch.randn(2, 3),
                  torch.arange(2), torch.arange(2))
        with pytest.raises(Exception, match='(?i)graph break|unsupported|print'):
            model(b)


def saved_bytes(f, x) -> int:
    "Bytes of the tensors that `f(x)`'s autograd graph keeps for the backward pass."
    sizes = []
    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t): f(x)
    return sum(sizes)


def test_compiled_dropout_keeps_a_seed_not_a_mask():
    x = torch.randn(16, 20, 8, requires_grad=True)
    torch._dynamo.reset()
    plain = torch.compile(torch.tanh, backend='aot_eager', fullgraph=True)
    dropped = torch.compile(lambda x: torch.tanh(accelerate.dropout(x, 0.3)), backend='aot_eager', fullgraph=True)
    assert saved_bytes(dropped, x) == saved_bytes(plain, x) + 8     # one int64 seed more


def test_the_hashed_mask_is_the_same_bits_compiled():
    torch._dynamo.reset()
    keep = torch.compile(accelerate.hashed_keep, fullgraph=True)       # inductor: the C++ kernel the models run
    for shape, s in (((4099,), 7), ((3, 50, 17), 2**31 - 1), ((2, 1024), 0)):
        seed = torch.tensor(s)
        assert torch.equal(keep(shape, seed, 0.1), accelerate.hashed_keep(shape, seed, 0.1)), (shape, s)
