#!/usr/bin/env bash
# The goodput ledger's bookkeeping per training step (issue 31), next to a real step time. `torus_goodput_bench`
# times, in one process, what each step adds for the ledger (RankLedger::add_step, three counter increments and an
# atomic store; fastest of five rounds of 2M steps) and the ledger's JSON on each progress event line (one every
# 0.5 s); then `torus run` trains a small synthetic job (2 ranks x 1 thread, narrow ResNet-9 on 28x28, batch 64: one
# of the shortest steps a job of ours takes, so the largest share) and its RESULT line gives the step time.
# There is no PyTorch peer: PyTorch keeps no such ledger.
#   bench/goodput_overhead.sh
#   SMOKE=1 bench/goodput_overhead.sh   # a job of 20 steps (bench/common.sh)
# Last line: RESULT goodput_overhead_fraction=X ledger_ns_per_step=.. ledger_json_ns_per_event=..
#   telemetry_ns_per_step=.. step_s=.. goodput=..   (fraction = the ledger's cost per step / the step time; < 0.01)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
bench_build "$BUILD_DIR" torus torus-worker torus_goodput_bench
TRAIN_IMAGES=12800
[[ "${SMOKE:-0}" == 1 ]] && TRAIN_IMAGES=1280
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
field() { sed -En "s/(^|.* )$1=([^ ]*).*/\2/p" <<<"$2" | tail -1; }

costs="$("$BUILD_DIR/bin/torus_goodput_bench")"
echo "per step: $costs"
cat >"$WORK/job.yaml" <<YAML
apiVersion: torus.dev/v1alpha1
kind: TrainingJob
metadata: {name: goodput-bench}
spec:
  gang: {workers: 2, threadsPerProcess: 1}
  model: {arch: resnet9, widths: [8, 16, 32, 64]}
  data: {dataset: synthetic, imageSize: 28, loaderThreads: 1, synthetic: {trainImages: $TRAIN_IMAGES, validationImages: 256, numClasses: 4}}
  training: {epochs: 1, batchSize: 64, lrSchedule: {peak: 0.1}, checkpoint: {dir: $WORK/ckpt, everySteps: 100}}
YAML
result="$("$BUILD_DIR/bin/torus" run "$WORK/job.yaml" 2>"$WORK/log" | tail -1)"
echo "$result"
grep '^goodput ' "$WORK/log" || true
ledger="$(field ledger_ns_per_step "$costs")"
json="$(field ledger_json_ns_per_event "$costs")"
telemetry="$(field telemetry_ns_per_step "$costs")"
step="$(field step_s "$result")"
fraction="$(python3 -c "s=$step; print(f'{($ledger + $json * s / 0.5) * 1e-9 / s:.2e}')")"
echo "RESULT goodput_overhead_fraction=$fraction ledger_ns_per_step=$ledger ledger_json_ns_per_event=$json" \
     "telemetry_ns_per_step=$telemetry step_s=$step goodput=$(field goodput "$result")"
