"Fault tests: a failed or killed checkpoint write never leaves a torn file under a final name."
import os, signal, subprocess, sys, textwrap, time
from pathlib import Path
import pytest, torch
from safetensors.torch import load_file
from tft_nb.checkpoint import save_checkpoint, load_checkpoint, CheckpointError
import tft_nb.checkpoint as ckmod

def _w(v): return {'w': torch.full((1000,), float(v))}

def test_failed_rename_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / 'tft_last', _w(1), dict(epoch=1))
    def boom(*a): raise OSError('disk full')
    monkeypatch.setattr(ckmod.os, 'replace', boom)
    with pytest.raises(OSError): save_checkpoint(tmp_path / 'tft_last', _w(2), dict(epoch=2))
    monkeypatch.undo()
    w, side, _ = load_checkpoint(tmp_path / 'tft_last')
    assert side['epoch'] == 1 and torch.equal(w['w'], _w(1)['w'])
    assert sorted(os.listdir(tmp_path)) == ['tft_last.json', 'tft_last.safetensors']   # no temporaries left

def test_crash_between_weights_and_sidecar_is_detected(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / 'tft_last', _w(1), dict(epoch=1))
    real = ckmod.atomic_write
    def fail_on_json(path, data):
        if str(path).endswith('.json'): raise OSError('killed')
        real(path, data)
    monkeypatch.setattr(ckmod, 'atomic_write', fail_on_json)
    with pytest.raises(OSError): save_checkpoint(tmp_path / 'tft_last', _w(2), dict(epoch=2))
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match='does not match its sidecar'): load_checkpoint(tmp_path / 'tft_last')

CHILD = textwrap.dedent('''
    import sys, torch
    from tft_nb.checkpoint import save_checkpoint
    i = 0
    while True:
        i += 1
        save_checkpoint(sys.argv[1] + '/tft_last', {'w': torch.full((2_000_000,), float(i))}, dict(epoch=i), {'s': torch.ones(500_000) * i})
''')

@pytest.mark.parametrize('delay', [0.3, 0.55, 0.8, 1.1])
def test_sigkill_during_writes(tmp_path, delay):
    p = subprocess.Popen([sys.executable, '-c', CHILD, str(tmp_path)])
    time.sleep(delay + 1.0)   # the child imports torch first (about a second)
    p.send_signal(signal.SIGKILL); p.wait()
    finals = [f for f in tmp_path.iterdir() if not f.name.startswith('.')]
    for f in finals:
        if f.suffix == '.safetensors': load_file(str(f))       # never torn: a complete safetensors file
    if not (tmp_path / 'tft_last.json').exists(): return          # killed before the first checkpoint completed
    try:
        w, side, ts = load_checkpoint(tmp_path / 'tft_last', train_state=True)
        assert float(w['w'][0]) == side['epoch'] == float(ts['s'][0])   # the parts belong together
    except CheckpointError as e:
        assert 'does not match its sidecar' in str(e)                  # killed between two renames: refused, not mixed

def test_failed_forecast_write_keeps_the_old_file(tmp_path, monkeypatch):
    "tft_predict writes its CSV atomically: a failure at the rename leaves the earlier forecasts whole and no temporary."
    from tft_nb.cli import tft_train, tft_predict
    tft_train(epochs=1, hidden_size=8, attention_heads=2, lstm_layers=1, batch_size=256, encoder_length=20, checkpoint_dir=str(tmp_path / 'ck'))
    out = tmp_path / 'fc' / 'forecasts.csv'
    tft_predict(checkpoint=str(tmp_path / 'ck' / 'tft_best'), output=str(out))
    before = out.read_bytes()
    def boom(*a): raise OSError('disk full')
    monkeypatch.setattr(ckmod.os, 'replace', boom)
    with pytest.raises(OSError): tft_predict(checkpoint=str(tmp_path / 'ck' / 'tft_best'), output=str(out), split='test')
    monkeypatch.undo()
    assert out.read_bytes() == before and os.listdir(out.parent) == ['forecasts.csv']
