#!/usr/bin/env bash
# Training throughput (forward + backward + SGD update, images/s) of the same ResNets in Torus and in PyTorch CPU
# (the newest torch from PyPI, bench/peer.sh, channels_last), side by side in one run, on synthetic data:
#   - narrow ResNet-9 (widths 8-16-32-64, Fashion-MNIST shape 28x28x1, global max pool)
#   - ResNet-18 (CIFAR stem, 32x32x3, global avg pool)
#
# Headline: the configuration `torus run` uses, 2 processes x 1 thread with the gradient all-reduce: `torus run` of a
# synthetic TrainingJob (2 workers, threadsPerProcess 1, the `auto` all-reduce (shared memory on one host) with 25 MiB
# buckets as in examples/fashion-mnist.yaml) vs PyTorch DDP over Gloo, 2 processes x 1 thread
# (bench/time_to_accuracy/fashion_mnist_ddp.py --synthetic). Global batch 256 for ResNet-9 (the example's, 128 per
# rank) and 128 for ResNet-18 (64 per rank). Each side trains 2 epochs of global batches, 6 x STEPS for ResNet-9 and
# STEPS for ResNet-18 (a ResNet-9 step is ~25x shorter: 10 of them, half a second, measured mostly noise); the
# images/s of the second epoch count (torus: `images_per_s` of `torus run`'s RESULT line; PyTorch: the peer's), the
# first is warm-up.
#
# Secondary (the old figure): one process with THREADS threads, no all-reduce: torus-train-bench (oneDNN CPU
# backend) vs bench/train_throughput/pytorch_peer.py, batch 256 (ResNet-9) and 64 (ResNet-18), WARMUP then STEPS
# steps; ours then runs once more with a per-op profile (where the time goes; PROFILE=0 skips it).
#
# Both run ours and theirs REPEATS times in rounds (odd rounds start with ours, even ones with theirs); a
# configuration's ratio is the median of the rounds' ratios, and its images/s the medians of each side (this VM's
# speed drifts by 20-30% from minute to minute: a round's two runs see the same machine, a side's best does not).
#   bench/train_throughput.sh
#   THREADS=4 STEPS=20 REPEATS=5 bench/train_throughput.sh
#   STEPS=2 WARMUP=1 REPEATS=1 PROFILE=0 bench/train_throughput.sh   # a short run
#   SMOKE=1 bench/train_throughput.sh   # seconds: STEPS=1 WARMUP=1 REPEATS=1 PROFILE=0, both nets with widths
#                                       # 8-64 on small batches, ResNet-18 on 16x16 (bench/common.sh)
#   CPU_ISA=avx2 bench/train_throughput.sh       # what an AVX2 machine runs, both sides (bench/cpu_isa.sh)
#   SECONDARY=0 bench/train_throughput.sh        # the headline (2 processes) only: on a loaded machine the 1-process
#                                                # part at THREADS threads takes most of the time
#   BUILD_DIR=build-onednn3 bench/train_throughput.sh   # another build folder (another oneDNN: docs/building.md)
# Last line: RESULT train_throughput_ratio_vs_pytorch=X (2 processes x 1 thread, ours / theirs, geometric mean over
# the configurations) ratio_1proc_<THREADS>threads=Y (the secondary figure) and each configuration's ratio.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
# shellcheck source=bench/peer.sh
source "$ROOT/bench/peer.sh"
bench_peer_python  # PYTHON, PEER_VERSION: the newest torch from PyPI (PEER=debian: Debian's)
THREADS="${THREADS:-2}"
STEPS="${STEPS:-10}"
WARMUP="${WARMUP:-3}"
REPEATS="${REPEATS:-3}"
PROFILE="${PROFILE:-1}"
SECONDARY="${SECONDARY:-1}"
[[ "${SMOKE:-0}" == 1 ]] && STEPS=1 WARMUP=1 REPEATS=1 PROFILE=0
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

bench_build "$BUILD_DIR" torus torus-worker
TORUS="$BUILD_DIR/bin/torus"
if [[ -z "${BENCH:-}" ]]; then
  bench_build "$BUILD_DIR" torus-train-bench
  BENCH="$BUILD_DIR/bin/torus-train-bench"
