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
    nbs = sorted((root / 'nbs').glob('*.ipynb'))
    assert len(nbs) >= 10
    for nb in nbs:
        mod = _default_exp(nb)
        page = site / (f'{mod}.html' if mod else re.sub(r'^\d+_', '', nb.stem) + '.html')   # as Quarto names pages
        assert page.is_file(), f"no page for {nb.name} (expected {page.name})"
        html = page.read_text()
        assert '<nav' in html and 'index.html' in html, f"{page.name}: no navigation bar"
        assert 'https://tft-nb.github.io/tft_nb/' not in html, f"{page.name}: absolute link to the published site left in"
        if mod is None: continue
        m = importlib.import_module(f'tft_nb.{mod}')
        names = [n for n in getattr(m, '__all__', []) if callable(getattr(m, n))]   # constants get no show_doc section
        missing = [n for n in names if f'id="{n}"' not in html]
        assert not missing, f"{page.name}: exported symbols without a show_doc section: {missing}"

def test_landing_page_image_is_there(site):
    html = (site / 'index.html').read_text()
    imgs = re.findall(r'<img[^>]+src="([^"]+)"', html)
    assert imgs and all((site / i).is_file() for i in imgs if not i.startswith(('http', 'data:'))), imgs

def test_hidden_cells_and_directives_are_not_shown(site):
    html = (site / 'train.html').read_text()
    assert 'nbdev_export()' not in html          # the `#| hide` export cell
    assert '#| export' not in html and '#| default_exp' not in html
