#!/usr/bin/env bash
# Time to accuracy on one GPU, side by side (issue 28): the recipe of examples/fashion-mnist.yaml on Fashion-MNIST,
# `torus run --workers 1 --set spec.gang.device=gpu` (the real torus-worker) next to its PyTorch peer on the same GPU,
# bench/time_to_accuracy/fashion_mnist_ddp.py --device cuda (one process; the same ResNet-9 8-16-32-64, batch 256,
# Nesterov SGD, one-cycle LR, weight decay on conv/linear weights, flip, label smoothing, channels_last; TF32 and
# cuDNN's algorithm search on; bf16 autocast if and only if the example's precision is bf16), both to the example's
# targetAccuracy within its epochs (read from the job file), alternating which side goes first.
#   bench/gpu/fashion_mnist.sh                            # ROUNDS=2 of each side (about a minute on an H200)
#   ROUNDS=1 FASHION_MNIST_DIR=/data/fashion-mnist bench/gpu/fashion_mnist.sh
#   EPOCHS=1 TARGET=0.85 bench/gpu/fashion_mnist.sh       # overrides the example's epochs and target on both sides
#   bench/gpu/fashion_mnist.sh --print-jobs DIR           # prints each run's `torus run` arguments and runs nothing
#   SMOKE=1 bench/gpu/fashion_mnist.sh                    # its plumbing (bench/common.sh): nothing built, 1 round,
#                                                         # 1 epoch, target 5%
# Data: FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist (package dataset-fashion-mnist), else the copy
# that scripts/gpu-prefix.sh packs into .gpu-prefix/ (a borrowed GPU machine has no Debian packages). PyTorch: the
# python3 on PATH, or TORCH_PYTHON. FASHION_MNIST_LOGS=DIR keeps every run's full log there; RUN_TIMEOUT_S (150)
# bounds each run.
#
# Time to target, both sides: from the start of the first training step (data loaded and on the device, model built)
# to the end of the first validation pass at or above the target; evaluations, per-epoch checkpoints, Torus's graph
# capture and both sides' cuDNN algorithm choice included. torus: `time_to_target_s` of torus run's RESULT line (as
# bench/time_to_accuracy.sh reads it); PyTorch: the peer's RESULT line (after a device synchronize).
# Exits 3 with "no CUDA device" without a GPU; fails naming the Python when it has no PyTorch with CUDA. Each run's
# figures come as they are taken, `RESULT fashion_mnist_gpu_<side>_seconds_to_target=S round=R accuracy=A
# images_per_s=I` (so a call cut short keeps what it measured); the last line:
#   RESULT fashion_mnist_gpu_seconds_to_target_ratio_vs_torch=X torus=S torch=S target=T ...
# (medians over the rounds; ours / theirs, lower is better; nan when a side's median run did not reach the target).
# --print-jobs DIR: one line per torus run, its arguments shell-quoted (checkpoints under DIR), then exit 0, before
# building or looking for a device: tests/bench/gpu_scripts_test.cc validates them on the CPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=bench/tta_results.sh
source "$ROOT/bench/tta_results.sh"  # field, report, median
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"  # SMOKE, bench_build
if [[ "${SMOKE:-0}" == 1 ]]; then
  ROUNDS="${ROUNDS:-1}" EPOCHS="${EPOCHS:-1}" TARGET="${TARGET:-0.05}"
fi
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# The python3 on PATH: on the borrowed GPU machines that is the one with PyTorch (docs/gpu.md).
PYTHON="${TORCH_PYTHON:-$(command -v python3 || echo python3)}"
JOB="${JOB:-$ROOT/examples/fashion-mnist.yaml}"
ROUNDS="${ROUNDS:-2}"
# Each run's bound (seconds; either side is expected to take well under a minute on an H200, not measured yet).
RUN_TIMEOUT_S="${RUN_TIMEOUT_S:-150}"

# The example's own values (spec.training.*: each key occurs once in the example).
spec_value() { awk -v k="$1:" '$1 == k { print $2; exit }' "$JOB"; }
EPOCHS="${EPOCHS:-$(spec_value epochs)}"
TARGET="${TARGET:-$(spec_value targetAccuracy)}"
PRECISION="$(spec_value precision)"
[[ -n "$EPOCHS" && -n "$TARGET" && -n "$PRECISION" ]] ||
  { echo "bench/gpu: no epochs, targetAccuracy or precision in $JOB" >&2; exit 2; }
case "$PRECISION" in fp32 | bf16) ;; *)
  echo "bench/gpu: $JOB trains in $PRECISION; the PyTorch peer has fp32 and bf16 (autocast) only" >&2; exit 2 ;;
esac

DATA="${FASHION_MNIST_DIR:-}"
if [[ -z "$DATA" ]]; then
  for dir in /usr/share/datasets/fashion-mnist "$ROOT/.gpu-prefix/usr/share/datasets/fashion-mnist"; do
    if [[ -f "$dir/train-images-idx3-ubyte.gz" ]]; then DATA="$dir"; break; fi
  done
fi

# torus_args CHECKPOINT_DIR: `torus run`'s arguments of one run (into TORUS_ARGS), built here only: the runs below and
# --print-jobs read them from here.
torus_args() {
  TORUS_ARGS=("$JOB" --workers 1 --set spec.gang.device=gpu
    # The example's CPU workers set the CPU engine's math threads, which validation refuses for a GPU rank.
    --set spec.gang.threadsPerProcess=null
    --set "spec.data.path=${DATA:-/usr/share/datasets/fashion-mnist}" --set "spec.training.epochs=$EPOCHS"
    --set "spec.training.targetAccuracy=$TARGET" --set "spec.training.checkpoint.dir=$1")
}
if [[ "${1:-}" == --print-jobs ]]; then
  [[ -n "${2:-}" ]] || { echo "usage: $0 --print-jobs DIR" >&2; exit 2; }
  torus_args "$2/checkpoints"
  printf '%q ' "${TORUS_ARGS[@]}"
  echo
  exit 0