fi
PEER="$ROOT/bench/train_throughput/pytorch_peer.py"
DDP_PEER="$ROOT/bench/time_to_accuracy/fashion_mnist_ddp.py"
export TORUS_LOOPBACK_ONLY=1
# shellcheck source=bench/cpu_isa.sh
source "$ROOT/bench/cpu_isa.sh"
bench_cpu_isa
echo "# vector ISA, both sides: $ISA (CPU_ISA=avx2 runs what an AVX2 machine runs)"

# name|arch|widths|stem|pool|in channels|image|batch (one process)|global batch (2 processes)|2-process steps per STEPS
CONFIGS=(
  "resnet9-narrow-28x28x1|resnet9|8,16,32,64|cifar|max|1|28|256|256|6"
  "resnet18-32x32x3|resnet18|64,128,256,512|cifar|avg|3|32|64|128|1"
)
if [[ "${SMOKE:-0}" == 1 ]]; then
  # The same two nets, narrow and on small images and batches: every step of the script in seconds.
  CONFIGS=(
    "resnet9-narrow-28x28x1|resnet9|8,16,32,64|cifar|max|1|28|32|32|1"
    "resnet18-32x32x3|resnet18|8,16,32,64|cifar|avg|3|16|16|16|1"
  )
fi

ips() { awk '/^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "images_per_second" ||
                                                          kv[1] == "images_per_s") print kv[2] } }'; }
# Without the peer (a smoke without PyTorch) its figures, and every ratio, are "skipped".
median() {
  if [[ "$1" == skipped ]]; then echo skipped; return; fi
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "skipped") ? b : sprintf("%.3f", a / b) }'; }
geomean() {
  if [[ "$1" == skipped ]]; then echo skipped; return; fi
  printf '%s\n' "$@" | awk '{ s += log($1); n++ } END { printf "%.3f", exp(s / n) }'
}
fixed3() { if [[ "$1" == skipped ]]; then echo skipped; else printf '%.3f' "$1"; fi; }

torus_job() {  # torus_job FILE NAME ARCH WIDTHS STEM POOL CHANNELS IMAGE GLOBAL_BATCH STEPS: 2 epochs of STEPS batches
  cat >"$1" <<YAML
apiVersion: torus.dev/v1alpha1
kind: TrainingJob
metadata:
  name: throughput-$2
spec:
  gang: {workers: 2, processesPerWorker: 1, device: cpu, threadsPerProcess: 1}
  model: {arch: $3, widths: [$4], stem: $5, pooling: $6, inputChannels: $7}
  data:
    dataset: synthetic
    imageSize: $8
    synthetic: {trainImages: $((${10} * $9)), validationImages: $9, numClasses: 10}
  training:
    epochs: 2
    batchSize: $9
    optimizer: {type: sgd, momentum: 0.9, nesterov: true, weightDecay: 0.0005}
    lrSchedule: {type: one-cycle, initial: 0.01, peak: 0.01, warmupEpochs: 0, final: 0}
    labelSmoothing: 0.1
  allReduce: {algorithm: auto, bucketSizeMB: 25, firstBucketSizeMB: 1}  # as examples/fashion-mnist.yaml
YAML
}

ddp_torus() {  # ddp_torus JOB -> images/s of the second epoch
  local log="$WORK/torus.log"
  if ! "$TORUS" run "$1" >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "torus run $1 failed (log above)" >&2
    exit 1
  fi
  grep '^RESULT' "$log" | ips
}

ddp_pytorch() {  # ddp_pytorch ARCH WIDTHS STEM POOL CHANNELS IMAGE GLOBAL_BATCH STEPS -> images/s of the second epoch
  local log="$WORK/pytorch.log"
  bench_has_peer || { echo skipped; return; }
  if ! "$PYTHON" "$DDP_PEER" --synthetic $(($8 * $7)) --epochs 2 --batch "$7" --arch "$1" --widths "$2" \
    --stem "$3" --pool "$4" --in-channels "$5" --image "$6" --lr-peak 0.01 --warmup-epochs 0 --flip 0 --target 0 \
    --world 2 --threads 1 --port "$(bench_free_port)" >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "PyTorch DDP peer failed (log above)" >&2
    exit 1
  fi
  ips <"$log"
}

