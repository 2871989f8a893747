"""Run notebooks and save their outputs, so the rendered pages show them.

Cells run as `nbdev_test` runs them (in the notebook's folder, `IN_TEST` set, the cells flagged with `tst_flags`
skipped, their saved outputs kept). Run `nbdev_clean` afterwards. 19_training_run (a ten-epoch run whose
outputs are its report) is left out unless named.

Usage: python tools/run_nbs.py [NOTEBOOK ...]   (default: every notebook in nbs/ but index and 19_training_run)
"""
import os, sys
from pathlib import Path
from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell
from fastcore.xtras import working_directory
from nbdev.config import get_config

root = Path(__file__).resolve().parents[1]
LEFT_OUT = {'index', '19_training_run'}

def _flags(cell) -> set[str]:
    "The names of the `#|` directives of `cell`."
    return {l[2:].strip().split(':')[0].split()[0] for l in cell.source.splitlines() if l.startswith('#|') and
            l[2:].strip()}

def skipped(cell, flags: set[str]) -> bool:
    "Whether `nbdev_test` leaves `cell` out: markdown, the export call, `eval: false`, or a flag in `flags`."
    if cell.cell_type != 'code' or 'nbdev_export' + '(' in cell.source: return True
    if any(l.replace(' ', '') == '#|eval:false' for l in cell.source.splitlines()): return True
    return bool(flags & _flags(cell))

def run(fn: Path) -> None:
    "Execute `fn` and write it back with its outputs."
    flags = set(get_config().tst_flags.split())
    nb = read_nb(fn)
    for c in nb.cells:                      # execnb keeps a cell's old outputs when the cell prints nothing now
        if not skipped(c, flags): c.outputs = []
    os.environ['IN_TEST'] = '1'
    with working_directory(fn.parent): CaptureShell(fn).run_all(nb, exc_stop=True, preproc=lambda c: skipped(c, flags))
    write_nb(nb, fn)

if __name__ == '__main__':
    nbs = [Path(a) for a in sys.argv[1:]] or sorted(p for p in (root / 'nbs').glob('*.ipynb') if p.stem not in LEFT_OUT)
    for fn in nbs:
        print(f'running {fn.name}', flush=True)
        run(fn.resolve())