fi

bench_build "$BUILD_DIR" torus torus-worker torus_gpu_bench
TORUS="$BUILD_DIR/bin/torus"
device_rc=0
"$BUILD_DIR/bin/torus_gpu_bench" check || device_rc=$?
[[ $device_rc == 3 ]] && { echo "no CUDA device: bench/gpu needs an NVIDIA GPU" >&2; exit 3; }
[[ $device_rc == 0 ]] || { echo "bench/gpu: the CUDA device query failed (above)" >&2; exit "$device_rc"; }

if [[ -z "$DATA" || ! -f "$DATA/train-images-idx3-ubyte.gz" ]]; then
  echo "bench/gpu: no Fashion-MNIST ${DATA:+in $DATA }(FASHION_MNIST_DIR, /usr/share/datasets/fashion-mnist, or" \
    ".gpu-prefix/ from scripts/gpu-prefix.sh)" >&2
  exit 1
fi

if ! "$PYTHON" -c 'import numpy, torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "bench/gpu: $PYTHON has no PyTorch (with numpy) that sees a CUDA device (above), the side-by-side peer: set" \
    "TORCH_PYTHON to a Python that has one (or SKIP_BENCH=1 scripts/gpu-check.sh to leave the benchmarks out)" >&2
  exit 1
fi
PEER="$ROOT/bench/time_to_accuracy/fashion_mnist_ddp.py"
export TORUS_LOOPBACK_ONLY=1
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
LOGS="${FASHION_MNIST_LOGS:-$WORK}"
mkdir -p "$LOGS"

run_torus() {  # run_torus LOG
  torus_args "$(mktemp -d -p "$WORK")"
  if ! timeout -k 10 "$RUN_TIMEOUT_S" "$TORUS" run "${TORUS_ARGS[@]}" >"$1" 2>&1; then
    tail -30 "$1" >&2
    echo "bench/gpu: torus run failed or ran past RUN_TIMEOUT_S=$RUN_TIMEOUT_S s (log above)" >&2
    exit 1
  fi
}

run_torch() {  # run_torch LOG
  if ! timeout -k 10 "$RUN_TIMEOUT_S" "$PYTHON" "$PEER" --device cuda --precision "$PRECISION" --data "$DATA" \
    --epochs "$EPOCHS" --target "$TARGET" --checkpoint-dir "$(mktemp -d -p "$WORK")" >"$1" 2>&1; then
    tail -30 "$1" >&2
    echo "bench/gpu: the PyTorch peer failed or ran past RUN_TIMEOUT_S=$RUN_TIMEOUT_S s (log above)" >&2
    exit 1
  fi
}

# details SIDE LOG: each epoch as the side reported it (torus: the worker's per-epoch line, with its step time split
# into data wait, compute and communication; before it, how the trainer feeds and runs the step on this device).
details() {
  if [[ "$1" == torus ]]; then
    grep -E '\] (input|step): |\] epoch [0-9]+ done: ' "$2" |
      sed -E 's/^\[rank [0-9]+\] [^ ]+ [A-Z] [^ ]+\] /    /' || true
  else
    sed -n 's/^pytorch /    /p' "$2"
  fi
}

TORCH_VERSION="$("$PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])')"
echo "# Fashion-MNIST ($DATA) on one GPU to $TARGET top-1 within $EPOCHS epochs, $PRECISION, $ROUNDS rounds" \
  "alternating: torus run --workers 1 vs PyTorch $TORCH_VERSION ($PYTHON)"
for ((r = 1; r <= ROUNDS; r++)); do
  # Alternate which side goes first, so neither always meets a cold (or a warm) device.
  sides=(torus torch)
  ((r % 2 == 0)) && sides=(torch torus)
  for side in "${sides[@]}"; do
    log="$LOGS/$side-$r.log"
    "run_$side" "$log"
    report "$side" "$r" "$log"
    details "$side" "$log"
    echo "RESULT fashion_mnist_gpu_${side}_seconds_to_target=$(field time_to_target_s "$log") round=$r" \
      "accuracy=$(field accuracy "$log") images_per_s=$(field images_per_s "$log")"
  done
done

ours="$(median 1 "$WORK/torus.tsv")"
theirs="$(median 1 "$WORK/torch.tsv")"
ratio="$(awk -v a="$ours" -v b="$theirs" 'BEGIN { print (a == "nan" || b == "nan") ? "nan" : sprintf("%.3f", a / b) }')"
[[ "$ours" == nan ]] && echo "bench/gpu: torus did not reach $TARGET within $EPOCHS epochs (median run)" >&2
[[ "$theirs" == nan ]] && echo "bench/gpu: PyTorch did not reach $TARGET within $EPOCHS epochs (median run)" >&2
echo "RESULT fashion_mnist_gpu_seconds_to_target_ratio_vs_torch=$ratio torus=$ours torch=$theirs target=$TARGET" \
  "epochs=$EPOCHS precision=$PRECISION rounds=$ROUNDS torus_accuracy=$(median 2 "$WORK/torus.tsv")" \
  "torch_accuracy=$(median 2 "$WORK/torch.tsv") torus_images_per_s=$(median 3 "$WORK/torus.tsv")" \
  "torch_images_per_s=$(median 3 "$WORK/torch.tsv") peer=torch-$TORCH_VERSION"
