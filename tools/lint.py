"""Lint the code with ruff, as ruff.toml sets it (120 columns, one statement a line, pyflakes): `python tools/lint.py`.

tests/, bench/ and tools/ are checked as they are. tft_nb/ is checked as nbdev writes it, with one exemption: the
`__all__` header that nbdev generates in each module, which it wraps at 120 columns and then prefixes with the ten
characters of `__all__ = `, is exempt from the line limit (E501) alone. Exits non-zero if ruff finds anything."""
import re, subprocess, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]

def without_all_limit(text: str) -> str:
    "The module `text` with each line of nbdev's generated `__all__` list marked `# noqa: E501`."
    m = re.search(r'^__all__ = \[.*?\]$', text, re.M | re.S)
    if not m: return text
    block = '\n'.join(line + '  # noqa: E501' for line in m.group(0).split('\n'))
    return text[:m.start()] + block + text[m.end():]

def ruff(*args, stdin: str | None = None) -> int:
    return subprocess.run(['ruff', 'check', *args], input=stdin, text=True, cwd=root).returncode

if __name__ == '__main__':
    codes = [ruff('tests', 'bench', 'tools')]
    for f in sorted((root / 'tft_nb').glob('*.py')):
        if f.name == '_modidx.py': continue                    # nbdev's index of the modules, generated
        name = str(f.relative_to(root))
        codes.append(ruff('--quiet', '--stdin-filename', name, '-', stdin=without_all_limit(f.read_text())))
    sys.exit(max(codes))
