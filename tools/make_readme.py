"""Write README.md from nbs/index.ipynb without Quarto (what `nbdev_readme` does where Quarto is installed).

Markdown cells are copied; code cells become ```python blocks followed by their text outputs; cells marked
`#| hide` are left out, image links become absolute (the repository's raw files, so that they show on a package index
page too) and `#|` directive lines are dropped.
Usage: `python tools/make_readme.py [--check]` (`--check` exits 1 if README.md is not what the notebook gives)."""
import configparser, json, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
_ini = configparser.ConfigParser()
_ini.read(root / 'settings.ini')
RAW = (_ini['DEFAULT']['git_url'].replace('https://github.com/', 'https://raw.githubusercontent.com/')
       + f"/{_ini['DEFAULT'].get('branch', 'main')}/nbs/images/")   # where README's images are served from

def _src(cell): return ''.join(cell['source'])

def _outputs(cell):
    "Text of a code cell's stream and text/plain outputs."
    out = []
    for o in cell.get('outputs', []):
        if o['output_type'] == 'stream': out.append(''.join(o['text']))
        elif 'text/markdown' in o.get('data', {}): out.append(('md', ''.join(o['data']['text/markdown'])))
        elif 'text/plain' in o.get('data', {}): out.append(''.join(o['data']['text/plain']))
    return out

def readme(nb_path=root/'nbs'/'index.ipynb') -> str:
    cells, parts = json.loads(Path(nb_path).read_text())['cells'], []
    for c in cells:
        src = _src(c)
        lines = src.splitlines()
        if any(l.strip().replace(' ', '') in ('#|hide', '#|hide_input') for l in lines): continue
        if c['cell_type'] == 'markdown':
            parts.append(src.strip().replace('](images/', f']({RAW}'))
            continue
        code = '\n'.join(l for l in lines if not l.lstrip().startswith('#|')).strip()
        if code: parts.append(f"```python\n{code}\n```")
        for o in _outputs(c):
            parts.append(o[1].strip() if isinstance(o, tuple) else f"```\n{o.rstrip()}\n```")
    return '# ' + parts[0].lstrip('# ') + '\n\n' + '\n\n'.join(parts[1:]) + '\n' if parts else ''

if __name__ == '__main__':
    text, dest = readme(), root/'README.md'
    if '--check' in sys.argv:
        if not dest.exists() or dest.read_text() != text:
            sys.exit("README.md is out of date with nbs/index.ipynb: run `python tools/make_readme.py`")
    else: dest.write_text(text)
