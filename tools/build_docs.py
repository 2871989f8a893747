"""Build the documentation pages offline, without Quarto.

`nbdev_docs` (which needs the `quarto` binary) stays the way to publish the site. Where Quarto is not installed,
this script runs nbdev's own notebook processing (`nbdev.serve.proc_nbs`: hidden cells dropped, `show_doc` added
and rendered for every exported symbol, doc links resolved) and renders each processed notebook to one HTML page
with nbconvert, named as Quarto would name it (`output-file`), with links made relative and pointed at the ids the
pages have. Each page gets a sidebar of the notebooks in reading order, with a search box (a small script over
`search.js`, an index of every section's heading and text written beside the pages, as Quarto's site search does
with its own index), and a table of contents of its own sections;
cells marked `code-fold: true` (the tests) show a summary line that opens their code, as Quarto folds them.
Math (`$...$`, `$$...$$`) is converted to MathML at build time (latex2mathml, from PyPI), which browsers render
without a script, so the pages need nothing from the network: every external script of nbconvert's template
(MathJax, require.js from a CDN) is left out.

Usage: python tools/build_docs.py [OUT_DIR]   (default: _site_offline/)
"""
import html as _html, json, re, shutil, sys
from pathlib import Path
import nbformat, yaml
from latex2mathml.converter import convert as _mathml
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

def _directive(line: str) -> tuple[str, str]:
    "A `#| key: value` line as (key, value), quotes dropped."
    k, _, v = line[2:].partition(':')
    return k.strip(), v.strip().strip('"\'')

def _folded(source: str, summary: str):
    "A markdown cell that shows `source` folded, as Quarto's `code-fold` does: a summary line that opens the code."
    return nbformat.v4.new_markdown_cell(f'<details class="tft-fold"><summary>{_html.escape(summary)}</summary>\n\n'
                                         f'```python\n{source}\n```\n\n</details>')

def _prepare(nb):
    "Drop directive lines; hide the input of `echo: false` cells and of directive-only ones; fold `code-fold` cells."
    cells = []
    for c in nb.cells:
        c.pop('has_sd', None)   # nbdev's processing marker, not part of the notebook format
        cells.append(c)
        if c.cell_type != 'code': continue
        for o in c.get('outputs', []):   # Quarto's link attributes (show_doc's "source" link) as plain HTML
            md = o.get('data', {}).get('text/markdown')
            if md: o['data']['text/markdown'] = _QUARTO_ATTR.sub(_HTML_LINK, ''.join(md))
        lines = c.source.splitlines()
        dirs = dict(_directive(l) for l in lines if l.startswith('#|'))
        c.source = '\n'.join(l for l in lines if not l.startswith('#|'))
        if dirs.get('code-fold') == 'true' and c.source.strip():
            cells.insert(-1, _folded(c.source, dirs.get('code-summary', 'Code')))
            if not c.get('outputs'): cells.pop()
            c.source = ''
        if dirs.get('echo') == 'false' or not c.source.strip(): c.metadata.setdefault('tags', []).append('remove_input')
    nb.cells = cells

_CODE = re.compile(r'(```.*?```|`[^`\n]*`)', re.S)                     # code blocks and spans: no math inside
_MATH = re.compile(r'\$\$(.+?)\$\$|(?<![\\$\w])\$([^$\n]+?)\$(?![\w$])', re.S)

_ALIGNED = re.compile(r'^\\begin\{aligned\}(.*)\\end\{aligned\}$', re.S)

def _inner(tex: str) -> str:
    "The MathML of `tex` without its `<math>` element (nothing for an empty cell)."
    return re.sub(r'^<math[^>]*>|</math>$', '', _mathml(tex)) if tex else ''

def aligned(body: str) -> str:
    "An `aligned` environment's `body` as a MathML table: rows at `\\\\`, cells at `&` (latex2mathml has no `aligned`)."
    rows = [r for r in re.split(r'\\\\', body) if r.strip()]
    cells = ''.join('<mtr>' + ''.join(f'<mtd>{_inner(c.strip())}</mtd>' for c in r.split('&')) + '</mtr>' for r in rows)
    return ('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">'
            f'<mtable class="aligned">{cells}</mtable></math>')

