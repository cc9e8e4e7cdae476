#!/usr/bin/env bash
# All-reduce bus bandwidth (nccl-tests definition: algBw * 2(n-1)/n) of Torus' algorithms next to torch.distributed
# all_reduce over Gloo (the newest torch from PyPI, bench/peer.sh), in the same run, on this machine.
#   bench/allreduce.sh                 # full sweep: 4 KiB .. 256 MiB, worlds 1x2, 1x4, 2x2 (simulated nodes)
#   QUICK=1 bench/allreduce.sh         # 64 KiB .. 64 MiB, world 1x2 only
#   SMOKE=1 bench/allreduce.sh         # 4 KiB .. 256 KiB, world 1x2, 50 ms a point (bench/common.sh)
# Last line: RESULT allreduce_busbw_ratio_vs_torch_gloo=X  (64 MiB, 2 ranks on one host, Torus auto vs torch Gloo;
# a smoke's largest size)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
# shellcheck source=bench/peer.sh
source "$ROOT/bench/peer.sh"
bench_peer_python  # PYTHON, PEER_VERSION: the newest torch from PyPI (PEER=debian: Debian's)
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

bench_build "$BUILD_DIR" torus_allreduce_bench
BENCH="$BUILD_DIR/bin/torus_allreduce_bench"

POINT=()
if [[ "${SMOKE:-0}" == 1 ]]; then
  MIN=4096; MAX=$((256 << 10)); SHAPES=("2 2"); POINT=(--seconds-per-point 0.05)
elif [[ "${QUICK:-0}" == 1 ]]; then
  MIN=65536; MAX=$((64 << 20)); SHAPES=("2 2")
else
  MIN=4096; MAX=$((256 << 20)); SHAPES=("2 2" "4 4" "4 2")
fi
SIZES=(--min-bytes "$MIN" --max-bytes "$MAX" --size-step 4)
# The headline's point (64 MiB; a smoke's largest) must be measured: make sure the sweep hits it.
HEADLINE=$((64 << 20))
((HEADLINE <= MAX)) || HEADLINE=$MAX
awk -v h="$HEADLINE" -v m="$MIN" 'BEGIN { for (s = m; s < h; s *= 4) {} exit s != h }' ||
  { echo "the sweep from $MIN by 4 must hit $HEADLINE bytes" >&2; exit 2; }

export TORUS_LOG_LEVEL="${TORUS_LOG_LEVEL:-warn}"
for shape in "${SHAPES[@]}"; do
  read -r world per_node <<<"$shape"
  echo "# torus: world=$world, $((world / per_node)) simulated nodes of $per_node ranks"
  "$BENCH" --world "$world" --per-node "$per_node" "${SIZES[@]}" "${POINT[@]}" | tee -a "$OUT/torus.txt"
done
if bench_has_peer; then
  for world in $(printf '%s\n' "${SHAPES[@]}" | awk '{print $1}' | sort -un); do
    echo "# torch.distributed gloo: world=$world"
    "$PYTHON" "$ROOT/bench/allreduce/torch_allreduce.py" --world "$world" "${SIZES[@]}" "${POINT[@]}" \
      --port "$(bench_free_port)" | tee -a "$OUT/torch.txt"
  done
fi

pick() {  # pick FILE ALGO_PREFIX WORLD NODES BYTES -> busbw
  [[ -f "$1" ]] || { echo skipped; return; }
  awk -v a="$2" -v w="world=$3" -v n="nodes=$4" -v b="bytes=$5" '
    index($2, "algo=" a) == 1 && $3 == w && $4 == n && $5 == b { split($8, kv, "="); print kv[2]; exit }' "$1"
}
ours=$(pick "$OUT/torus.txt" auto 2 1 "$HEADLINE")
theirs=$(pick "$OUT/torch.txt" torch_gloo 2 1 "$HEADLINE")
echo "# $HEADLINE bytes, 2 ranks, one host: torus auto busbw ${ours} GB/s, torch gloo busbw ${theirs} GB/s"
ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { print (b == "skipped") ? b : sprintf("%.2f", a / b) }')
echo "RESULT allreduce_busbw_ratio_vs_torch_gloo=$ratio torus_busbw_gbps=$ours torch_gloo_busbw_gbps=$theirs" \
  "bytes=$HEADLINE peer=$(bench_peer_name)"
