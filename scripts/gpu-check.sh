#!/usr/bin/env bash
# The one command that verifies the CUDA backend on a machine with an NVIDIA GPU (docs/gpu.md), in two phases that
# each fit one call of a borrowed machine (under 5 minutes once built, leaving time for a rerun in a 15-minute loan):
#   scripts/gpu-check.sh tests           # build, formula tests, `ctest -L gpu` (CTEST_JOBS=4 at a time, each test
#                                        # within its TIMEOUT, all within CTEST_BUDGET_S=270 with the summary printed)
#   RERUN_FAILED=1 scripts/gpu-check.sh tests   # only the GPU tests that failed last time on this machine
#   CTEST_REGEX='GpuFailure|GpuNccl' scripts/gpu-check.sh tests   # only the GPU tests it matches
#   scripts/gpu-check.sh bench           # 1-GPU training runs through `torus run` (Fashion-MNIST to its target next
#                                        # to PyTorch: bench/gpu/fashion_mnist.sh), then bench/gpu/gpu.sh
#   scripts/gpu-check.sh                 # both, one after the other
#   SANITIZE=1 scripts/gpu-check.sh      # also gpu_backend_test's op tests under compute-sanitizer (memcheck,
#                                        # racecheck, synccheck, initcheck)
#   SKIP_BENCH=1 scripts/gpu-check.sh    # without the benchmarks (they take several minutes)
#   PROFILE=1 scripts/gpu-check.sh bench # also where a ResNet-50 step's GPU time goes, by kind of kernel
#                                        # (bench/gpu/profile.sh: Nsight Systems, else Compute; about a minute)
#   TORUS_OFFLINE=1 scripts/gpu-check.sh # install nothing: build against .gpu-prefix(.tar.gz) of scripts/gpu-prefix.sh
#                                        # (the default where apt-get is missing: a borrowed GPU machine, docs/gpu.md)
#   scripts/gpu-check.sh --print-jobs DIR  # the bench phase's `torus run` arguments, one job a line (shell-quoted,
#                                        # checkpoints under DIR), for each data and GPU count; builds nothing
#                                        # (tests/bench/gpu_scripts_test.cc validates them on the CPU)
# Builds into $TORUS_BUILD (default build/). Exits 3 with "no CUDA device" without a GPU, non-zero on any failure,
# and fails when a GPU test skipped although a device is present (only the no-device test may skip then).
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PHASE="${1:-all}"

# Fashion-MNIST where its Debian package is installed, else the copy scripts/gpu-prefix.sh packs into the prefix (a
# borrowed GPU machine), else CIFAR-sized synthetic images (nothing to download).
FASHION_MNIST_DIR=""
for dir in /usr/share/datasets/fashion-mnist "$TORUS_ROOT/.gpu-prefix/usr/share/datasets/fashion-mnist"; do
  if [[ -f "$dir/train-images-idx3-ubyte.gz" ]]; then FASHION_MNIST_DIR="$dir"; break; fi
done

