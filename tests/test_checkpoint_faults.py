"Fault tests: a failed or killed checkpoint write never leaves a torn file under a final name."
import os, signal, subprocess, sys, textwrap
import pytest, torch
from safetensors.torch import load_file
from tft_nb.checkpoint import save_checkpoint, load_checkpoint, tidy_leftovers
import tft_nb.checkpoint as ckmod
import procs

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

def test_failed_sidecar_rename_puts_the_old_files_back(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / 'tft_last', _w(1), dict(epoch=1), _w(1))
    real = os.replace
    def fail_on_json(a, b):
        if str(b).endswith('.json'): raise OSError('killed')
        real(a, b)
    monkeypatch.setattr(ckmod.os, 'replace', fail_on_json)
    with pytest.raises(OSError): save_checkpoint(tmp_path / 'tft_last', _w(2), dict(epoch=2), _w(2))
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ['tft_last.json', 'tft_last.safetensors', 'tft_last.train.safetensors']
    assert float(load_file(str(tmp_path / 'tft_last.safetensors'))['w'][0]) == 1.0   # the old file itself, for readers
    w, side, ts = load_checkpoint(tmp_path / 'tft_last', train_state=True)
    assert side['epoch'] == 1 and float(w['w'][0]) == float(ts['w'][0]) == 1.0

KILL = textwrap.dedent('''
    import os, sys, torch
    import tft_nb.checkpoint as ck
    d, fn, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
    save = lambda i: ck.save_checkpoint(d + '/tft_last', {'w': torch.full((1000,), float(i))}, dict(epoch=i),
                                        {'s': torch.full((10,), float(i))})
    save(1)
    real, calls = getattr(os, fn), []
    def dying(*a, **k):                # the process dies just before the nth call, as SIGKILL would: no cleanup runs
        calls.append(a)
        if len(calls) == nth: os._exit(9)
        return real(*a, **k)
    setattr(os, fn, dying)
    save(2)
    sys.exit(3)                              # not reached when the kill point exists
''')

# every step of a save: writing the temporaries (fsync), the second names (link), each rename (replace), dropping the
# second names (unlink)
@pytest.mark.parametrize('fn,nth,epoch', [('fsync', 2, 1), ('link', 1, 1), ('link', 2, 1), ('replace', 1, 1),
                                           ('replace', 2, 1), ('replace', 3, 1), ('fsync', 4, 2), ('unlink', 1, 2)])
def test_kill_at_each_step_of_a_save(tmp_path, fn, nth, epoch):
    """SIGKILL-like death (os._exit) at each step of replacing a checkpoint: the sidecar on disk always loads whole, the
    old checkpoint before the sidecar's rename and the new one after it; the next save leaves no temporary or second
    name."""
    r = procs.run([sys.executable, '-c', KILL, str(tmp_path), fn, str(nth)])
    assert r.returncode == 9, r.stderr[-2000:]
    w, side, ts = load_checkpoint(tmp_path / 'tft_last', train_state=True)
    assert side['epoch'] == epoch and float(w['w'][0]) == float(ts['s'][0]) == epoch
    if (fn, nth) in [('replace', 2), ('replace', 3)]:   # between renames: new files under the old sidecar's final names
        assert any(f.name.endswith('.prev') for f in tmp_path.iterdir())
    tidy_leftovers(tmp_path)                            # what a run does when it takes the folder: nothing hidden left
    assert sorted(os.listdir(tmp_path)) == ['tft_last.json', 'tft_last.safetensors', 'tft_last.train.safetensors']
    w, side, ts = load_checkpoint(tmp_path / 'tft_last', train_state=True)
    assert side['epoch'] == epoch and float(w['w'][0]) == float(ts['s'][0]) == epoch   # the same checkpoint, whole
    if (fn, nth) in [('replace', 2), ('replace', 3)]:   # the old weights back under their own name, for any reader
        assert float(load_file(str(tmp_path / 'tft_last.safetensors'))['w'][0]) == epoch
    save_checkpoint(tmp_path / 'tft_last', {'w': torch.full((1000,), 3.0)}, dict(epoch=3),
                    {'s': torch.full((10,), 3.0)})
    assert sorted(os.listdir(tmp_path)) == ['tft_last.json', 'tft_last.safetensors', 'tft_last.train.safetensors']
    assert load_checkpoint(tmp_path / 'tft_last', train_state=True)[1]['epoch'] == 3

CHILD = textwrap.dedent('''
    import sys, torch
    from tft_nb.checkpoint import save_checkpoint
    print('imported', flush=True)
    i = 0
    while True:
        i += 1
        save_checkpoint(sys.argv[1] + '/tft_last', {'w': torch.full((2_000_000,), float(i))}, dict(epoch=i),
                        {'s': torch.ones(500_000) * i})
''')

@pytest.mark.parametrize('delay', [0.3, 0.55, 0.8, 1.1])
def test_sigkill_during_writes(tmp_path, delay):
    with procs.started([sys.executable, '-c', CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True) as p:
        assert p.stdout.readline() == 'imported\n', 'the child ended before its first save'   # it imports torch first
        # then saves, again and again: the kill comes after `delay` seconds of its work (CPU time, which a loaded
        # machine does not shorten as it would a sleep, so the kill lands at like points of the saves under any load)
        procs.wait_cpu(p, delay, f'{delay} CPU seconds of saves')
        p.send_signal(signal.SIGKILL)
        p.wait()
    finals = [f for f in tmp_path.iterdir() if not f.name.startswith('.')]
    for f in finals:
        if f.suffix == '.safetensors': load_file(str(f))       # never torn: a complete safetensors file
    if not (tmp_path / 'tft_last.json').exists(): return          # killed before the first checkpoint completed
    w, side, ts = load_checkpoint(tmp_path / 'tft_last', train_state=True)   # whenever killed: a whole checkpoint
    assert float(w['w'][0]) == side['epoch'] == float(ts['s'][0])           # the parts belong together

@pytest.mark.slow
def test_failed_forecast_write_keeps_the_old_file(tmp_path, monkeypatch):
    """tft_predict writes its CSV atomically: a failure at the rename leaves the earlier forecasts whole and no
    temporary."""
    from tft_nb.cli import tft_train, tft_predict
    tft_train(epochs=1, hidden_size=8, attention_heads=2, lstm_layers=1, batch_size=256, encoder_length=20,
              checkpoint_dir=str(tmp_path / 'ck'))
    out = tmp_path / 'fc' / 'forecasts.csv'
    tft_predict(checkpoint=str(tmp_path / 'ck' / 'tft_best'), output=str(out))
    before = out.read_bytes()
    def boom(*a): raise OSError('disk full')
    monkeypatch.setattr(ckmod.os, 'replace', boom)
    with pytest.raises(OSError):
        tft_predict(checkpoint=str(tmp_path / 'ck' / 'tft_best'), output=str(out), split='test')
    monkeypatch.undo()
    assert out.read_bytes() == before and os.listdir(out.parent) == ['forecasts.csv']