def math_to_mathml(md: str) -> str:
    "Markdown `md` with its TeX math (`$...$` inline, `$$...$$` display) as MathML, code left alone."
    def sub(m):
        tex, block = (m.group(1), True) if m.group(1) is not None else (m.group(2), False)
        if block and (env := _ALIGNED.match(tex.strip())): return aligned(env.group(1))
        return _mathml(tex.strip(), display='block' if block else 'inline')
    return ''.join(part if i % 2 else _MATH.sub(sub, part) for i, part in enumerate(_CODE.split(md)))

def plain(title: str) -> str:
    "A page title as text: Markdown code marks dropped."
    return title.replace('`', '')

_STYLE = """<style>
body { margin: 0; }
.tft-layout { display: flex; align-items: flex-start; font-family: sans-serif; }
.tft-side, .tft-toc { position: sticky; top: 0; max-height: 100vh; overflow-y: auto; box-sizing: border-box;
  padding: 1em .8em; font-size: 85%; line-height: 1.5; }
.tft-side { flex: 0 0 15em; border-right: 1px solid #ddd; background: #fafafa; }
.tft-toc { flex: 0 0 13em; border-left: 1px solid #eee; }
.tft-side a, .tft-toc a { display: block; color: #24509a; text-decoration: none; padding: .1em 0; }
.tft-side a.here { font-weight: bold; color: #000; }
.tft-toc a.h3 { padding-left: 1em; }
.tft-main { flex: 1 1 auto; min-width: 0; }
.jp-RenderedMarkdown pre { margin-bottom: 1em; }
math[display="block"] { margin: .6em 0; }
mtable.aligned mtd { padding: .2em 0; }
mtable.aligned mtd:nth-child(odd) { text-align: right; }
mtable.aligned mtd:nth-child(even) { text-align: left; }
mtable.aligned mtd:nth-child(3) { padding-left: 3em; }
details.tft-fold { margin: .4em 0 .8em; }
details.tft-fold > summary { cursor: pointer; color: #555; font-size: 90%; }
</style>"""

_SEARCH_BOX = ('<input id="tft-q" type="search" placeholder="Search the docs" aria-label="search" '
               'style="width:100%;box-sizing:border-box;margin:.5em 0"><div id="tft-hits"></div>')
_SEARCH_JS = """<script src="search.js"></script><script>
(function () {
  var box = document.getElementById('tft-q'), hits = document.getElementById('tft-hits');
  function esc(s) { return s.replace(/[&<>"]/g, function (c) { return '&#' + c.charCodeAt(0) + ';'; }); }
  box.addEventListener('input', function () {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean), out = [];
    if (words.length) (window.TFT_SEARCH || []).forEach(function (e) {
      var text = (e.title + ' ' + e.text).toLowerCase();
      if (words.every(function (w) { return text.indexOf(w) >= 0; })) out.push(e);
    });
    hits.innerHTML = out.slice(0, 20).map(function (e) {
      return '<a href="' + e.href + '">' + esc(e.page + ': ' + e.title) + '</a>';
    }).join('') + (words.length && !out.length ? '<i>no match</i>' : '');
  });
})();
</script>"""

def _sidebar(pages, here: str) -> str:
    "The pages in reading order, the current one marked, under a search box."
    names = {f: 'Overview' if f == 'index.html' else plain(t) for f, t in pages}     # the title is the project's name
    links = ''.join(f'<a href="{f}"{" class=here" if f == here else ""}>{_html.escape(names[f])}</a>' for f, _ in pages)
    return f'<nav class="tft-side" aria-label="pages"><b>tft_nb</b>{_SEARCH_BOX}{links}</nav>'


_HEAD = re.compile(r'<h([23]) id="([^"]+)"[^>]*>(.*?)(?:<a class="anchor-link"|</h[23]>)', re.S)