# The jobs the bench phase trains, `torus run`'s arguments built here only (into JOB_ARGS): the phase runs them and
# --print-jobs prints them.
#   gpu_job fashion-mnist WORKERS DATA_DIR CHECKPOINT_DIR   one epoch of the example on GPUs (DATA_DIR empty:
#                                                           synthetic 32x32 images)
#   gpu_job resnet9 CHECKPOINT_DIR                          Page's recipe on CIFAR-10-sized synthetic data
gpu_job() {
  case "$1" in
    fashion-mnist)
      local data=(--set "spec.data.path=$3")
      [[ -n "$3" ]] || data=(--set spec.data.dataset=synthetic --set spec.data.path=null)
      JOB_ARGS=("$TORUS_ROOT/examples/fashion-mnist.yaml" --workers "$2" --set spec.gang.device=gpu
        # The example's CPU workers set the CPU engine's math threads, which validation refuses for a GPU rank.
        --set spec.gang.threadsPerProcess=null "${data[@]}" --set spec.training.epochs=1
        --set "spec.training.checkpoint.dir=$4") ;;
    resnet9)
      # The example as users run it (widths 64-512, fp16, batch 512, 10 epochs) on 50,000 + 10,000 images of 32x32x3
      # (CIFAR-10 does not travel to a borrowed GPU machine); its 94% target off: on synthetic data the run would stop
      # early, and the figure is the 10 epochs' throughput.
      JOB_ARGS=("$TORUS_ROOT/examples/cifar10-resnet9.yaml" --workers 1 --set spec.data.dataset=synthetic
        --set spec.training.targetAccuracy=null --set spec.data.path=null
        --set spec.data.synthetic.trainImages=50000 --set spec.data.synthetic.validationImages=10000
        --set "spec.training.checkpoint.dir=$2") ;;
    *) echo "gpu-check: no job '$1'" >&2; return 2 ;;
  esac
}
if [[ "$PHASE" == --print-jobs ]]; then
  [[ -n "${2:-}" ]] || { echo "usage: $0 --print-jobs DIR" >&2; exit 2; }
  for data in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" ""; do
    for workers in 1 2; do
      gpu_job fashion-mnist "$workers" "$data" "$2/fashion-mnist-$workers"
      printf '%q ' "${JOB_ARGS[@]}"
      echo
    done
  done
  gpu_job resnet9 "$2/resnet9"
  printf '%q ' "${JOB_ARGS[@]}"
  echo
  exit 0
fi
case "$PHASE" in tests | bench | all) ;; *) echo "usage: $0 [tests|bench|all] | --print-jobs DIR" >&2; exit 2 ;; esac
# The tests `ctest -L gpu` runs, and the kernel formulas' CPU test; a prefix build (torus_use_prefix) registers
# only these.
GPU_TESTS=(gpu_math_test gpu_backend_test gpu_graph_test gpu_nccl_test gpu_data_parallel_test gpu_precision_test
  gpu_failure_test comm_nccl_test)
if torus_offline; then
  torus_use_prefix "${GPU_TESTS[@]}"
  torus_build torus torus-worker torus_gpu_bench "${GPU_TESTS[@]}"
else
  torus_install_packages "${TORUS_PACKAGES[@]}" "${TORUS_TEST_PACKAGES[@]}"
  torus_build
fi

step() { printf '\n=== gpu-check: %s\n' "$*"; }
BIN="$TORUS_BUILD/bin"
TESTS="$TORUS_BUILD/tests"

if [[ ! -x "$TESTS/gpu_backend_test" || ! -x "$BIN/torus_gpu_bench" ]]; then
  echo "gpu-check: the CUDA backend was not built in $TORUS_BUILD (CMake needs nvcc, cuDNN and NCCL under" \
    "/usr/local/cuda; see 'Torus: CUDA backend' in the configure output, or delete $TORUS_BUILD to reconfigure)" >&2
  exit 1
fi

step "devices"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv || true
fi
device_rc=0
DEVICES="$("$BIN/torus_gpu_bench" check)" || device_rc=$?
echo "$DEVICES"
# 3: no device (or no driver); anything else: the driver or runtime failed, with CUDA's message above.
[[ $device_rc == 3 ]] && { echo "gpu-check: no CUDA device: this check needs an NVIDIA GPU" >&2; exit 3; }
[[ $device_rc == 0 ]] || { echo "gpu-check: the CUDA device query failed (above)" >&2; exit "$device_rc"; }
# The devices CUDA gives this process (CUDA_VISIBLE_DEVICES honoured), not the ones nvidia-smi lists.
GPUS="$(grep -c '^device [0-9]' <<<"$DEVICES" || true)"

if [[ "$PHASE" != bench ]]; then
step "kernel formulas and the caching pool on the CPU (tests/gpu_math)"
"$TESTS/gpu_math_test" --gtest_brief=1

