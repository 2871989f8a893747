"""The size of the exported cells of each notebook (issue 49, item 5): median and longest, in lines, the `#|` directives
left out and cells of imports only skipped. Run from the repository root: `python tools/cell_sizes.py`."""
import json, re, statistics
from pathlib import Path

IMPORT = re.compile(r'(from|import)\s|try: import|except ImportError|$')


def sizes(nb: Path) -> list[int]:
    "Lines of each exported code cell of `nb` that holds more than imports."
    out = []
    for c in json.loads(nb.read_text())['cells']:
        s = ''.join(c['source'])
        if c['cell_type'] != 'code' or not re.search(r'^#\|\s*export', s, re.M): continue
        lines = [ln for ln in s.splitlines() if not ln.startswith('#|')]
        if lines and not all(IMPORT.match(ln) for ln in lines): out.append(len(lines))
    return out


if __name__ == '__main__':
    for nb in sorted(Path('nbs').glob('*.ipynb')):
        if s := sizes(nb): print(f'{nb.name:28} median {statistics.median(s):5} longest {max(s):3} cells {len(s)}')