def _toc(page: str) -> str:
    "The page's sections (h2, h3) as links."
    links = ''.join(f'<a class="h{lvl}" href="#{i}">{re.sub(r"<[^>]+>", "", t).strip()}</a>'
                    for lvl, i, t in _HEAD.findall(page))
    return f'<nav class="tft-toc" aria-label="on this page"><b>On this page</b>{links}</nav>' if links else ''

_EXTERNAL_SCRIPT = re.compile(r'<script[^>]*\bsrc="https?://[^"]*"[^>]*>\s*</script>\s*', re.S)
_MATHJAX_CONFIG = re.compile(r'<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->\s*', re.S)
_MERMAID = re.compile(r'<script type="module">(?:(?!</script>).)*?mermaid.*?</script>\s*', re.S)   # loads it from a CDN

def _page(h: str, pages, here: str, title: str) -> str:
    "nbconvert's page `h` laid out with the sidebar and the table of contents, without scripts from the network."
    h = _MERMAID.sub('', _MATHJAX_CONFIG.sub('', _EXTERNAL_SCRIPT.sub('', h)))
    h = re.sub(r'<title>.*?</title>', f'<title>{_html.escape(plain(title))}</title>', h, count=1, flags=re.S)
    h = h.replace('</head>', _STYLE + '</head>', 1)
    h = re.sub(r'(<body[^>]*>)', lambda m: m.group(1) + '<div class="tft-layout">' + _sidebar(pages, here)
               + '<div class="tft-main">', h, count=1)
    return h.replace('</body>', '</div>' + _toc(h) + '</div>' + _SEARCH_JS + '</body>', 1)

_SECTION = re.compile(r'<h([123]) id="([^"]+)"[^>]*>(.*?)</h[123]>(.*?)(?=<h[123] id=|$)', re.S)

def search_index(html: dict[str, str], titles: dict[str, str]) -> list[dict]:
    "An entry per section (h1-h3) of every page: its link, page title, heading and the words of its text."
    words = lambda s: ' '.join(_html.unescape(re.sub(r'<[^>]+>', ' ', s)).split())
    return [dict(href=f'{f}#{i}', page=plain(titles[f]), title=words(re.sub(r'<a class="anchor-link".*?</a>', '', t)),
                 text=words(re.sub(r'<(script|style|nav)\b.*?</\1>', ' ', body, flags=re.S))[:2000])
            for f, h in html.items() for _, i, t, body in _SECTION.findall(h)]

_HREF = re.compile(r'href="([\w.-]*\.html)?#([^"]+)"')

def _fix_anchors(html: dict[str, str]) -> dict[str, str]:
    "Point links at the ids the pages have, whatever the case of their anchors."
    # nbdev links to Quarto's lower-case ids (`data_config.html#dataconfig`);
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
        for c in nb.cells:
            if c.cell_type == 'markdown': c.source = math_to_mathml(c.source)
        docs.append((fm.get('output-file', p.stem + '.html'), title, nb))
    pages, html = [(f, t) for f, t, _ in docs], {}
    for f, title, nb in docs:
        h, _ = exp.from_notebook_node(nb, resources={'metadata': {'name': plain(title)}})
        html[f] = _page(h.replace(site, ''), pages, f, title)
    html = _fix_anchors(html)
    for f, h in html.items(): (out / f).write_text(h, encoding='utf-8')
    index = search_index(html, dict(pages))                      # a script, not JSON: pages opened as files load it
    (out / 'search.js').write_text('window.TFT_SEARCH = ' + json.dumps(index) + ';\n', encoding='utf-8')
    if (proc / 'images').is_dir(): shutil.copytree(proc / 'images', out / 'images')
    return [out / f for f, _ in pages]

if __name__ == '__main__':
    pages = build(Path(sys.argv[1]) if len(sys.argv) > 1 else root / '_site_offline')
    print(f"wrote {len(pages)} pages to {pages[0].parent}: " + ', '.join(p.name for p in pages))
