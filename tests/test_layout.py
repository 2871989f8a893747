"""The package's modules as issue 49 lays them out: no import cycle among them; the commands' module, `tft_nb.cli`,
imported by none of them (the library never depends on the shell's glue); and the several-process code,
`tft_nb.distributed`, imported by no module at load time: `fit` and the rest talk to a `Processes`
(`tft_nb.processes`), whose `joined` imports distributed only when torchrun started the process."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'tft_nb'


def _imported(node) -> set[str]:
    "The package's modules an import statement names."
    if not isinstance(node, ast.ImportFrom): return set()
    if node.level == 1: return {node.module} if node.module else {a.name for a in node.names}
    if node.level == 0 and (node.module or '').startswith('tft_nb.'): return {node.module.split('.')[1]}
    return set()


def imports(top_level: bool = True) -> dict[str, set[str]]:
    "Module name -> the package's modules it imports when loaded (or, `top_level=False`, anywhere in its code)."
    out = {}
    for f in PKG.glob('*.py'):
        if f.name.startswith('_'): continue
        tree = ast.parse(f.read_text())
        nodes = [n for s in tree.body for n in ast.walk(s) if not isinstance(s, ast.FunctionDef)] if top_level \
            else list(ast.walk(tree))
        out[f.stem] = set().union(*map(_imported, nodes))
    return out


def test_no_module_imports_the_commands():
    graph = imports(top_level=False)
    assert 'cli' in graph and graph['cli'] >= {'backtest', 'tune'}, graph.get('cli')
    assert sorted(m for m, deps in graph.items() if 'cli' in deps) == []


def test_the_several_process_code_is_loaded_only_under_torchrun():
    assert sorted(m for m, deps in imports().items() if 'distributed' in deps) == []
    assert sorted(m for m, deps in imports(top_level=False).items() if 'distributed' in deps) == ['processes']
    assert 'processes' in imports()['fit'] and 'distributed' in imports(top_level=False)['processes']


def test_the_speed_layer_is_applied_from_outside():
    "No module imports the acceleration layer when it loads; `fit` takes it as its default `speed`, lazily."
    assert sorted(m for m, deps in imports().items() if 'accelerate' in deps) == []
    assert sorted(m for m, deps in imports(top_level=False).items() if 'accelerate' in deps) == ['fit']
    for meaning, mechanism in [('model', 'torch.compile'), ('fit', 'torch.compile'), ('device', 'mallopt'),
                               ('gating', 'packed_dropout'), ('gating', 'hashed'), ('train', 'torch.dot'),
                               ('fit', 'cpu_bf16'), ('fit', 'cfg.compile')]:
        assert mechanism not in (PKG / f'{meaning}.py').read_text(), (meaning, mechanism)


def test_no_import_cycle():
    graph, state, cycles = imports(), {}, []
    def visit(m, path):
        if state.get(m) == 'done': return
        if state.get(m) == 'open':
            cycles.append(path[path.index(m):] + [m])
            return
        state[m] = 'open'
        for d in sorted(graph.get(m, ())): visit(d, path + [m])
        state[m] = 'done'
    for m in sorted(graph): visit(m, [])
    assert cycles == [], cycles
