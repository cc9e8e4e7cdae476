#!/usr/bin/env bash
# Operator scale benchmark (issue 5): against kube-standin with its simulated kubelet, create 200 TrainingJobs of
# 8 workers at once (each with its checkpoint claim, as examples/fashion-mnist.yaml: CHECKPOINTS=none for jobs
# without checkpoints) and measure, per job, the time from creation until every one of its pods exists (p50/p99) and
# until its status says Running, the operator's API requests per job from creation to Running (the stand-in counts
# them, by resource and verb too), and the operator's peak RSS. Run twice: with the client rate limit raised (the
# operator itself is measured) and at the chart's defaults (no flags: no client-side limit, docs/operator.md); with
# KCM=1 a third run at kube-controller-manager's --qps 20 --burst 30. The stand-in's own request capacity is printed
# beside it. There is no PyTorch peer for a control plane. A job that fails (its Failed condition) ends the run at
# once, its reason and message quoted by the driver.
#
#   bench/operator_scale.sh [BUILD_DIR]      (env: JOBS=200 WORKERS=8 OPERATOR_WORKERS=4 TLS=0 KCM=0 CHECKPOINTS=claim)
#   SMOKE=1 bench/operator_scale.sh          # 4 jobs x 2 workers, a 1 s capacity probe (bench/common.sh)
# TLS=1 serves the API over HTTPS with token authentication (kube-standin --tls-dir), as a cluster does.
# Last line: RESULT operator_jobs_per_second=X p99_seconds=Y rss_mb=Z requests_per_job=R  (raised-limit run), then
# the chart's defaults' run: default_jobs_per_second, default_p99_seconds, default_running_p99_seconds, ...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-${BUILD_DIR:-${TORUS_BUILD:-$ROOT/build}}}"
JOBS="${JOBS:-200}"
WORKERS="${WORKERS:-8}"
OPERATOR_WORKERS="${OPERATOR_WORKERS:-4}"
TLS="${TLS:-0}"
KCM="${KCM:-0}"
CHECKPOINTS="${CHECKPOINTS:-claim}"
CAPACITY_SECONDS=3
if [[ "${SMOKE:-0}" == 1 ]]; then
  JOBS=4 WORKERS=2 CAPACITY_SECONDS=1
fi
for bin in "$BUILD/bin/torus" "$BUILD/bin/kube-standin" "$BUILD/bin/operator_scale_driver"; do
  [ -x "$bin" ] || { echo "operator_scale: $bin is not built (cmake --build $BUILD)" >&2; exit 2; }
done
# Figures move with whatever else runs: say what did.
echo "# $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Returns when the file exists and is not empty (bounded).
await_file() {
  for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.1; done
  echo "operator_scale: $1 never appeared" >&2
  return 1
}

cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$1/stat"; }

# run_once LABEL QPS BURST (QPS empty: the operator's default) -> prints the driver's lines and "rss_mb=..."; appends a summary to $WORK/summary
run_once() {
  local label="$1" qps="$2" burst="$3" dir="$WORK/$1"
  mkdir -p "$dir"
  # Enough simulated nodes for 1600 CPU pods; the kubelet starts pods at once.
  local tls_flags=() rate_flags=()
  [ "$TLS" = 1 ] && tls_flags=(--tls-dir "$dir/tls")
  [ -n "$qps" ] && rate_flags=(--qps "$qps" --burst "$burst")
  "$BUILD/bin/kube-standin" --kubelet --nodes 64 --racks 8 --crds "$ROOT/crds" --history 200000 \
    --kubeconfig "$dir/kubeconfig" "${tls_flags[@]}" >"$dir/standin.log" 2>&1 &
  local standin=$!
  PIDS+=("$standin")
  await_file "$dir/kubeconfig"
  # Benchmarks, like tests, connect only to loopback (the stand-in hands out 127.x.y.z pod IPs).
  TORUS_LOOPBACK_ONLY=1 TORUS_LOG_LEVEL=warn "$BUILD/bin/torus" operator --kubeconfig "$dir/kubeconfig" --metrics-addr 127.0.0.1:0 \
    "${rate_flags[@]}" --workers "$OPERATOR_WORKERS" >"$dir/operator.log" 2>&1 &
  local op=$!
  PIDS+=("$op")
  await_file "$dir/operator.log"
  "$BUILD/bin/operator_scale_driver" --kubeconfig "$dir/kubeconfig" --jobs "$JOBS" --workers "$WORKERS" \
    --checkpoints "$CHECKPOINTS" --capacity-seconds "$CAPACITY_SECONDS" --timeout 600 | tee "$dir/driver.out"
  local rss_kb op_cpu standin_cpu
  rss_kb="$(awk '/VmHWM/ {print $2}' "/proc/$op/status")"
  # CPU seconds (user + system) each process used: where a shared machine's cores went.
  op_cpu="$(cpu_seconds "$op")"
  standin_cpu="$(cpu_seconds "$standin")"
  echo "cpu_seconds operator=$op_cpu standin=$standin_cpu"
  kill "$op" "$standin"
  wait "$op" "$standin" 2>/dev/null || true
  local rss_mb
  rss_mb="$(awk -v k="$rss_kb" 'BEGIN {printf "%.1f", k / 1024}')"
  echo "rss_mb=$rss_mb"
  sed -n 's/^DRIVER //p' "$dir/driver.out" | sed "s/^/$label qps=${qps:-none} burst=${burst:-none} rss_mb=$rss_mb op_cpu_s=$op_cpu standin_cpu_s=$standin_cpu /" >>"$WORK/summary"
}

echo "== raised client rate limit (the operator is measured) =="
run_once raised 100000 100000
echo "== the chart's default client rate limit (none) =="
run_once default "" ""
if [ "$KCM" = 1 ]; then
  echo "== kube-controller-manager's client rate limit (qps 20, burst 30) =="
  run_once kcm 20 30
fi
echo "== summary =="
cat "$WORK/summary"
get() { sed -n "s/^$1 .* $2=\([^ ]*\).*/\1/p" "$WORK/summary"; }  # get RUN KEY
echo "RESULT operator_jobs_per_second=$(get raised jobs_per_second) p99_seconds=$(get raised p99_seconds)" \
  "rss_mb=$(get raised rss_mb) requests_per_job=$(get raised requests_per_job)" \
  "default_jobs_per_second=$(get default jobs_per_second) default_p99_seconds=$(get default p99_seconds)" \
  "default_running_p99_seconds=$(get default running_p99_seconds) default_rss_mb=$(get default rss_mb)" \
  "default_requests_per_job=$(get default requests_per_job) jobs=$JOBS workers=$WORKERS"
