"The offline docs build (tools/build_docs.py) gives one page per notebook, documenting every exported symbol."
import importlib, json, re, sys
from pathlib import Path
import pytest

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root / 'tools'))

def _default_exp(nb: Path):
    for c in json.loads(nb.read_text())['cells']:
        if m := re.search(r'^#\|\s*default_exp\s+(\S+)', ''.join(c['source']), re.M): return m.group(1)

@pytest.fixture(scope='module')
def site(tmp_path_factory):
    import build_docs
    out = tmp_path_factory.mktemp('site')
    build_docs.build(out)
    return out

def test_a_page_per_notebook_with_its_symbols(site):
    """Every notebook has its page, and every exported function or class a show_doc section on the page of the notebook
    that defines it (nbdev's index, `_modidx`, names it: the commands of 21 and 23 are in `tft_nb.cli`, documented on
    their own notebooks' pages)."""
    from tft_nb._modidx import d
    nbs = sorted((root / 'nbs').glob('*.ipynb'))
    assert len(nbs) >= 10
    for nb in nbs:
        mod = _default_exp(nb)
        page = site / (f'{mod}.html' if mod else re.sub(r'^\d+_', '', nb.stem) + '.html')   # as Quarto names pages
        assert page.is_file(), f"no page for {nb.name} (expected {page.name})"
        html = page.read_text()
        assert '<nav' in html and 'index.html' in html, f"{page.name}: no navigation bar"
        assert 'https://tft-nb.github.io/tft_nb/' not in html, (
            f"{page.name}: absolute link to the published site left in")
    missing = []
    for mod, syms in d['syms'].items():
        m = importlib.import_module(mod)
        for n in getattr(m, '__all__', []):
            if not callable(getattr(m, n)): continue                      # constants get no show_doc section
            page = syms[f'{mod}.{n}'][0].split('#')[0]
            if f'id="{n}"' not in (site / page).read_text(): missing.append(f'{mod}.{n} ({page})')
    assert not missing, f"exported symbols without a show_doc section on their page: {missing}"

def _text_outside_code(html: str) -> str:
    "The page's text outside code, scripts, styles and MathML, tags dropped."
    html = re.sub(r'<(pre|code|script|style|math)\b.*?</\1>', ' ', html, flags=re.S | re.I)
    return re.sub(r'<[^>]+>', ' ', html)

def test_math_is_rendered_and_nothing_comes_from_the_network(site):
    "No page loads a script from the network (MathJax, require.js from a CDN), and no TeX is left for one to render."
    tex = re.compile(r'\$\$.+?\$\$|\$[^$\n]*(\\[a-zA-Z]+|[_^{}])[^$\n]*\$', re.S)
    for p in site.glob('*.html'):
        html = p.read_text()
        assert not re.search(r'<script[^>]+src="(https?:)?//', html), f"{p.name}: a script from the network"
        assert 'mathjax' not in html.lower() and 'cdnjs' not in html, f"{p.name}: MathJax from a CDN"
        left = [m.group(0)[:60] for m in tex.finditer(_text_outside_code(html))]
        assert not left, f"{p.name}: raw TeX outside code: {left[:3]}"
    assert (site / 'calibrate.html').read_text().count('<math') >= 5      # the calibration page's equations
    for page in ('gating.html', 'attention.html'):                         # `aligned` equations as tables
        html = (site / page).read_text()
        assert '<mtable' in html and not re.search(r'<mi>&(amp;)?</mi>', html), f"{page}: an aligned equation's & shown"

def test_sidebar_in_reading_order_and_a_table_of_contents(site):
    "Every page lists every page, in the notebooks' order, marks itself, and lists its own sections."
    order = ['index.html'] + [re.sub(r'^\d+[a-z]?_', '', nb.stem) + '.html' if not _default_exp(nb)
                              else f'{_default_exp(nb)}.html'
                              for nb in sorted((root / 'nbs').glob('*.ipynb')) if nb.stem != 'index']
    for p in site.glob('*.html'):
        html = p.read_text()
        side = re.search(r'<nav class="tft-side".*?</nav>', html, re.S).group(0)
        assert re.findall(r'href="([^"]+)"', side) == order, p.name
        assert f'href="{p.name}" class=here' in side, p.name
        title = re.search(r'<title>(.*?)</title>', html, re.S).group(1)
        assert '`' not in title and '`' not in side, f"{p.name}: raw backticks in {title!r}"
    toc = re.search(r'<nav class="tft-toc".*?</nav>', (site / 'baselines.html').read_text(), re.S).group(0)
    assert 'href="#Four-baselines"' in toc and 'href="#The-test-metrics"' in toc, toc

def test_links_between_pages_find_their_anchors(site):
    "Every link to a page of the site, or to a place on one, finds that page and an element with that id."
    ids = {p.name: set(re.findall(r'\bid="([^"]+)"', p.read_text())) for p in site.glob('*.html')}
    dead = [(p, page, anchor) for p in ids
            for page, anchor in re.findall(r'href="([\w.-]*\.html)?(?:#([^"]*))?"', (site / p).read_text())
            if (page or p) not in ids or (anchor and anchor not in ids[page or p])]
    assert not dead, f"links to missing pages or anchors (page, target, anchor): {dead}"

