"README.md's Python example runs as written, in a fresh folder, and prints what its comments say."
import os, re, sys
from pathlib import Path
import procs
import pytest

pytestmark = pytest.mark.slow   # the second tier (pytest.ini)

README = Path(__file__).resolve().parents[1] / 'README.md'
ENV = {**os.environ, 'PYTHONHASHSEED': '0', 'OMP_NUM_THREADS': '1'}


def test_the_python_example_runs_as_written(tmp_path):
    example = re.search(r'```python\n(.*?)```', README.read_text(), re.S).group(1)
    r = procs.run([sys.executable, '-c', example], cwd=tmp_path, env=ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    assert all(m in r.stdout for m in ('TFT calibrated', 'har_pooled', 'q0.5')), r.stdout[-2000:]
    assert (tmp_path / 'runs' / 'quick' / 'tft_best.json').is_file()
