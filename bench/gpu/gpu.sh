#!/usr/bin/env bash
# GPU benchmarks, Torus next to PyTorch (the python3 on PATH, or TORCH_PYTHON; it must have CUDA) in the same run:
#   bench/gpu/gpu.sh                       # ResNet-50 images/s, bf16 and tf32, the trainer's defaults (4 runs)
#   MODES=timed bench/gpu/gpu.sh           # the same with cuDNN's timed algorithm search (4 runs)
#   MODES="defaults timed" ROUNDS=2 PRECISIONS=bf16 STEPS=40 bench/gpu/gpu.sh
#   CIFAR10_DIR=/data/cifar-10-batches-bin bench/gpu/gpu.sh    # also ResNet-9 to 94% on CIFAR-10
#   bench/gpu/gpu.sh --print-jobs DIR      # writes the ResNet-50 job files into DIR, prints torus run's arguments
#   SMOKE=1 bench/gpu/gpu.sh               # its plumbing (bench/common.sh): nothing built, batch 8, 2 steps, bf16
# ResNet-50 is measured as users get it: `torus run` of a one-GPU TrainingJob (the real torus-worker) in each mode of
# MODES: "defaults" (the trainer's: cuDNN's heuristics, the step captured as a CUDA graph) and "timed"
# (TORUS_CUDNN_BENCHMARK=1: cuDNN's timed algorithm search, what PyTorch's cudnn.benchmark does), next to PyTorch
# (bf16 autocast / TF32, channels_last, cudnn.benchmark) once per precision and round, alternating. The search's
# start-up cost is what the workers' own log counts ("conv search so far: N shapes, S s", the CUDA backend's line).
# NCCL's bus bandwidth is measured with two GPUs or more (one moves no data).
# Each run prints its figure as it is taken (a call cut short keeps every figure it measured):
#   RESULT resnet50_bf16_defaults_torus_images_per_s=Y round=1 search_s=S
#   RESULT resnet50_bf16_torch_images_per_s=Z round=1
# Fails with "no CUDA device" (exit 3) on a machine without a GPU, and names the Python when it has no PyTorch with
# CUDA (the peer is the point of the comparison). Last line, the best round of each (a mode not run is left out):
#   RESULT resnet50_bf16_images_per_s_ratio_vs_torch=X torus_bf16=Y torus_bf16_timed=Y2 torch_bf16=Z
#          torus_bf16_search_s=S torus_bf16_timed_search_s=S2 resnet50_tf32_...
# (the ratio is the defaults' when they ran, else the timed search's).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"  # SMOKE, bench_build
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# The python3 on PATH: on the borrowed GPU machines that is the one with PyTorch (docs/gpu.md).
PYTHON="${TORCH_PYTHON:-$(command -v python3 || echo python3)}"
if [[ "${SMOKE:-0}" == 1 ]]; then
  BATCH="${BATCH:-8}" STEPS="${STEPS:-2}" PRECISIONS="${PRECISIONS:-bf16}"
fi
ROUNDS="${ROUNDS:-1}"
BATCH="${BATCH:-128}"
# The measured epoch's steps. Each torus run generates its BATCH x STEPS synthetic 224 px images anew in the worker
# (0.53 s per 256 images on one core here: 7.5 s at 30 steps), so STEPS is most of a run's fixed cost.
STEPS="${STEPS:-30}"
PRECISIONS="${PRECISIONS:-bf16 tf32}"
MODES="${MODES:-defaults}"
for mode in $MODES; do
  case "$mode" in defaults | timed) ;; *)
    echo "bench/gpu: MODES: expected defaults and/or timed, got '$mode'" >&2; exit 2 ;;
  esac
done

# A one-GPU TrainingJob of ResNet-50 on synthetic 224 px images, batch BATCH, 2 epochs of STEPS steps: the second
# epoch's images/s count (the first holds the algorithm choice, the eager step and the graph capture). tf32 is the
# job's fp32 (TF32 products: TORUS_CUDA_TF32's default), bf16 the job's bf16 (bf16 activations, fp32 master weights).
# The one place the job is built: the runs and --print-jobs write it here.
resnet50_job() {  # resnet50_job FILE PRECISION CHECKPOINT_DIR
  local precision="$2"
  [[ $precision == tf32 ]] && precision=fp32
  cat >"$1" <<YAML
apiVersion: torus.dev/v1alpha1
kind: TrainingJob
metadata:
  name: gpu-bench-resnet50
spec:
  gang: {workers: 1, processesPerWorker: 1, device: gpu}
  model: {arch: resnet50, widths: [64, 128, 256, 512], stem: imagenet, pooling: avg, numClasses: 1000}
  data:
    dataset: synthetic
    imageSize: 224
    synthetic: {trainImages: $((BATCH * STEPS)), validationImages: $BATCH, numClasses: 1000}
  training:
    epochs: 2
    batchSize: $BATCH
    optimizer: {type: sgd, momentum: 0.9, weightDecay: 0.00005}
    lrSchedule: {type: one-cycle, initial: 0.002, peak: 0.02, warmupEpochs: 1, final: 0}
    labelSmoothing: 0.1
    precision: $precision
    augmentation: {flip: true, cropPadding: 0}
    checkpoint: {dir: $3, everyEpochs: 100, keep: 1}
YAML
}

if [[ "${1:-}" == --print-jobs ]]; then
  [[ -n "${2:-}" ]] || { echo "usage: $0 --print-jobs DIR" >&2; exit 2; }
  mkdir -p "$2"
  for precision in $PRECISIONS; do
    resnet50_job "$2/resnet50-$precision.yaml" "$precision" "$2/checkpoints"
    printf '%q\n' "$2/resnet50-$precision.yaml"
  done
  exit 0
