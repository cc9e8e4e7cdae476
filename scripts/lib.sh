# Shared by the scripts in scripts/: install Debian packages once, configure and build into build/.
# shellcheck shell=bash
set -euo pipefail
TORUS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORUS_BUILD="${TORUS_BUILD:-$TORUS_ROOT/build}"

# Everything Torus builds with or tests against, from Debian bookworm.
TORUS_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev
  libyaml-cpp-dev nlohmann-json3-dev libcpprest-dev libssl-dev libboost-dev zlib1g-dev
  libdnnl-dev ocl-icd-opencl-dev libgloo-dev libturbojpeg0-dev libjpeg-dev
  dataset-fashion-mnist prometheus
  python3 python3-pip python3-torch python3-yaml python3-jsonschema
)

torus_install_packages() {
  local missing=()
  for p in "${TORUS_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "torus: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# Python packages from PyPI that Debian lacks: the official Helm library (renders the chart in tests).
TORUS_PIP_PACKAGES=(helm-python-sdk==0.2.2)

torus_install_pip_packages() {
  local missing=()
  for p in "${TORUS_PIP_PACKAGES[@]}"; do
    /usr/bin/python3 -m pip show -q "${p%%==*}" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "torus: installing ${missing[*]} (pip)"
    /usr/bin/python3 -m pip install -q --break-system-packages "${missing[@]}" >/dev/null
  fi
}

# torus_build [TARGET...]: configures build/ once and builds the named targets (all of them when none is named).
# The demo names only the two binaries it runs: a third of the build, so a fresh machine trains sooner.
torus_build() {
  if [ ! -f "$TORUS_BUILD/build.ninja" ]; then
    echo "torus: configuring $TORUS_BUILD"
    cmake -S "$TORUS_ROOT" -B "$TORUS_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  local targets=()
  (($#)) && targets=(--target "$@")
  echo "torus: building ${*:-everything} with $(nproc) jobs"
  cmake --build "$TORUS_BUILD" -j "$(nproc)" "${targets[@]}"
}

# The sanitizer lane (issue 15): the CPU code and its unit tests built with AddressSanitizer and
# UndefinedBehaviorSanitizer in build-asan/ (no CUDA, no end-to-end tests: those start many processes and would
# not fit CI's time under the sanitizers). Any finding aborts the test that made it.
TORUS_SANITIZED_TESTS=(
  common_util_test common_rank_env_test api_test checkpoint_test data_test metrics_registry_test gpu_math_test
  comm_unit_test comm_collectives_test comm_failure_test
  worker_cpu_backend_test worker_layers_test worker_golden_test worker_optim_test worker_trainer_test
  worker_two_ranks_test worker_step_accounting_test worker_device_memory_test worker_run_options_test worker_local_ranks_test
)

torus_sanitizer_lane() {
  local dir="$TORUS_ROOT/build-asan" only
  only="$(IFS=';'; echo "${TORUS_SANITIZED_TESTS[*]}")"
  cmake -S "$TORUS_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTORUS_WITH_CUDA=OFF \
    -DTORUS_SANITIZE=address,undefined "-DTORUS_ONLY_TESTS=$only" >/dev/null
  # torus-worker too: worker_local_ranks_test starts real instrumented ranks.
  cmake --build "$dir" -j "$(nproc)" --target "${TORUS_SANITIZED_TESTS[@]}" torus-worker
  # Leaks are checked too; the suppressions name third-party caches that live as long as the process.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1" \
  LSAN_OPTIONS="suppressions=$TORUS_ROOT/scripts/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir "$dir" --output-on-failure --no-tests=error --timeout 900
}