CTEST_JOBS="${CTEST_JOBS:-4}"
step "GPU tests (ctest -L gpu, $CTEST_JOBS at a time): every op against the CPU backend, graphs, staging, NCCL"
LOG="$TORUS_BUILD/gpu-check-ctest.log"
# Bounded so that the phase ends within its call with its summary printed: ctest itself stops at CTEST_BUDGET_S from
# now (--stop-time: a test still running then is timed out, one not started is not run), each test within its own
# TIMEOUT (tests/gpu and comm_nccl_test: 120 s, gpu_failure_test 60 s; --timeout gives the same to any test without
# one), CTEST_JOBS tests at a time, so one hang costs one slot its timeout, not the call. `timeout` is the last resort
# should ctest itself hang. RERUN_FAILED=1 runs only what failed in the last run on this machine (ctest
# --rerun-failed); CTEST_REGEX only the tests it matches.
budget="${CTEST_BUDGET_S:-270}"
select=(-L gpu)
[[ -n "${CTEST_REGEX:-}" ]] && select+=(-R "$CTEST_REGEX")
[[ "${RERUN_FAILED:-0}" == 1 ]] && select+=(--rerun-failed)
ctest_rc=0
timeout -k 10 $((budget + 30)) ctest --test-dir "$TORUS_BUILD" "${select[@]}" --output-on-failure --no-tests=error \
  -j "$CTEST_JOBS" --timeout 120 --stop-time "$(date -d "+$budget seconds" +%H:%M:%S)" 2>&1 | tee "$LOG" ||
  ctest_rc=$?
# A test the budget left unstarted does not appear in ctest's summary: named here, never counted as passed.
unstarted="$(ctest --test-dir "$TORUS_BUILD" -N "${select[@]}" | sed -n 's/^ *Test *#[0-9]*: //p' |
  while read -r name; do grep -qF ": $name " "$LOG" || echo "  $name"; done)"
if [[ -n "$unstarted" ]]; then
  echo "gpu-check: NOT RUN (CTEST_BUDGET_S=$budget s ran out first):"
  echo "$unstarted"
fi
# With a device only the no-device test may skip (and, with one GPU, the tests of two ranks on two devices: NCCL
# allows one rank per device); any other skip hides a test that never ran.
ALLOWED_SKIPS='BackendWithoutADeviceThrowsATypedError'
TWO_GPU_TESTS='GpuDataParallel|gpu_data_parallel|CommunicationThreadWorksOnTheRanksDevice|Fp16OverflowOnOneRankSkipsThatStepOnEveryRank|DeviceTimeLeavesOutTheWaitForALatePeer'
if [[ "${GPUS:-0}" -lt 2 ]]; then
  ALLOWED_SKIPS="$ALLOWED_SKIPS|$TWO_GPU_TESTS"
  # Named, never counted as passed: these need two devices.
  echo "gpu-check: NOT RUN with $GPUS GPU(s) (they need two):"
  grep '(Skipped)' "$LOG" | grep -E "$TWO_GPU_TESTS" | sed 's/^/  /' || true
  # This one passes with one GPU, but a world of one takes no real collective path (NCCL copies in place): it shows
  # the capture, the replays and their watches, not NCCL's kernels inside a graph across ranks.
  echo "  NCCL reductions inside a captured CUDA graph across ranks (TORUS_NCCL_GRAPHS=1): with one GPU," \
    "ACapturedStepReplaysItsReductionsAndEachReplayIsWatched runs a world of one, which takes no real collective path"
fi
if grep '(Skipped)' "$LOG" | grep -Ev "$ALLOWED_SKIPS"; then
  echo "gpu-check: the GPU tests above skipped although a CUDA device is present" >&2
  exit 1
fi
if [[ $ctest_rc != 0 || -n "$unstarted" ]]; then
  echo "gpu-check: GPU tests failed or did not run (above). Rerun only those: RERUN_FAILED=1 $0 tests (the failed" \
    "ones, on this machine), CTEST_REGEX='NameA|NameB' $0 tests (any)" >&2
  exit 1
fi

