# The GPU variant of the worker image (scripts/images.sh --gpu; docs/building.md, "GPU variant"), sourced by
# scripts/images.sh: `torus-worker` with the CUDA backend, and NVIDIA's redistributable CUDA libraries taken from
# their PyPI wheels, pinned by checksum (never whatever toolkit the build machine has in /usr/local/cuda), each
# wheel's licence under /usr/share/doc/<wheel>/ and listed in /usr/share/doc/torus/packages.txt.
# shellcheck shell=bash

# The tag: the chart's appVersion and the CUDA major the worker needs from the node's driver (CUDA 13: driver 580
# or newer), so a later CUDA's image gets a tag of its own. Read from the operator's own default (one writer: the
# operator gives a GPU job without an image this very tag).
TORUS_GPU_TAG_SUFFIX="$(sed -n 's/.*kGpuImageTagSuffix = "\(.*\)";.*/\1/p' "$TORUS_ROOT/common/api/defaults.h")"
[[ -n "$TORUS_GPU_TAG_SUFFIX" ]] || { echo "torus: no kGpuImageTagSuffix in common/api/defaults.h" >&2; exit 1; }

# The wheels: the versions of the CUDA 13.0 toolkit the worker is compiled with (nvcc 13.0.88; /usr/local/cuda was
# installed from these very wheels, its dist-info/ names them), so the code runs on the libraries it was built for.
# Each entry: the pin (pip checks the SHA-256: --require-hashes; the cache checks it too), then the libraries the
# image takes from that wheel (shell patterns). cuDNN 9 opens its engine sub-libraries at run time: all of them.
# NVRTC: cuDNN's runtime-compiled engines and cuBLASLt open libnvrtc.so.13 at run time (and it opens its builtins). The
# CUDA 13 runtime and cuBLAS have no -cu13 suffix on PyPI (nvidia-cuda-runtime-cu13 and nvidia-cublas-cu13 are
# 0.0.1 placeholders); cuDNN and NCCL keep it.
TORUS_GPU_WHEELS=(
  "nvidia-cuda-runtime==13.0.96 7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548 libcudart.so.13"
  "nvidia-cublas==13.1.0.3 ee8722c1f0145ab246bccb9e452153b5e0515fd094c3678df50b2a0888b8b171 \
    libcublas.so.13,libcublasLt.so.13"
  "nvidia-cudnn-cu13==9.19.0.56 d20e1734305e9d68889a96e3f35094d733ff1f83932ebe462753973e53a572bf libcudnn*.so.9"
  "nvidia-nccl-cu13==2.28.9 e4553a30f34195f3fa1da02a6da3d6337d28f2003943aa0a3d247bbc25fefc42 libnccl.so.2"
  "nvidia-cuda-nvrtc==13.0.88 ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575 \
    libnvrtc.so.13,libnvrtc-builtins.so.13.0"
)

# Release like the CPU images, the CUDA backend for A100 (sm_80) and H100/H200 (sm_90), only torus-worker, and no
# RPATH: the build tree's would name /usr/local/cuda/lib, and the image's LD_LIBRARY_PATH is what finds the wheels'
# libraries (images.py resolves the binary against them, and tests/packaging/gpu_image_test.py inside the image).
TORUS_GPU_CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DTORUS_BUILD_TESTS=OFF
  -DTORUS_WITH_OPERATOR=OFF -DTORUS_WITH_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=80;90" -DCMAKE_SKIP_BUILD_RPATH=ON
  -DCMAKE_UNITY_BUILD=ON)

# Builds $TORUS_BUILD/bin/torus-worker with the CUDA backend and fetches the wheels (TORUS_GPU_WHEEL_ARGS).
torus_gpu_worker_build() {
  TORUS_CMAKE_ARGS+=("${TORUS_GPU_CMAKE_ARGS[@]}")
  torus_find_wheel_cuda_libs
  torus_build torus-worker
  # Without nvcc, cuDNN or NCCL the configure leaves the CUDA backend out and builds a CPU worker: refuse that.
  if ! readelf -d "$TORUS_BUILD/bin/torus-worker" | grep -q 'NEEDED.*libcudart'; then
    echo "torus: $TORUS_BUILD/bin/torus-worker was built without the CUDA backend: the configure found no CUDA" \
      "toolkit with cuDNN and NCCL (docs/gpu.md); remove $TORUS_BUILD once it is installed" >&2
    return 1
  fi
  torus_gpu_wheels "$TORUS_BUILD/wheels"
}

# torus_gpu_cached_wheel DIR NAME==VERSION SHA256: the wheel in DIR with that checksum (nothing when none).
torus_gpu_cached_wheel() {
  local name="${2%%==*}" version="${2##*==}" f
  for f in "$1/${name//-/_}-$version-"*.whl; do
    if [[ -f "$f" && "$(sha256sum "$f" | cut -d' ' -f1)" == "$3" ]]; then
      echo "$f"
      return 0
    fi
  done
}

# torus_gpu_wheels DIR: the pinned wheels in DIR, downloaded only when missing there (a second build downloads
# nothing and asks no index); sets TORUS_GPU_WHEEL_ARGS to images.py's --wheel FILE.whl:LIBS arguments.
torus_gpu_wheels() {
  local cache="$1" entry pin sha libs file missing=()
  mkdir -p "$cache"
  for entry in "${TORUS_GPU_WHEELS[@]}"; do
    read -r pin sha libs <<<"$entry"
    [[ -n "$(torus_gpu_cached_wheel "$cache" "$pin" "$sha")" ]] || missing+=("$pin --hash=sha256:$sha")
  done
  if ((${#missing[@]})); then
    echo "torus: downloading ${missing[*]%% *} into $cache (pip)"
    printf '%s\n' "${missing[@]}" >"$cache/requirements.txt"
    /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes -r "$cache/requirements.txt" \
      -d "$cache" >&2
  fi
  TORUS_GPU_WHEEL_ARGS=()
  for entry in "${TORUS_GPU_WHEELS[@]}"; do
    read -r pin sha libs <<<"$entry"
    file="$(torus_gpu_cached_wheel "$cache" "$pin" "$sha")"
    if [[ -z "$file" ]]; then
      echo "torus: no wheel $pin with SHA-256 $sha in $cache after pip's download" >&2
      return 1
    fi
    TORUS_GPU_WHEEL_ARGS+=(--wheel "$file:$libs")
  done
}

# The image's entry of images.json (images.sh's `image` and `worker_repo`; the later --tag wins over image's).
torus_gpu_worker_image() {
  local tag_gpu="$tag$TORUS_GPU_TAG_SUFFIX"
  echo "["
  image --name "$worker_repo" --tag "$tag_gpu" --binary "$TORUS_BUILD/bin/torus-worker" \
    --entrypoint /usr/local/bin/torus-worker "${TORUS_GPU_WHEEL_ARGS[@]}" \
    --env NVIDIA_DRIVER_CAPABILITIES=compute,utility --env "NVIDIA_REQUIRE_CUDA=cuda>=13.0" \
    --label "org.opencontainers.image.description=torus-worker with the CUDA backend (sm_80, sm_90): CUDA runtime\
 13.0, cuBLAS 13.1, cuDNN 9.19, NCCL 2.28 and NVRTC from NVIDIA's PyPI wheels (licences: /usr/share/doc/torus/\
packages.txt). The driver's libcuda.so.1 and libnvidia-ml.so.1 are not in the image: the NVIDIA container runtime\
 mounts the node's (driver 580 or newer)." \
    --out "$out/torus-worker-$tag_gpu.oci.tar"
  echo "]"
}
