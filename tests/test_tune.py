"""tft_tune end to end: a killed study resumes without counting the killed trial, two workers share one SQLite
study, and bad input is one line (nbs/23_tune.ipynb holds the unit tests)."""
import os, sqlite3, sys
import pandas as pd, pytest
import procs
from tft_nb.data import load_sample

TUNE = [sys.executable, '-c', 'from tft_nb.cli import main_tune; main_tune()']
TINY = ['--hidden-size', '8', '--attention-heads', '2', '--lstm-layers', '1', '--encoder-length', '20',
        '--horizon', '3', '--batch-size', '256', '--device', 'cpu', '--lr-schedule', 'constant',
        '--val-start', '2018-01-01', '--test-start', '2018-07-01', '--space', 'learning_rate=1e-3:1e-2:log']
ENV = {**os.environ, 'PYTHONHASHSEED': '0', 'OMP_NUM_THREADS': '1'}


def _bars(tmp_path):
    "The built-in bars since 2016 as a CSV file: small trials."
    f = tmp_path / 'bars.csv'
    b = load_sample()
    b[b.ts_event >= '2016-01-01'].to_csv(f, index=False)
    return f


def _table(folder):
    return pd.read_csv(folder / 'trials.csv')


@pytest.mark.slow
def test_killed_study_resumes(tmp_path):
    "A worker killed in its first trial: run again, the trial is failed (never finished) and resumed in its folder."
    d, data = tmp_path / 'tuning', _bars(tmp_path)
    args = ['--data', data, *TINY, '--epochs', '4', '--trials', '2', '--tune-dir', d]
    with procs.started([*TUNE, *args], env=ENV, stderr=open(tmp_path / 'first.log', 'w')) as p:
        first = d / 'tft' / 'trial_0000'
        procs.wait_until(p, lambda: (first / 'tft_last.json').is_file(), 'the first epoch of trial 0')
        procs.kill(p)
    r = procs.cli(['tft_tune', *args], env=ENV)                  # run again, to its end, in a child of the fork server
    assert r.returncode == 0, r.stderr[-3000:]
    t = _table(d)
    assert t.state.tolist()[0] == 'fail' and (t.state == 'complete').sum() == 2, t
    retry = t[t.state == 'complete'].iloc[0]
    assert retry.folder.endswith('trial_0000'), t                              # the killed trial's folder
    assert 'Trial 0 was left running by process' in r.stderr
    assert 'Resumed from' in (d / 'tft' / 'trial_0000' / 'train.log').read_text()   # resumed from its checkpoint
    with sqlite3.connect(d / 'tune.db') as db:                                  # the study lives in the database
        assert db.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0] == 2


@pytest.mark.slow
def test_two_workers_share_a_study(tmp_path):
    "Two processes on one SQLite study finish its trials between them, losing none."
    d, data = tmp_path / 'tuning', _bars(tmp_path)
    args = [*TUNE, '--data', data, *TINY, '--epochs', '2', '--trials', '4', '--tune-dir', d]
    with procs.started(args, env=ENV, stderr=open(tmp_path / 'a.log', 'w')) as a, \
         procs.started(args, env=ENV, stderr=open(tmp_path / 'b.log', 'w')) as b:
        for p, name in ((a, 'a.log'), (b, 'b.log')):
            procs.communicate(p)
            assert p.returncode == 0, (tmp_path / name).read_text()[-3000:]
    t = _table(d)
    done = t[t.state == 'complete']
    assert len(done) >= 4 and set(t.state) == {'complete'}, t                   # none lost, failed or left running
    assert t.trial.is_unique and done.folder.is_unique
    assert all(f'Trial {n} complete' in (tmp_path / 'a.log').read_text() + (tmp_path / 'b.log').read_text()
               for n in done.trial)


def test_bad_input_is_one_line(tmp_path, capsys):
    "Each refused input: exit 2, one line naming the flag, nothing written (in this process: the corpus's contract)."
    from tft_nb.cli import main_tune
    d = tmp_path / 'tuning'
    cases = {('--space', 'dropout=0.3:0.1'): "--space: dropout's range (0.3, 0.1) is not (low, high)",
             ('--space', 'depth=1,2'): '--space names depth, not a setting a trial can search',
             ('--space', 'dropout=0:0.2', '--dropout', '0.1'): '--dropout both set and searched (--space)',
             ('--ensemble', '3'): 'unrecognized arguments: --ensemble 3',   # a study tunes single models
             ('--storage', 'postgresql://nobody@127.0.0.1:1/none'): "the study's storage cannot be opened",
             ('--storage', 'sqlite:////no/such/folder/tune.db'): "the study's storage cannot be opened",
             ('--trials', '0'): '--trials must be >= 1, got 0'}
    for flags, said in cases.items():
        with pytest.raises(SystemExit) as e: main_tune([*TINY, *flags, '--tune-dir', str(d)])
        lines = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(lines) == 1 and lines[0].startswith('tft_tune: error: '), (flags, lines)
        assert said in lines[0], (flags, lines[0])
    assert not d.exists()