fi

bench_build "$BUILD_DIR" torus_gpu_bench torus torus-worker
BENCH="$BUILD_DIR/bin/torus_gpu_bench"
TORUS="$BUILD_DIR/bin/torus"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
device_rc=0
DEVICES="$("$BENCH" check)" || device_rc=$?
[[ $device_rc == 3 ]] && { echo "no CUDA device: bench/gpu needs an NVIDIA GPU" >&2; exit 3; }
[[ $device_rc == 0 ]] || { echo "bench/gpu: the CUDA device query failed (above)" >&2; exit "$device_rc"; }
echo "$DEVICES"
GPUS="$(grep -c '^device [0-9]' <<<"$DEVICES" || true)"

if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "bench/gpu: $PYTHON has no PyTorch that sees a CUDA device (above), the side-by-side peer: set TORCH_PYTHON" \
    "to a Python that has one (or SKIP_BENCH=1 scripts/gpu-check.sh to leave the benchmarks out)" >&2
  exit 1
fi
PEER="$ROOT/bench/gpu/torch_peer.py"
export TORUS_LOG_LEVEL="${TORUS_LOG_LEVEL:-warn}"

value() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" | tail -1; }

# torus_resnet50 PRECISION MODE ROUND: one torus run; prints its RESULT line and appends "IMAGES_PER_S SEARCH_S" to
# WORK/torus-PRECISION-MODE.
torus_resnet50() {
  local job="$WORK/resnet50-$1.yaml" log="$WORK/torus-resnet50.log" search=(TORUS_CUDNN_BENCHMARK=0)
  [[ $2 == timed ]] && search=(TORUS_CUDNN_BENCHMARK=1)
  resnet50_job "$job" "$1" "$WORK/checkpoints"
  rm -rf "$WORK/checkpoints"
  if ! env TORUS_LOG_LEVEL=info "${search[@]}" "$TORUS" run "$job" >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "bench/gpu: torus run of ResNet-50 ($1, $2) failed (log above)" >&2
    exit 1
  fi
  local ips cost
  ips="$(grep '^RESULT' "$log" | value images_per_s)"
  cost="$(grep -o 'conv search so far: [0-9]* shapes, [0-9.e+-]* s' "$log" | tail -1 | awk '{ print $7 }')"
  echo "# torus run resnet50 $1 ($2): $ips img/s (2nd epoch), conv algorithm choice ${cost:-?} s at start-up"
  echo "RESULT resnet50_$1_$2_torus_images_per_s=$ips round=$3 search_s=${cost:-nan}"
  echo "$ips ${cost:-nan}" >>"$WORK/torus-$1-$2"
}

torch_resnet50() {  # torch_resnet50 PRECISION ROUND: one PyTorch run, as torus_resnet50 (WORK/torch-PRECISION)
  local out ips
  out="$("$PYTHON" "$PEER" resnet50 --batch "$BATCH" --precision "$1")"
  printf '%s\n' "$out" | grep -v '^RESULT' || true
  ips="$(printf '%s\n' "$out" | value torch_resnet50_images_per_s)"
  echo "RESULT resnet50_$1_torch_images_per_s=$ips round=$2"
  echo "$ips" >>"$WORK/torch-$1"
}

# Torus (each mode) and PyTorch, alternating, ROUNDS rounds, each precision; the best round of each. The defaults
# first: they are the figure that decides, and a call cut short keeps them.
for ((round = 1; round <= ROUNDS; ++round)); do
  for precision in $PRECISIONS; do
    echo "# ResNet-50, 224 px, batch $BATCH, $precision, round $round of $ROUNDS: torus run ($MODES) and PyTorch"
    first=1
    for mode in $MODES; do
      torus_resnet50 "$precision" "$mode" "$round"  # a failed run ends the script (set -e)
      if ((first)); then torch_resnet50 "$precision" "$round"; first=0; fi
    done
  done
done

if ((${GPUS:-0} >= 2)); then
  echo "# NCCL all-reduce bus bandwidth over every visible GPU"
  "$BENCH" nccl
  "$PYTHON" "$PEER" nccl
else
  echo "# NCCL all-reduce bus bandwidth: NOT RUN with ${GPUS:-0} GPU (one moves no data)"
fi

if [[ -n "${CIFAR10_DIR:-}" ]]; then
  echo "# ResNet-9 on CIFAR-10 to 94%"
  "$BENCH" resnet9 --data "$CIFAR10_DIR"
  "$PYTHON" "$PEER" resnet9 --data "$CIFAR10_DIR"
else
  echo "# CIFAR10_DIR not set: ResNet-9 time-to-94% skipped"
fi

best() { sort -g "$1" | tail -1; }  # best FILE: its line with the largest first field (images/s)
result="RESULT"
for precision in $PRECISIONS; do
  torch="$(best "$WORK/torch-$precision")"
  fields=""
  ratio=""
  for mode in $MODES; do
    line="$(best "$WORK/torus-$precision-$mode")"
    suffix=""
    [[ $mode == timed ]] && suffix=_timed
    fields+=" torus_$precision$suffix=${line% *}"
    [[ -z "$ratio" ]] && ratio=$(awk -v a="${line% *}" -v b="$torch" 'BEGIN { printf "%.3f", a / b }')
    fields+=" torus_${precision}${suffix}_search_s=${line#* }"
  done
  result+=" resnet50_${precision}_images_per_s_ratio_vs_torch=$ratio$fields torch_$precision=$torch"
done
echo "$result"
