#!/usr/bin/env bash
# GPU benchmarks, Torus next to PyTorch (the python3 on PATH, or TORCH_PYTHON; it must have CUDA) in the same run:
#   bench/gpu/gpu.sh                       # ResNet-50 images/s, NCCL bus bandwidth; ResNet-9 when CIFAR10_DIR is set
#   CIFAR10_DIR=/data/cifar-10-batches-bin bench/gpu/gpu.sh
#   ROUNDS=2 STEPS=60 PRECISIONS=bf16 bench/gpu/gpu.sh
# ResNet-50 is measured as users get it: `torus run` of a one-GPU TrainingJob (the real torus-worker, the trainer's
# own defaults: cuDNN's heuristics, the step captured as a CUDA graph), and the same job with the tuned mode
# (TORUS_CUDNN_BENCHMARK=1: cuDNN's timed algorithm search, what PyTorch's cudnn.benchmark does), next to PyTorch
# (bf16 autocast / TF32, channels_last, cudnn.benchmark), alternating. The search's start-up cost is what the
# workers' own log counts ("conv search so far: N shapes, S s", the CUDA backend's line).
# Fails with "no CUDA device" (exit 3) on a machine without a GPU, and names the Python when it has no PyTorch with
# CUDA (the peer is the point of the comparison). Last line:
#   RESULT resnet50_bf16_images_per_s_ratio_vs_torch=X torus_bf16=Y torus_bf16_timed=Y2 torch_bf16=Z
#          torus_bf16_search_s=S torus_bf16_timed_search_s=S2 resnet50_tf32_...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# The python3 on PATH: on the borrowed GPU machines that is the one with PyTorch (docs/gpu.md).
PYTHON="${TORCH_PYTHON:-$(command -v python3 || echo python3)}"

cmake --build "$BUILD_DIR" --target torus_gpu_bench torus torus-worker >/dev/null
BENCH="$BUILD_DIR/bin/torus_gpu_bench"
TORUS="$BUILD_DIR/bin/torus"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
device_rc=0
"$BENCH" check || device_rc=$?
[[ $device_rc == 3 ]] && { echo "no CUDA device: bench/gpu needs an NVIDIA GPU" >&2; exit 3; }
[[ $device_rc == 0 ]] || { echo "bench/gpu: the CUDA device query failed (above)" >&2; exit "$device_rc"; }

if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "bench/gpu: $PYTHON has no PyTorch that sees a CUDA device (above), the side-by-side peer: set TORCH_PYTHON" \
    "to a Python that has one (or SKIP_BENCH=1 scripts/gpu-check.sh to leave the benchmarks out)" >&2
  exit 1
fi
PEER="$ROOT/bench/gpu/torch_peer.py"
export TORUS_LOG_LEVEL="${TORUS_LOG_LEVEL:-warn}"

value() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" | tail -1; }
# measure NAME COMMAND...: runs a benchmark, shows its whole output on stderr, prints the value NAME of its RESULT.
measure() {
  local name="$1" out
  shift
  out="$("$@")"
  printf '%s\n' "$out" >&2
  printf '%s\n' "$out" | value "$name"
}

# A one-GPU TrainingJob of ResNet-50 on synthetic 224 px images, batch BATCH, 2 epochs of STEPS steps: the second
# epoch's images/s count (the first holds the algorithm choice, the eager step and the graph capture). tf32 is the
# job's fp32 (TF32 products: TORUS_CUDA_TF32's default), bf16 the job's bf16 (bf16 activations, fp32 master weights).
resnet50_job() {  # resnet50_job FILE PRECISION
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
    checkpoint: {dir: $WORK/checkpoints, everyEpochs: 100, keep: 1}
YAML
}

# torus_resnet50 PRECISION MODE: MODE "defaults" (the trainer's) or "timed" (TORUS_CUDNN_BENCHMARK=1); prints
# "IMAGES_PER_S SEARCH_SECONDS".
torus_resnet50() {
  local job="$WORK/resnet50-$1.yaml" log="$WORK/torus-resnet50.log" search=(TORUS_CUDNN_BENCHMARK=0)
  [[ $2 == timed ]] && search=(TORUS_CUDNN_BENCHMARK=1)
  resnet50_job "$job" "$1"
  rm -rf "$WORK/checkpoints"
  if ! env TORUS_LOG_LEVEL=info "${search[@]}" "$TORUS" run "$job" >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "bench/gpu: torus run of ResNet-50 ($1, $2) failed (log above)" >&2
    exit 1
  fi
  local ips cost
  ips="$(grep '^RESULT' "$log" | value images_per_s)"
  cost="$(grep -o 'conv search so far: [0-9]* shapes, [0-9.e+-]* s' "$log" | tail -1 | awk '{ print $7 }')"
  echo "# torus run resnet50 $1 ($2): $ips img/s (2nd epoch), conv algorithm choice ${cost:-?} s at start-up" >&2
  echo "$ips ${cost:-nan}"
}

# Torus (defaults, timed) and PyTorch alternating, ROUNDS rounds each, in each precision; the best round of each.
ROUNDS="${ROUNDS:-1}"
BATCH="${BATCH:-128}"
STEPS="${STEPS:-40}"
best() { sort -g | tail -1; }
declare -A torus_ips torus_timed_ips torus_search torus_timed_search torch_ips
for precision in ${PRECISIONS:-bf16 tf32}; do
  echo "# ResNet-50, 224 px, batch $BATCH, torus run (defaults; timed search) and PyTorch, $precision, $ROUNDS round(s)"
  d=""; t=""; p=""
  for ((round = 0; round < ROUNDS; ++round)); do
    out="$(torus_resnet50 "$precision" defaults)"  # a failed run ends the script (set -e)
    d+="${out% *}"$'\n'; torus_search[$precision]="${out#* }"
    p+="$(measure torch_resnet50_images_per_s "$PYTHON" "$PEER" resnet50 --batch "$BATCH" --precision "$precision")"$'\n'
    out="$(torus_resnet50 "$precision" timed)"
    t+="${out% *}"$'\n'; torus_timed_search[$precision]="${out#* }"
  done
  torus_ips[$precision]="$(printf '%s' "$d" | best)"
  torus_timed_ips[$precision]="$(printf '%s' "$t" | best)"
  torch_ips[$precision]="$(printf '%s' "$p" | best)"
done

echo "# NCCL all-reduce bus bandwidth over every visible GPU"
"$BENCH" nccl
"$PYTHON" "$PEER" nccl

if [[ -n "${CIFAR10_DIR:-}" ]]; then
  echo "# ResNet-9 on CIFAR-10 to 94%"
  "$BENCH" resnet9 --data "$CIFAR10_DIR"
  "$PYTHON" "$PEER" resnet9 --data "$CIFAR10_DIR"
else
  echo "# CIFAR10_DIR not set: ResNet-9 time-to-94% skipped"
fi

result="RESULT"
for precision in ${PRECISIONS:-bf16 tf32}; do
  ratio=$(awk -v a="${torus_ips[$precision]}" -v b="${torch_ips[$precision]}" 'BEGIN { printf "%.3f", a / b }')
  result+=" resnet50_${precision}_images_per_s_ratio_vs_torch=$ratio torus_$precision=${torus_ips[$precision]}"
  result+=" torus_${precision}_timed=${torus_timed_ips[$precision]} torch_$precision=${torch_ips[$precision]}"
  result+=" torus_${precision}_search_s=${torus_search[$precision]}"
  result+=" torus_${precision}_timed_search_s=${torus_timed_search[$precision]}"
done
echo "$result"
