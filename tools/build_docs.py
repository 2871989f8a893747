"""Build the documentation pages offline, without Quarto.

`nbdev_docs` (which needs the `quarto` binary) stays the way to publish the site. Where Quarto is not installed,
this script runs nbdev's own notebook processing (`nbdev.serve.proc_nbs`: hidden cells dropped, `show_doc` added
and rendered for every exported symbol, doc links resolved) and renders each processed notebook to one HTML page
with nbconvert, named as Quarto would name it (`output-file`), with a navigation bar and links made relative and
pointed at the ids the pages have.

Usage: python tools/build_docs.py [OUT_DIR]   (default: _site_offline/)
"""
import re, shutil, sys
from pathlib import Path
import nbformat, yaml
from nbconvert import HTMLExporter
from nbdev.config import get_config
from nbdev.serve import proc_nbs

root = Path(__file__).resolve().parents[1]

def _frontmatter(nb) -> dict:
    "The YAML front matter nbdev puts in the first raw cell (title, description, output-file)."
    c = nb.cells[0] if nb.cells else None
    if c is None or c.cell_type != 'raw' or not c.source.startswith('---'): return {}
    nb.cells.pop(0)
    return yaml.safe_load(c.source.strip().strip('-')) or {}

_QUARTO_ATTR = re.compile(r'\[([^\]]+)\]\(([^)\s]+)\)\{target="_blank" style="([^"]*)"\}')
_HTML_LINK = r'<a href="\2" target="_blank" style="\3">\1</a>'   # the same link in plain HTML

def _prepare(nb):
    "Drop directive lines; hide the input of `echo: false` cells (show_doc) and cells that are only directives."
    for c in nb.cells:
        c.pop('has_sd', None)   # nbdev's processing marker, not part of the notebook format
        if c.cell_type != 'code': continue
        for o in c.get('outputs', []):   # Quarto's link attributes (show_doc's "source" link) as plain HTML
            md = o.get('data', {}).get('text/markdown')
            if md: o['data']['text/markdown'] = _QUARTO_ATTR.sub(_HTML_LINK, ''.join(md))
        lines = c.source.splitlines()
        dirs = [l.replace(' ', '') for l in lines if l.startswith('#|')]
        c.source = '\n'.join(l for l in lines if not l.startswith('#|'))
        if '#|echo:false' in dirs or not c.source.strip(): c.metadata.setdefault('tags', []).append('remove_input')

def _nav(pages) -> str:
    links = ' | '.join(f'<a href="{f}">{t}</a>' for f, t in pages)
    style = '<style>.jp-RenderedMarkdown pre { margin-bottom: 1em; }</style>'
    nav_style = 'padding:.6em 1em;border-bottom:1px solid #ddd;font-family:sans-serif;font-size:90%'
    return f'{style}<nav style="{nav_style}">{links}</nav>'

_HREF = re.compile(r'href="([\w.-]*\.html)?#([^"]+)"')

def _fix_anchors(html: dict[str, str]) -> dict[str, str]:
    "Point links at the ids the pages have, whatever the case of their anchors."
    # nbdev links to Quarto's lower-case ids (`windows.html#dataconfig`);
    # nbconvert keeps the heading's case (`DataConfig`)
    exact = {f: set(re.findall(r'\bid="([^"]+)"', h)) for f, h in html.items()}
    lower = {f: {i.lower(): i for i in sorted(ids, reverse=True)} for f, ids in exact.items()}
    def fix(f):
        def sub(m):
            page, anchor = m.group(1), m.group(2)
            target = page or f
            # a link that finds its id is left alone (`dropout` beside `Dropout`)
            if anchor in exact.get(target, ()): return m.group(0)
            return f'href="{page or ""}#{lower.get(target, {}).get(anchor.lower(), anchor)}"'
        return sub
    return {f: _HREF.sub(fix(f), h) for f, h in html.items()}

def build(out=root / '_site_offline') -> list[Path]:
    "Process the notebooks and write one HTML page per notebook to `out`; returns the pages."
    cfg = get_config()
    proc = Path(proc_nbs(force=True, n_workers=0))
    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    from traitlets.config import Config
    c = Config()
    c.TagRemovePreprocessor.remove_input_tags = {'remove_input'}
    c.TagRemovePreprocessor.enabled = True
    exp = HTMLExporter(template_name='lab', config=c, exclude_input_prompt=True, exclude_output_prompt=True)
    site = f"{cfg.doc_host}{cfg.doc_baseurl}".rstrip('/') + '/'
    docs = []
    for p in sorted(proc.glob('*.ipynb'), key=lambda p: (p.stem != 'index', p.stem)):
        nb = nbformat.read(p, as_version=4)
        fm = _frontmatter(nb)
        _prepare(nb)
        title, desc = fm.get('title', p.stem), fm.get('description', '')
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"# {title}\n\n> {desc}" if desc else f"# {title}"))
        docs.append((fm.get('output-file', p.stem + '.html'), title, nb))
    pages, html = [(f, t) for f, t, _ in docs], {}
    for f, title, nb in docs:
        h, _ = exp.from_notebook_node(nb, resources={'metadata': {'name': title}})
        html[f] = re.sub(r'(<body[^>]*>)', lambda m: m.group(1) + _nav(pages), h.replace(site, ''), count=1)
    for f, h in _fix_anchors(html).items(): (out / f).write_text(h, encoding='utf-8')
    if (proc / 'images').is_dir(): shutil.copytree(proc / 'images', out / 'images')
    return [out / f for f, _ in pages]

if __name__ == '__main__':
    pages = build(Path(sys.argv[1]) if len(sys.argv) > 1 else root / '_site_offline')
    print(f"wrote {len(pages)} pages to {pages[0].parent}: " + ', '.join(p.name for p in pages))
