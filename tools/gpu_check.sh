#!/usr/bin/env bash
# The GPU checks as one prepared command for the lent device machine (torch, pandas, numpy and matplotlib are there;
# the other run-time packages travel as wheels made by tools/gpu_wheels.sh into the ignored folder .whl/), in order
# of value, each step under its own time limit and skipped when the budget ($BUDGET s, 560 by default) runs short:
#   1. nbs/19_training_run.ipynb executed with its outputs saved (with CUDA: the full 50-epoch original configuration
#      through tft_train, bf16 autocast, eager), its figures and metrics.csv;
#      NOTEBOOK=0 skips it (a session whose notebook ran before);
#   2. bench/graph_step_bench.py on $DEVICE at the original configuration, bf16: the whole training step captured as
#      one CUDA graph (eager and compiled stages) against eager and fit's compiled stages as CUDA graphs, one round,
#      with each variant's weights after 5 steps against eager's (issue 49, item 2; GRAPH_VARIANTS picks them);
#   2b. bench/step_bench.py speed on $DEVICE at the original configuration: eager fp32, bf16, compiled with CUDA graphs
#      in fp32 and bf16 (issue 27's levers on the GPU);
#   3. tests/cuda_checks.py: CUDA graphs train like eager, keep every batch's forecasts, bf16 trains;
#   4. tft_predict of the run's best checkpoint on $DEVICE and on the CPU: the largest difference of the forecasts;
#   5. bench/step_bench.py model on $DEVICE: step times and achieved FLOP/s against large matmuls of each precision;
#   6. tft_train under torchrun (NCCL, DistributedDataParallel, one process per GPU), a small model for 2 epochs, then
#      tft_predict of its best checkpoint without torchrun;
#   7. nbdev_test, the notebooks' inline tests, on a machine with CUDA, in the time left.
# Everything lands in $OUT as at most 8 files (the device tool's limit): log.txt (every step's output),
# 19_training_run.ipynb, and run.tar.gz (the run's metrics.csv and JSON sidecars, the notebook's figures).
# Device call: run(command="bash tools/gpu_check.sh", carry=[".whl"], timeout_s=590).
# Locally (CPU, to check the script; SMALL skips the notebook and step 4, which reads its run, and shrinks the
# benchmarks):
#   NO_WHEELS=1 DEVICE=cpu SMALL=1 VARIANTS=eager,bf16 GRAPH_VARIANTS=eager,whole OUT=/tmp/gpu_out \
#     bash tools/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_out}; DEVICE=${DEVICE:-cuda}; BUDGET=${BUDGET:-560}; mkdir -p "$OUT"
LOG="$OUT/log.txt"
if [ -z "${NO_WHEELS:-}" ] && [ -d .whl ] && [ -n "$(ls .whl/*.whl 2>/dev/null)" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
if ! command -v tft_train >/dev/null; then   # the package is on PYTHONPATH, not installed: make its console commands
  mkdir -p /tmp/bin
  for c in train predict; do printf 'import sys\nfrom tft_nb.cli import main_%s\nsys.exit(main_%s())\n' $c $c >/tmp/bin/tft_$c.py
    printf '#!/usr/bin/env bash\nexec python3 /tmp/bin/tft_%s.py "$@"\n' $c >/tmp/bin/tft_$c; chmod +x /tmp/bin/tft_$c; done
  export PATH=/tmp/bin:$PATH
fi
# step NAME SECONDS COMMAND...: run COMMAND under a limit of SECONDS (less if the budget has less), logging its output
step() {
  local name=$1 want=$2; shift 2
  local left=$(( BUDGET - SECONDS ))
  if [ "$left" -lt 30 ]; then echo "== $name: skipped, ${left} s of the budget left" | tee -a "$LOG"; return; fi
  local limit=$(( want < left ? want : left )) start=$SECONDS
  echo "== $name (limit ${limit} s, at ${SECONDS} s)" | tee -a "$LOG"
  local tag="GPU_CHECK_STEP=$name.$$.$SECONDS" rc size
  size=$(stat -c %s "$LOG")
  env "$tag" timeout -k 20 "$limit" "$@" >>"$LOG" 2>&1   # to the file: a process left holding a pipe would hang tee
  rc=$?
  leftovers "$tag"
  tail -c +$(( size + 1 )) "$LOG"                       # the step's output, on the console too
  echo "== $name: exit $rc after $(( SECONDS - start )) s" | tee -a "$LOG"
}
# leftovers TAG: KILL every process whose environment holds TAG: what a step left running (timeout ends when its
# command does, and a worker of nbdev_test's pool whose TERM a training run handled would go on alone)
leftovers() { grep -lz -- "^$1\$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | xargs -r kill -KILL 2>/dev/null; }
step env 60 python3 -c "import torch, pandas, numpy, fastcore, databento_dbn, tft_nb; from tft_nb.data import load_sample; load_sample()
print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '-', '| pandas', pandas.__version__, '| numpy', numpy.__version__, '| cpus', __import__('os').cpu_count())"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv 2>&1 | tee -a "$LOG"

notebook() { cd nbs && python3 -m execnb.shell --exc_stop 19_training_run.ipynb --dest "$OUT/19_training_run.ipynb"; }
[ -z "${SMALL:-}" ] && [ "${NOTEBOOK:-1}" != 0 ] && \
  step 19_training_run "${NB_TIMEOUT:-300}" bash -c "$(declare -f notebook); OUT=$OUT; notebook"
tar -czf "$OUT/run.tar.gz" nbs/runs/training_run/metrics.csv nbs/runs/training_run/*.json nbs/images 2>>"$LOG"

if [ -n "${SMALL:-}" ]; then SIZE="--hidden 16 --heads 2 --lstm 1 --batch 32"; STEPS="--steps 5 --warm 2 --passes 1"
else SIZE="--hidden 256 --heads 8 --lstm 2 --batch 32"; STEPS="--steps 100 --warm 5 --passes 3"; fi
step graph_step 200 python3 bench/graph_step_bench.py --device "$DEVICE" --rounds 1 $SIZE --steps 100 --check 5 \
  --variants "${GRAPH_VARIANTS:-eager,whole,graphs,whole-compiled}"
step speed_bench 240 python3 bench/step_bench.py speed --device "$DEVICE" --rounds 1 --threads 4 $SIZE $STEPS \
  --variants "${VARIANTS:-eager,bf16,graphs,graphs-bf16}"
[ "$DEVICE" = cuda ] && step cuda_checks 150 python3 -m pytest -q -n 0 tests/cuda_checks.py

predict() {
python3 - "$1" <<'EOF'
import sys
from tft_nb.cli import tft_predict
kw, dev = dict(checkpoint='nbs/runs/training_run/tft_best', split='test'), sys.argv[1]
a, b = tft_predict(**kw, output='/tmp/fc_dev.csv', device=dev), tft_predict(**kw, output='/tmp/fc_cpu.csv', device='cpu')
q = [c for c in a if c.startswith('q')]
print(f"tft_predict: {len(a)} forecasts; max |{dev} - cpu| = {float((a[q] - b[q]).abs().max().max()):.3g}; "
      f"target range {float(b['actual'].min()):.3f}..{float(b['actual'].max()):.3f}")
EOF
}
[ -z "${SMALL:-}" ] && step predict_devices 60 bash -c "$(declare -f predict); predict $DEVICE"   # the run of step 1
step model_bench 90 python3 bench/step_bench.py model --devices "$DEVICE" --cuda-batches 32,256

torchrun() {
  local gpus; gpus=$(python3 -c "import torch; print(max(1, torch.cuda.device_count()) if '$1' == 'cuda' else 2)")
  rm -rf /tmp/ddp_run
  python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" --no-python tft_train --device "$1" --epochs 2 \
    --hidden-size 32 --attention-heads 4 --lstm-layers 1 --batch-size 64 --checkpoint-dir /tmp/ddp_run \
    && tft_predict --checkpoint /tmp/ddp_run/tft_best --output /tmp/ddp_fc.csv --device "$1"
}
step torchrun 90 bash -c "$(declare -f torchrun); torchrun $DEVICE"
step nbdev_test 600 nbdev_test --n_workers 8
ls -la "$OUT" | tee -a "$LOG"
