"""The package as `pip install` gives it (a wheel, not this editable checkout): every module is in it, `import tft_nb`
loads the installed copy, and its `tft_train` / `tft_predict` console scripts train and forecast from another folder."""
import os, shutil, sys, zipfile
from configparser import ConfigParser
from pathlib import Path
import pandas as pd
import procs
import pytest

pytestmark = pytest.mark.slow   # the second tier (pytest.ini)

ROOT = Path(__file__).resolve().parents[1]

def sh(*args, cwd, env=None):
    "Run a command to its end (its process group killed in every outcome, or at a scaled safety limit); it must pass."
    r = procs.run(args, cwd=cwd, env=env)
    assert r.returncode == 0, f"{' '.join(map(str, args))}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r

def test_wheel_installs_and_runs(tmp_path):
    src = tmp_path / 'src'        # build from a copy: a stale build/ folder in the checkout cannot leak into the wheel
    shutil.copytree(ROOT / 'tft_nb', src / 'tft_nb', ignore=shutil.ignore_patterns('__pycache__'))
    for f in ('setup.py', 'settings.ini', 'pyproject.toml', 'MANIFEST.in', 'README.md', 'LICENSE'):
        shutil.copy(ROOT / f, src / f)
    # --no-build-isolation: built with this environment's setuptools (a dev requirement), nothing downloaded
    sh(sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q', '-w', tmp_path / 'dist', '.',
       cwd=src)
    wheel, = (tmp_path / 'dist').glob('tft_nb-*.whl')
    names = zipfile.ZipFile(wheel).namelist()
    assert ({n for n in names if n.startswith('tft_nb/')}
            == {f'tft_nb/{p.name}' for p in (ROOT / 'tft_nb').glob('*.py')}), names
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith('entry_points.txt'))).decode()
    cfg = ConfigParser()
    cfg.read(ROOT / 'settings.ini')
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith('.dist-info/METADATA'))).decode()
    status = [l for l in meta.splitlines() if l.startswith('Classifier: Development Status :: ')]
    assert len(status) == 1 and status[0].startswith(   # settings.ini's number
        f"Classifier: Development Status :: {cfg['DEFAULT']['status']} - "), status
    for script in cfg['DEFAULT']['console_scripts'].split():   # settings.ini's scripts: tft_train=tft_nb.cli:main_train
        assert script.replace('=', ' = ') in entry, entry

    site = tmp_path / 'site'                # the wheel alone; its dependencies come from this environment
    sh(sys.executable, '-m', 'pip', 'install', '--no-deps', '-q', '--target', site, wheel, cwd=tmp_path)
    env = {**os.environ, 'PYTHONPATH': str(site), 'PYTHONHASHSEED': '0'}
    work = tmp_path / 'work'
    work.mkdir()
    r = sh(sys.executable, '-c', 'import tft_nb, tft_nb.cli; print(tft_nb.__file__, tft_nb.__version__)',
           cwd=work, env=env)
    assert r.stdout.startswith(str(site / 'tft_nb' / '__init__.py')) and cfg['DEFAULT']['version'] in r.stdout, r.stdout
    small = ['--hidden-size', '8', '--attention-heads', '1', '--lstm-layers', '1', '--encoder-length', '20',
             '--batch-size', '256']
    sh(site / 'bin' / 'tft_train', '--epochs', '1', *small, '--checkpoint-dir', 'ck', cwd=work, env=env)
    assert ({'tft_best.safetensors', 'tft_best.json', 'tft_last.safetensors', 'metrics.csv'}
            <= set(os.listdir(work / 'ck')))
    sh(site / 'bin' / 'tft_predict', '--checkpoint', 'ck/tft_best', '--output', 'fc.csv', cwd=work, env=env)
    fc = pd.read_csv(work / 'fc.csv')
    assert set(fc.symbol) == {'sp500', 'nasdaq'} and len(fc) == 2 * 5, fc
