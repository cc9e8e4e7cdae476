#!/usr/bin/env bash
# Training throughput (forward + backward + SGD update, images/s) of the same ResNet, batch and thread count in
# our worker (torus-train-bench: oneDNN CPU backend) and in PyTorch CPU (Debian python3-torch via /usr/bin/python3,
# channels_last), side by side in one run, on synthetic data:
#   - narrow ResNet-9 (widths 8-16-32-64, Fashion-MNIST shape 28x28x1, batch 256, global max pool)
#   - ResNet-18 (CIFAR stem, 32x32x3, batch 64, global avg pool)
# Each configuration runs ours and theirs alternately REPEATS times and keeps each side's best (the machine is
# shared). Ours then runs once more with a per-op profile (where the time goes).
#   bench/train_throughput.sh
#   THREADS=4 STEPS=20 REPEATS=3 bench/train_throughput.sh
# Last line: RESULT train_throughput_ratio_vs_pytorch=X  (ours / theirs, geometric mean over the configurations)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
THREADS="${THREADS:-2}"
STEPS="${STEPS:-10}"
WARMUP="${WARMUP:-3}"
REPEATS="${REPEATS:-2}"

if [[ -z "${BENCH:-}" ]]; then
  cmake --build "$BUILD_DIR" --target torus-train-bench >/dev/null
  BENCH="$BUILD_DIR/bin/torus-train-bench"
fi
PEER="$ROOT/bench/train_throughput/pytorch_peer.py"

CONFIGS=(
  "resnet9-narrow-28x28x1|--arch resnet9 --widths 8,16,32,64 --in-channels 1 --image 28 --batch 256 --pool max"
  "resnet18-32x32x3|--arch resnet18 --stem cifar --in-channels 3 --image 32 --batch 64 --pool avg"
)

ips() { awk '/^RESULT images_per_second=/ { split($2, a, "="); print a[2] }'; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }

ratios=()
for entry in "${CONFIGS[@]}"; do
  name="${entry%%|*}"
  args="${entry#*|}"
  ours=0
  theirs=0
  for ((r = 0; r < REPEATS; r++)); do
    # shellcheck disable=SC2086
    out="$("$BENCH" $args --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" 2>/dev/null)"
    echo "$out" | grep -v '^RESULT'
    o="$(echo "$out" | ips)"
    # shellcheck disable=SC2086
    out="$("$PYTHON" "$PEER" $args --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP")"
    echo "$out" | grep -v '^RESULT'
    t="$(echo "$out" | ips)"
    ours="$(best "$ours" "$o")"
    theirs="$(best "$theirs" "$t")"
  done
  ratio="$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')"
  echo "== $name: torus $ours img/s, pytorch $theirs img/s, ratio $ratio ($THREADS threads)"
  echo "== $name: where our time goes"
  # shellcheck disable=SC2086
  "$BENCH" $args --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" --profile 2>/dev/null | grep -v '^RESULT'
  ratios+=("$ratio")
done
geo="$(printf '%s\n' "${ratios[@]}" | awk '{ s += log($1); n++ } END { printf "%.3f", exp(s / n) }')"
echo "RESULT train_throughput_ratio_vs_pytorch=$geo"