ddp_ratios=()
ddp_names=()
for entry in "${CONFIGS[@]}"; do
  IFS='|' read -r name arch widths stem pool channels image _ global factor <<<"$entry"
  steps=$((STEPS * factor))
  job="$WORK/$name.yaml"
  torus_job "$job" "${name%%-*}" "$arch" "$widths" "$stem" "$pool" "$channels" "$image" "$global" "$steps"
  ours=() theirs=() rounds=()
  for ((r = 0; r < REPEATS; r++)); do
    if ((r % 2 == 0)); then
      o="$(ddp_torus "$job")"
      t="$(ddp_pytorch "$arch" "$widths" "$stem" "$pool" "$channels" "$image" "$global" "$steps")"
    else
      t="$(ddp_pytorch "$arch" "$widths" "$stem" "$pool" "$channels" "$image" "$global" "$steps")"
      o="$(ddp_torus "$job")"
    fi
    ours+=("$o") theirs+=("$t") rounds+=("$(ratio "$o" "$t")")
    echo "$name, 2 processes x 1 thread, global batch $global, $steps steps an epoch: torus $o img/s, pytorch ddp $t img/s, ratio ${rounds[-1]}"
  done
  r="$(fixed3 "$(median "${rounds[@]}")")"
  echo "== $name: torus run $(median "${ours[@]}") img/s, pytorch ddp-2 $(median "${theirs[@]}") img/s (medians)," \
    "ratio $r (median of the rounds'; 2 processes x 1 thread)"
  ddp_ratios+=("$r")
  ddp_names+=("ddp2_${name%%-*}=$r")
done

# One process, the configuration in `args`: prints the run's lines and sets o (ours) or t (theirs) to its images/s.
one_torus() {
  local out
  out="$("$BENCH" "${args[@]}" 2>/dev/null)"
  echo "$out" | grep -v '^RESULT'
  o="$(echo "$out" | ips)"
}
one_pytorch() {
  local out
  if ! bench_has_peer; then
    t=skipped
    return
  fi
  out="$("$PYTHON" "$PEER" "${args[@]}")"
  echo "$out" | grep -v '^RESULT'
  t="$(echo "$out" | ips)"
}

one_ratios=()
one_names=()
for entry in "${CONFIGS[@]}"; do
  [[ "$SECONDARY" == 1 ]] || break
  IFS='|' read -r name arch widths stem pool channels image batch _ _ <<<"$entry"
  args=(--arch "$arch" --widths "$widths" --stem "$stem" --pool "$pool" --in-channels "$channels" --image "$image"
    --batch "$batch" --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP")
  ours=() theirs=() rounds=()
  for ((r = 0; r < REPEATS; r++)); do
    if ((r % 2 == 0)); then
      one_torus
      one_pytorch
    else
      one_pytorch
      one_torus
    fi
    ours+=("$o") theirs+=("$t") rounds+=("$(ratio "$o" "$t")")
  done
  r="$(fixed3 "$(median "${rounds[@]}")")"
  echo "== $name: torus $(median "${ours[@]}") img/s, pytorch $(median "${theirs[@]}") img/s (medians), ratio $r" \
    "(median of the rounds'; 1 process x $THREADS threads)"
  if [[ "$PROFILE" == 1 ]]; then
    echo "== $name: where our time goes"
    "$BENCH" "${args[@]}" --profile 2>/dev/null | grep -v '^RESULT'
  fi
  one_ratios+=("$r")
  one_names+=("1proc_${name%%-*}=$r")
done
one_summary="ratio_1proc_${THREADS}threads=skipped"
((${#one_ratios[@]})) && one_summary="ratio_1proc_${THREADS}threads=$(geomean "${one_ratios[@]}")"
echo "RESULT train_throughput_ratio_vs_pytorch=$(geomean "${ddp_ratios[@]}")" \
  "$one_summary ${ddp_names[*]} ${one_names[*]} isa=$ISA peer=$(bench_peer_name)"