if [[ "${SANITIZE:-0}" == 1 ]]; then
  SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  [[ -x "$SAN" ]] || { echo "gpu-check: SANITIZE=1 needs compute-sanitizer (CUDA toolkit)" >&2; exit 1; }
  # The op tests are small; the ResNet-9 training tests are slow under the sanitizer and are covered above.
  FILTER='-*ResNet9*:*CapturedTraining*'
  for tool in memcheck racecheck synccheck initcheck; do
    step "compute-sanitizer --tool $tool"
    "$SAN" --tool "$tool" --error-exitcode 1 "$TESTS/gpu_backend_test" --gtest_filter="$FILTER" --gtest_brief=1
  done
fi

fi

if [[ "$PHASE" != tests ]]; then
DATA_NAME="Fashion-MNIST ($FASHION_MNIST_DIR)"
if [[ -z "$FASHION_MNIST_DIR" ]]; then
  DATA_NAME="synthetic 32x32 images"
  echo "gpu-check: no Fashion-MNIST (neither /usr/share/datasets/fashion-mnist nor .gpu-prefix/:" \
    "scripts/gpu-prefix.sh packs it): the time to target next to PyTorch is skipped"
fi
RUN_DIR="$TORUS_BUILD/gpu-check-run"
if [[ -n "$FASHION_MNIST_DIR" && "${SKIP_BENCH:-0}" != 1 ]]; then
  # The one-epoch run below, carried through to the example's target (its epochs, its targetAccuracy), and timed
  # next to PyTorch on the same GPU.
  step "one GPU worker trains $DATA_NAME to the example's target, torus run next to PyTorch" \
    "(bench/gpu/fashion_mnist.sh)"
  BUILD_DIR="$TORUS_BUILD" FASHION_MNIST_DIR="$FASHION_MNIST_DIR" "$TORUS_ROOT/bench/gpu/fashion_mnist.sh"
else
  step "one GPU worker trains on $DATA_NAME for one epoch (torus run, the real torus-worker)"
  rm -rf "$RUN_DIR"
  gpu_job fashion-mnist 1 "$FASHION_MNIST_DIR" "$RUN_DIR/checkpoints"
  "$BIN/torus" run "${JOB_ARGS[@]}"
fi

step "Page's ResNet-9 on CIFAR-10-sized synthetic data (examples/cifar10-resnet9.yaml, torus run)"
rm -rf "$RUN_DIR-resnet9"
gpu_job resnet9 "$RUN_DIR-resnet9/checkpoints"
"$BIN/torus" run "${JOB_ARGS[@]}"

if [[ "${GPUS:-0}" -ge 2 ]]; then
  # Eager steps (the default), then steps captured with the NCCL reductions inside (TORUS_NCCL_GRAPHS=1, off by
  # default until shown here: docs/gpu.md).
  for graphs in 0 1; do
    step "two GPU workers train on $DATA_NAME for one epoch (NCCL gradients, torus run, TORUS_NCCL_GRAPHS=$graphs)"
    rm -rf "$RUN_DIR-2"
    gpu_job fashion-mnist 2 "$FASHION_MNIST_DIR" "$RUN_DIR-2/checkpoints"
    TORUS_NCCL_GRAPHS=$graphs "$BIN/torus" run "${JOB_ARGS[@]}"
  done
else
  echo "gpu-check: NOT RUN with ${GPUS:-0} GPU: two GPU workers training with NCCL gradients, eager and captured" \
    "(TORUS_NCCL_GRAPHS=1): they need two"
fi

if [[ "${SKIP_BENCH:-0}" != 1 ]]; then
  step "benchmarks (bench/gpu/gpu.sh)"
  BUILD_DIR="$TORUS_BUILD" "$TORUS_ROOT/bench/gpu/gpu.sh"
fi
if [[ "${PROFILE:-0}" == 1 ]]; then
  step "where a ResNet-50 step's GPU time goes (bench/gpu/profile.sh, bf16)"
  BUILD_DIR="$TORUS_BUILD" "$TORUS_ROOT/bench/gpu/profile.sh"
fi
fi
step "GPU checks passed (phase: $PHASE)"
