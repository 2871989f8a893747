#!/usr/bin/env bash
# Wheels, for the device machine's Python 3.12, of the run-time packages its image lacks (plus execnb and IPython to
# execute a notebook there, and nbdev and astunparse for nbdev_test; its image has pytest, PyYAML, six and pygments),
# downloaded into the ignored folder .whl/ (about 15 MB) for tools/gpu_check.sh to install.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  fastcore==1.14.5 databento-dbn==0.72.0 arch==8.0.0 zstandard==0.25.0 execnb==0.1.18 nbdev==2.4.14 astunparse==1.6.3 ipython==8.12.3 backcall decorator \
  jedi parso matplotlib-inline pexpect ptyprocess pickleshare prompt-toolkit wcwidth stack-data asttokens executing pure-eval traitlets
du -sh .whl
