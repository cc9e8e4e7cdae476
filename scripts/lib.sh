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

torus_build() {
  local jobs
  jobs="$(nproc)"
  if [ ! -f "$TORUS_BUILD/build.ninja" ]; then
    cmake -S "$TORUS_ROOT" -B "$TORUS_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  fi
  cmake --build "$TORUS_BUILD" -j "$jobs"
}
