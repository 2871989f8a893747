#!/usr/bin/env bash
# The GPU checks as one prepared command for the lent device machine (torch, pandas, numpy and matplotlib are there;
# the other run-time packages travel as wheels made by tools/gpu_wheels.sh into the ignored folder .whl/):
#   1. bench/grad_norm_bench.py on CUDA (bf16 autocast, CUDA-event timing): the gradient norm's share of a step;
#   2. bench/model_bench.py: step times and achieved FLOP/s on CPU and CUDA;
#   3. nbs/19_training_run.ipynb executed with its outputs saved (with CUDA: the full 50-epoch configuration),
#      its fan chart and metrics.csv;
#   4. tft_predict of that run's best checkpoint on CUDA and on the CPU: the largest difference of the forecasts.
#   5. tft_train under torchrun (world size 1 on one GPU: NCCL, DistributedDataParallel; all GPUs when there are
#      more), a small model for 2 epochs, then tft_predict of its best checkpoint without torchrun;
#   6. tft_train --compile on $DEVICE (torch.compile of the model's two stages, inductor/Triton), 3 epochs of the task's
#      sizes, and the same run without it: the log's compile time and epoch seconds (issue 27);
#   7. nbdev_test, the notebooks' inline tests, on a machine with CUDA, in the time left of a 570 s budget.
# Everything lands in $OUT. Device call: run(command="bash tools/gpu_check.sh", carry=[".whl"], timeout_s=590).
# Locally (CPU, to check the script): NO_WHEELS=1 DEVICE=cpu NORM_ARGS="--steps 3 --hidden 16 --heads 2" OUT=/tmp/gpu_out bash tools/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_out}; DEVICE=${DEVICE:-cuda}; mkdir -p "$OUT"
if [ -z "${NO_WHEELS:-}" ] && [ -d .whl ] && [ -n "$(ls .whl/*.whl 2>/dev/null)" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python3 -c "import torch, pandas, numpy, fastcore, databento_dbn, tft_nb; from tft_nb.data import load_sample; load_sample()
print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '-', '| pandas', pandas.__version__, '| numpy', numpy.__version__)" 2>&1 | tee "$OUT/env.txt"
echo "== grad_norm_bench ($DEVICE)"
timeout 150 python3 bench/grad_norm_bench.py --device "$DEVICE" ${NORM_ARGS:---steps 50} 2>&1 | tee "$OUT/grad_norm_bench.txt"
echo "== model_bench"
timeout 120 python3 bench/model_bench.py 2>&1 | tee "$OUT/model_bench.txt"
echo "== 19_training_run"
start=$SECONDS
(cd nbs && timeout "${NB_TIMEOUT:-420}" python3 -m execnb.shell --exc_stop 19_training_run.ipynb --dest "$OUT/19_training_run.ipynb") 2>&1 | tee "$OUT/notebook.txt"
echo "notebook: exit ${PIPESTATUS[0]} after $((SECONDS - start)) s" | tee -a "$OUT/notebook.txt"
cp nbs/images/training_run_fan.png nbs/runs/training_run/metrics.csv "$OUT/" 2>/dev/null
echo "== tft_predict on $DEVICE and on the CPU (the run's best checkpoint, test windows)"
timeout 120 python3 - <<EOF 2>&1 | tee "$OUT/predict_devices.txt"
from tft_nb.cli import tft_predict
kw = dict(checkpoint='nbs/runs/training_run/tft_best', split='test')
a, b = tft_predict(**kw, output='/tmp/fc_dev.csv', device='$DEVICE'), tft_predict(**kw, output='/tmp/fc_cpu.csv', device='cpu')
q = [c for c in a if c.startswith('q')]
print('tft_predict:', len(a), 'forecasts; max |$DEVICE - cpu| =', float((a[q] - b[q]).abs().max().max()), '; target range', float(b['actual'].min()), float(b['actual'].max()))
EOF
echo "== torchrun: tft_train on $DEVICE with DistributedDataParallel"
gpus=$(python3 -c "import torch; print(max(1, torch.cuda.device_count()) if '$DEVICE' == 'cuda' else 2)")
rm -rf /tmp/ddp_run
timeout 180 python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" --no-python \
  tft_train --device "$DEVICE" --epochs 2 --hidden-size 32 --attention-heads 4 --lstm-layers 1 --batch-size 64 --checkpoint-dir /tmp/ddp_run 2>&1 \
  | tee "$OUT/torchrun.txt"
echo "torchrun ($gpus process(es)): exit ${PIPESTATUS[0]}" | tee -a "$OUT/torchrun.txt"
timeout 60 tft_predict --checkpoint /tmp/ddp_run/tft_best --output /tmp/ddp_fc.csv --device "$DEVICE" 2>&1 \
  | tee -a "$OUT/torchrun.txt"
echo "== tft_train --compile on $DEVICE, and without it"
for c in --compile --no-compile; do
  timeout 200 tft_train --device "$DEVICE" $c --epochs 3 --hidden-size 32 --attention-heads 4 --lstm-layers 1 \
    --batch-size 64 --checkpoint-dir /tmp/compile_run$c --overwrite 2>&1 | grep -E "torch.compile|Epoch|error" \
    | tee -a "$OUT/compile.txt"
done
echo "== nbdev_test"
left=$(( ${BUDGET:-570} - SECONDS ))
if [ "$left" -gt 60 ]; then timeout "$left" nbdev_test --n_workers 8 2>&1 | tee "$OUT/nbdev_test.txt"; echo "nbdev_test: exit ${PIPESTATUS[0]}" | tee -a "$OUT/nbdev_test.txt"
else echo "nbdev_test skipped: ${left} s of the budget left" | tee "$OUT/nbdev_test.txt"; fi
ls -la "$OUT"
