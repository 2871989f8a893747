"""The package's modules as issue 49 lays them out: no import cycle among them, and the commands' module, `tft_nb.cli`,
imported by none of them (the library never depends on the shell's glue)."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'tft_nb'


def imports() -> dict[str, set[str]]:
    "Module name -> the package's modules it imports (relative imports, at any depth of its code)."
    out = {}
    for f in PKG.glob('*.py'):
        if f.name.startswith('_'): continue
        got = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                got |= {node.module} if node.module else {a.name for a in node.names}
        out[f.stem] = got
    return out


def test_no_module_imports_the_commands():
    graph = imports()
    assert 'cli' in graph and graph['cli'] >= {'backtest', 'tune'}, graph.get('cli')
    assert sorted(m for m, deps in graph.items() if 'cli' in deps) == []


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
