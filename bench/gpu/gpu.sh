#!/usr/bin/env bash
# GPU benchmarks, Torus next to PyTorch (the python3 on PATH, or TORCH_PYTHON; it must have CUDA) in the same run:
#   bench/gpu/gpu.sh                       # ResNet-50 images/s, NCCL bus bandwidth; ResNet-9 when CIFAR10_DIR is set
#   CIFAR10_DIR=/data/cifar-10-batches-bin bench/gpu/gpu.sh
# Fails with "no CUDA device" (exit 3) on a machine without a GPU, and names the Python when it has no PyTorch with
# CUDA (the peer is the point of the comparison). Last line:
#   RESULT resnet50_images_per_s_ratio_vs_torch=X torus=Y torch=Z
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

echo "# ResNet-50, 224 px, batch ${BATCH:-128}, full training steps"
torus_r50=$("$BENCH" resnet50 --batch "${BATCH:-128}" | tee /dev/stderr | value resnet50_images_per_s)
torch_r50=$("$PYTHON" "$PEER" resnet50 --batch "${BATCH:-128}" | tee /dev/stderr | value torch_resnet50_images_per_s)

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

ratio=$(awk -v a="$torus_r50" -v b="$torch_r50" 'BEGIN { printf "%.3f", a / b }')
echo "RESULT resnet50_images_per_s_ratio_vs_torch=$ratio torus=$torus_r50 torch=$torch_r50"
