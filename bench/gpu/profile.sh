#!/usr/bin/env bash
# Where a ResNet-50 training step's GPU time goes, by kind of kernel (docs/gpu.md's levers: batch norm's passes, the
# element-wise kernels folded into them, the convolutions' passes), for a machine with an NVIDIA GPU:
#   bench/gpu/profile.sh                          # bf16, batch 128: 3 steps under Nsight Systems (else Compute)
#   PRECISION=tf32 STEPS=2 bench/gpu/profile.sh
#   SEARCH=timed bench/gpu/profile.sh             # with cuDNN's timed algorithm search instead of the heuristics
#   KEEP=/tmp/prof bench/gpu/profile.sh           # keep the report and the kernel table there
#   SMOKE=1 bench/gpu/profile.sh                  # its plumbing (bench/common.sh): nothing built, 1 step after 1
# The steps are torus_gpu_bench resnet50's timed ones (between cudaProfilerStart/Stop, after WARMUP steps), run
# eagerly with a rank's options (cuda_options_for_rank) and the convolutions' algorithms chosen by SEARCH: heuristic
# (the default, as the trainer chooses them unless TORUS_CUDNN_BENCHMARK=1) or timed (cuDNN's timed search); the
# trainer replays the same kernels as a CUDA graph. Nsight Systems (nsys) times every kernel as it runs; Nsight
# Compute (ncu, the fallback) serializes them, so its total is the sum of kernel times without overlap. Exits 3 with "no CUDA device" without a GPU, and names what is missing when neither
# profiler is installed. Last line: RESULT resnet50_<precision>_gpu_ms_per_step=... resnet50_<precision>_<kind>_ms=...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"  # SMOKE, bench_build
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
if [[ "${SMOKE:-0}" == 1 ]]; then
  STEPS="${STEPS:-1}" WARMUP="${WARMUP:-1}"
fi
PRECISION="${PRECISION:-bf16}"
STEPS="${STEPS:-3}"
WARMUP="${WARMUP:-5}"
SEARCH="${SEARCH:-heuristic}"
case "$SEARCH" in heuristic | timed) ;; *)
  echo "bench/gpu/profile.sh: SEARCH: expected heuristic or timed, got '$SEARCH'" >&2; exit 2 ;;
esac

bench_build "$BUILD_DIR" torus_gpu_bench
BENCH="$BUILD_DIR/bin/torus_gpu_bench"
device_rc=0
"$BENCH" check >/dev/null || device_rc=$?
[[ $device_rc == 3 ]] && { echo "no CUDA device: bench/gpu/profile.sh needs an NVIDIA GPU" >&2; exit 3; }
[[ $device_rc == 0 ]] || { echo "bench/gpu/profile.sh: the CUDA device query failed" >&2; exit "$device_rc"; }

tool() { command -v "$1" || { [[ -x "/usr/local/cuda/bin/$1" ]] && echo "/usr/local/cuda/bin/$1"; } || true; }
NSYS="$(tool nsys)"
NCU="$(tool ncu)"
WORK="${KEEP:-$(mktemp -d)}"
mkdir -p "$WORK"
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "$WORK"' EXIT
RUN=("$BENCH" resnet50 --precision "$PRECISION" --search "$SEARCH" --warmup "$WARMUP" --steps "$STEPS")
echo "# ResNet-50 $PRECISION, batch 128, conv algorithms by $SEARCH search: $STEPS steps after $WARMUP, profiled"

if [[ -n "$NSYS" ]]; then
  "$NSYS" profile --capture-range=cudaProfilerApi --trace=cuda --sample=none --force-overwrite=true \
    -o "$WORK/resnet50" "${RUN[@]}"
  "$NSYS" stats --report cuda_gpu_kern_sum --format csv --force-export=true "$WORK/resnet50.nsys-rep" \
    >"$WORK/kernels.csv"
elif [[ -n "$NCU" ]]; then
  "$NCU" --profile-from-start off --metrics gpu__time_duration.sum --csv "${RUN[@]}" >"$WORK/kernels.csv"
else
  echo "bench/gpu/profile.sh: neither nsys (Nsight Systems) nor ncu (Nsight Compute) on PATH or in" \
    "/usr/local/cuda/bin" >&2
  exit 1
fi
python3 "$ROOT/bench/gpu/kernel_summary.py" "$WORK/kernels.csv" --steps "$STEPS" --label "resnet50_$PRECISION"
