#!/usr/bin/env bash
# Time to accuracy of the job users run first: `torus run examples/fashion-mnist.yaml --workers 2` (2 ranks x 1 thread,
# ResNet-9 8-16-32-64, batch 256, 4 epochs, target 92%) next to its PyTorch DDP-2 peer of the same recipe
# (bench/time_to_accuracy/fashion_mnist_ddp.py: torch.distributed over Gloo, 2 processes x 1 thread, the newest torch
# from PyPI, bench/peer.sh), both on the dataset-fashion-mnist IDX files, alternating in one run.
#
# Time to target, both sides: from the start of the first training step (data loaded, model built, ranks joined) to
# the end of the first validation pass at or above the target accuracy (evaluations and per-epoch checkpoints in
# between included; both stop there). torus: `time_to_target_s` of `torus run`'s RESULT line (from rank 0's first
# training step, on torus run's clock); PyTorch: the peer's RESULT line (rank 0's clock, after a barrier).
# images/s: global training images/s of the last epoch (evaluation excluded). Each torus run starts from a fresh checkpoint dir (no resume).
#   bench/time_to_accuracy.sh                          # RUNS=2 of each side, the example's 4 epochs and 92%
#   RUNS=3 bench/time_to_accuracy.sh
#   EPOCHS=1 TARGET=0.80 RUNS=1 bench/time_to_accuracy.sh   # a short run (a few minutes)
#   SMOKE=1 bench/time_to_accuracy.sh   # seconds: 1 epoch of the first 2,560 images, target 5% (bench/common.sh)
#   CPU_ISA=avx2 bench/time_to_accuracy.sh             # what an AVX2 machine runs, both sides (bench/cpu_isa.sh)
#   COMPARE_BUILD_DIR=build-onednn3 bench/time_to_accuracy.sh   # a second torus build as a third side, same rounds
# COMPARE_BUILD_DIR: another build folder (another oneDNN, docs/building.md) whose torus runs in the same rounds
# (torus_b), so the two builds and PyTorch see the same minutes of the machine; its figures are appended to the RESULT
# line (torus_b_s, torus_b_ratio_vs_pytorch, ...). Each build's oneDNN version is named (torus_onednn=...).
# Last line: RESULT time_to_accuracy_ratio_vs_pytorch=X torus_s=.. pytorch_s=.. (medians; ours / theirs, lower is
# better; nan when the median run of a side did not reach the target).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
# shellcheck source=bench/peer.sh
source "$ROOT/bench/peer.sh"
# shellcheck source=bench/tta_results.sh
source "$ROOT/bench/tta_results.sh"  # field, report, median
bench_peer_python  # PYTHON, PEER_VERSION: the newest torch from PyPI (PEER=debian: Debian's)
JOB="${JOB:-$ROOT/examples/fashion-mnist.yaml}"
RUNS="${RUNS:-2}"
EPOCHS="${EPOCHS:-4}"    # the example's spec.training.epochs
TARGET="${TARGET:-0.92}" # the example's spec.training.targetAccuracy
DATA="$(sed -n 's/^    path: //p' "$JOB")"  # the example's spec.data.path
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [[ "${SMOKE:-0}" == 1 ]]; then
  RUNS=1 EPOCHS=1 TARGET=0.05
  bench_small_idx "$DATA" "$WORK/data" 2560 512
  DATA="$WORK/data"
fi

bench_build "$BUILD_DIR" torus torus-worker
TORUS="$BUILD_DIR/bin/torus"
COMPARE_BUILD_DIR="${COMPARE_BUILD_DIR:-}"
if [[ -n "$COMPARE_BUILD_DIR" ]]; then
  bench_build "$COMPARE_BUILD_DIR" torus torus-worker
  TORUS_B="$COMPARE_BUILD_DIR/bin/torus"
fi
# The oneDNN version a build folder compiled against (from the dnnl CMake package it configured with).
onednn_of() {
  local dir
  dir="$(sed -n 's/^dnnl_DIR:[A-Z]*=//p' "$1/CMakeCache.txt")"
  sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$dir/dnnl-config-version.cmake" 2>/dev/null || echo unknown
}
echo "# torus: $BUILD_DIR (oneDNN $(onednn_of "$BUILD_DIR"))${COMPARE_BUILD_DIR:+; torus_b: $COMPARE_BUILD_DIR (oneDNN $(onednn_of "$COMPARE_BUILD_DIR"))}"
PEER="$ROOT/bench/time_to_accuracy/fashion_mnist_ddp.py"
export TORUS_LOOPBACK_ONLY=1
# shellcheck source=bench/cpu_isa.sh
source "$ROOT/bench/cpu_isa.sh"
bench_cpu_isa
echo "# vector ISA, both sides: $ISA (CPU_ISA=avx2 runs what an AVX2 machine runs)"