def test_anchor_fixing_keeps_links_that_find_their_id():
    """A link is pointed at another case of its anchor only when the page has no id of that exact spelling (`dropout`
    and `Dropout` both exist in gating)."""
    import build_docs
    page = ('<h3 id="Dropout"></h3><h3 id="dropout"></h3><a href="#dropout"></a><a href="#Dropout"></a>'
            '<a href="b.html#gateaddnorm"></a>')
    fixed = build_docs._fix_anchors({'a.html': page, 'b.html': '<h3 id="GateAddNorm"></h3>'})['a.html']
    assert re.findall(r'href="([^"]+)"', fixed) == ['#dropout', '#Dropout', 'b.html#GateAddNorm'], fixed

def test_landing_page_image_is_there(site):
    html = (site / 'index.html').read_text()
    imgs = re.findall(r'<img[^>]+src="([^"]+)"', html)
    assert imgs and all((site / i).is_file() for i in imgs if not i.startswith(('http', 'data:'))), imgs

def test_hidden_cells_and_directives_are_not_shown(site):
    html = (site / 'train.html').read_text()
    assert 'nbdev_export()' not in html          # the `#| hide` export cell
    assert '#| export' not in html and '#| default_exp' not in html

def test_tests_are_folded(site):
    "Test cells (`code-fold: true`) are folded behind a summary line; the examples and their outputs are not."
    html = (site / 'loss.html').read_text()
    folds = re.findall(r'<details class="tft-fold">.*?</details>', html, re.S)
    assert len(folds) == 4 and all('Tests</summary>' in f for f in folds), len(folds)
    outside = re.sub(r'<details class="tft-fold">.*?</details>', '', html, flags=re.S)
    assert 'test_close' not in outside and 'test_fail' not in outside
    assert 'pinball</span><span class="p">(</span><span class="n">pred' in outside    # the example, not folded

def test_a_folded_cell_keeps_its_outputs():
    "A folded cell with outputs: its code behind the summary line, its outputs shown; without outputs, only the fold."
    import build_docs, nbformat
    cell = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(cells=[cell('#| code-fold: true\n#| code-summary: "The checks"\nx = 1'),
                                         cell('#| code-fold: true\n1 + 1')])
    nb.cells[1].outputs = [nbformat.v4.new_output('execute_result', {'text/plain': '2'}, execution_count=1)]
    build_docs._prepare(nb)
    assert [c.cell_type for c in nb.cells] == ['markdown', 'markdown', 'code'], [c.cell_type for c in nb.cells]
    assert '<summary>The checks</summary>' in nb.cells[0].source and 'x = 1' in nb.cells[0].source
    assert '<summary>Code</summary>' in nb.cells[1].source and '1 + 1' in nb.cells[1].source
    assert nb.cells[2].outputs and 'remove_input' in nb.cells[2].metadata.tags

def _example_outputs(nb: Path) -> list[str]:
    "The saved outputs of the notebook's visible cells that are not `show_doc` sections."
    out = []
    for c in json.loads(nb.read_text())['cells']:
        src = ''.join(c['source'])
        if c['cell_type'] != 'code' or src.startswith(('show_doc', '#| hide')) or '#| echo: false' in src: continue
        out += [o for o in c.get('outputs', []) if o['output_type'] != 'error']
    return out

def test_every_page_shows_an_example_with_its_output():
    "Every notebook is saved with the output of at least one example (tools/run_nbs.py writes them)."
    bare = [nb.name for nb in sorted((root / 'nbs').glob('*.ipynb')) if not _example_outputs(nb)]
    assert not bare, f"notebooks without a saved example output: {bare} (run python tools/run_nbs.py)"

def test_saved_outputs_hold_no_warning_or_error():
    "No notebook is saved with a warning or an error in its outputs: what a page shows ran cleanly."
    bad = [nb.name for nb in sorted((root / 'nbs').glob('*.ipynb'))
           for c in json.loads(nb.read_text())['cells'] for o in c.get('outputs', [])
           if o['output_type'] == 'error' or o.get('name') == 'stderr']
    assert not bad, f"notebooks saved with stderr or error outputs: {sorted(set(bad))}"

def test_a_search_box_over_an_index_of_every_section(site):
    """Every page has the search box and loads the index beside it (no network); the index has an entry for each
    section, with its heading, its link and its text (what a search matches)."""
    index = json.loads(re.fullmatch(r'window\.TFT_SEARCH = (.*);\n', (site / 'search.js').read_text(), re.S).group(1))
    for p in site.glob('*.html'):
        html = p.read_text()
        assert 'id="tft-q"' in html and '<script src="search.js"></script>' in html, p.name
    baselines = [e for e in index if e['href'] == 'baselines.html#Four-baselines']
    assert len(baselines) == 1 and 'GARCH' in baselines[0]['text'] and baselines[0]['page'] == 'Baselines', baselines
    pages = {e['href'].split('#')[0] for e in index}
    assert pages == {p.name for p in site.glob('*.html')}, pages ^ {p.name for p in site.glob('*.html')}
