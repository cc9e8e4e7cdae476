#!/usr/bin/env bash
# GPU benchmarks, Torus next to PyTorch (the python3 on PATH, or TORCH_PYTHON; it must have CUDA) in the same run:
#   bench/gpu/gpu.sh                       # ResNet-50 images/s, NCCL bus bandwidth; ResNet-9 when CIFAR10_DIR is set
#   CIFAR10_DIR=/data/cifar-10-batches-bin bench/gpu/gpu.sh
# Fails with "no CUDA device" (exit 3) on a machine without a GPU, and names the Python when it has no PyTorch with
# CUDA (the peer is the point of the comparison). Last line:
#   RESULT resnet50_bf16_images_per_s_ratio_vs_torch=X torus_bf16=Y torch_bf16=Z resnet50_tf32_...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# The python3 on PATH: on the borrowed GPU machines that is the one with PyTorch (docs/gpu.md).
PYTHON="${TORCH_PYTHON:-$(command -v python3 || echo python3)}"

cmake --build "$BUILD_DIR" --target torus_gpu_bench >/dev/null
BENCH="$BUILD_DIR/bin/torus_gpu_bench"
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

# ResNet-50 images/s, Torus and PyTorch alternating (ROUNDS rounds each), in each precision: tf32 (fp32
# activations) and bf16 (Torus's bf16 activations; PyTorch's bf16 autocast). The best round of each is reported.
ROUNDS="${ROUNDS:-2}"
best() { sort -g | tail -1; }
declare -A torus_ips torch_ips
for precision in ${PRECISIONS:-bf16 tf32}; do
  echo "# ResNet-50, 224 px, batch ${BATCH:-128}, full training steps, $precision, $ROUNDS rounds alternating"
  t=""; p=""
  for ((round = 0; round < ROUNDS; ++round)); do
    t+="$(measure resnet50_images_per_s "$BENCH" resnet50 --batch "${BATCH:-128}" --precision "$precision")"$'\n'
    p+="$(measure torch_resnet50_images_per_s "$PYTHON" "$PEER" resnet50 --batch "${BATCH:-128}" \
      --precision "$precision")"$'\n'
  done
  torus_ips[$precision]="$(printf '%s' "$t" | best)"
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
  result+=" torch_$precision=${torch_ips[$precision]}"
done
echo "$result"