run_torus() { torus_side "$TORUS" "$1"; }    # run_torus LOG
run_torus_b() { torus_side "$TORUS_B" "$1"; }  # the COMPARE_BUILD_DIR build
torus_side() {  # torus_side BINARY LOG
  local ckpt bin="$1"
  shift
  ckpt="$(mktemp -d -p "$WORK")"
  if ! "$bin" run "$JOB" --workers 2 --set "spec.training.checkpoint.dir=$ckpt" --set "spec.training.epochs=$EPOCHS" \
    --set "spec.training.targetAccuracy=$TARGET" --set "spec.data.path=$DATA" >"$1" 2>&1; then
    tail -20 "$1" >&2
    echo "torus run failed (log above)" >&2
    exit 1
  fi
}

run_pytorch() {  # run_pytorch LOG
  local ckpt
  ckpt="$(mktemp -d -p "$WORK")"
  if ! "$PYTHON" "$PEER" --world 2 --threads 1 --epochs "$EPOCHS" --target "$TARGET" --checkpoint-dir "$ckpt" \
    --data "$DATA" --port "$(bench_free_port)" >"$1" 2>&1; then
    tail -20 "$1" >&2
    echo "PyTorch peer failed (log above)" >&2
    exit 1
  fi
}

echo "# time to $TARGET top-1 on Fashion-MNIST, $EPOCHS epochs at most, 2 ranks x 1 thread; $RUNS runs of each side"
for ((r = 1; r <= RUNS; r++)); do
  # Alternate which side goes first, so a drift in the machine's load does not favour one side.
  sides=(torus ${TORUS_B:+torus_b} ${PYTHON:+pytorch})
  ((r % 2 == 0)) && sides=(${PYTHON:+pytorch} ${TORUS_B:+torus_b} torus)
  for side in "${sides[@]}"; do
    log="$WORK/$side-$r.log"
    "run_$side" "$log"
    report "$side" "$r" "$log"
  done
done

# side_median COLUMN SIDE: the side's median (tta_results.sh), "skipped" for a side that did not run (a smoke's peer).
side_median() { if [[ -f "$WORK/$2.tsv" ]]; then median "$1" "$WORK/$2.tsv"; else echo skipped; fi; }
ours="$(side_median 1 torus)"
theirs="$(side_median 1 pytorch)"
for side in torus ${TORUS_B:+torus_b} ${PYTHON:+pytorch}; do
  awk -v s="$side" -v t="$(median 1 "$WORK/$side.tsv")" -v a="$(median 2 "$WORK/$side.tsv")" \
    -v i="$(median 3 "$WORK/$side.tsv")" 'BEGIN {
    printf "== %s median: time to target %s, final accuracy %.2f%%, %s img/s\n", s, (t == "nan") ? "not reached" : t " s",
      a * 100, i }'
done
# ours / theirs: nan when a side's median run missed the target, skipped without the peer.
ratio_to_peer() {
  awk -v a="$1" -v t="$theirs" 'BEGIN { print (t == "skipped") ? t : (a == "nan" || t == "nan") ? "nan" : sprintf("%.3f", a / t) }'
}
compare_fields() {  # the COMPARE_BUILD_DIR side's figures, for the RESULT line
  local b
  b="$(side_median 1 torus_b)"
  echo "torus_b_ratio_vs_pytorch=$(ratio_to_peer "$b")" \
    "torus_b_s=$b torus_b_accuracy=$(side_median 2 torus_b) torus_b_images_per_s=$(side_median 3 torus_b)" \
    "torus_b_onednn=$(onednn_of "$COMPARE_BUILD_DIR")"
}
echo "RESULT time_to_accuracy_ratio_vs_pytorch=$(ratio_to_peer "$ours") torus_s=$ours pytorch_s=$theirs" \
  "torus_accuracy=$(side_median 2 torus) pytorch_accuracy=$(side_median 2 pytorch)" \
  "torus_images_per_s=$(side_median 3 torus) pytorch_images_per_s=$(side_median 3 pytorch)" \
  "runs=$RUNS target=$TARGET epochs=$EPOCHS isa=$ISA peer=$(bench_peer_name) torus_onednn=$(onednn_of "$BUILD_DIR")" \
  "${TORUS_B:+$(compare_fields)}"
