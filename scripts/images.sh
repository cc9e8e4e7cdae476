#!/usr/bin/env bash
# Builds Torus's two container images as OCI image archives, with no container engine (docs/building.md, "Images"):
#
#   scripts/images.sh            -> build-images/out/torus-operator-<version>.oci.tar (the operator: `torus`)
#                                   build-images/out/torus-worker-<version>.oci.tar   (the CPU worker: `torus-worker`)
#
# The names and the tag are the chart's (charts/torus-operator: values.yaml's repositories, Chart.yaml's appVersion),
# so `helm install` pulls exactly these. Load them where the cluster can pull them:
#   kind load image-archive build-images/out/torus-worker-0.1.0.oci.tar
#   skopeo copy oci-archive:build-images/out/torus-worker-0.1.0.oci.tar docker://registry.example.com/torus-worker:0.1.0
#   ctr -n k8s.io images import build-images/out/torus-worker-0.1.0.oci.tar
#
#   scripts/images.sh --gpu      -> build-images-gpu/out/torus-worker-<version>-cuda13.oci.tar (the GPU worker:
#                                   `torus-worker` with the CUDA backend and NVIDIA's CUDA libraries; a GPU job names
#                                   it in spec.gang.image; docs/building.md, "GPU variant")
#
# The binaries come from build-images/ (Release, no CUDA, no tests, a unity build); the libraries from the Debian
# packages installed here (scripts/images.py). SOURCE_DATE_EPOCH (default: the commit's time) fixes every time in
# the archives: the same commit builds the same digests. The digests and sizes are written to out/images.json.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

gpu=0
case "${1:-}" in
  "") ;;
  --gpu) gpu=1 ;;
  *) echo "usage: scripts/images.sh [--gpu]   (docs/building.md, \"Images\")" >&2; exit 2 ;;
esac
if ((gpu)); then
  source "$TORUS_ROOT/scripts/images-gpu.sh"  # the pinned CUDA wheels, the GPU build's flags, its one image
  TORUS_IMAGES_BUILD="${TORUS_IMAGES_BUILD:-$TORUS_ROOT/build-images-gpu}"
fi
TORUS_IMAGES_BUILD="${TORUS_IMAGES_BUILD:-$TORUS_ROOT/build-images}"
out="${TORUS_IMAGES_OUT:-$TORUS_IMAGES_BUILD/out}"

torus_install_packages "${TORUS_PACKAGES[@]}" libcpprest-dev python3 binutils
TORUS_BUILD="$TORUS_IMAGES_BUILD"
if ((gpu)); then
  torus_gpu_worker_build
else
TORUS_CMAKE_ARGS+=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DTORUS_BUILD_TESTS=OFF
  -DTORUS_WITH_CUDA=OFF -DCMAKE_UNITY_BUILD=ON)
torus_build torus torus-worker
fi

chart="$TORUS_ROOT/charts/torus-operator"
tag="$(awk -F'"' '/^appVersion:/ {print $2}' "$chart/Chart.yaml")"
# values.yaml: `image:` then `  repository: ...` (the operator's), `workerImage:` then its own.
repository() { awk -v key="$1:" '$1 == key {found = 1; next} found && $1 == "repository:" {print $2; exit}' \
  "$chart/values.yaml"; }
operator_repo="$(repository image)"
worker_repo="$(repository workerImage)"
[[ -n "$tag" && -n "$operator_repo" && -n "$worker_repo" ]] || {
  echo "torus: cannot read the image names from $chart (appVersion '$tag', '$operator_repo', '$worker_repo')" >&2
  exit 1
}
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$TORUS_ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}"
revision="${TORUS_IMAGES_REVISION:-$(git -C "$TORUS_ROOT" rev-parse HEAD 2>/dev/null || true)}"
mkdir -p "$out"
image() {
  /usr/bin/python3 "$TORUS_ROOT/scripts/images.py" --work "$TORUS_IMAGES_BUILD/staging" --tag "$tag" \
    --revision "$revision" "$@"
}
if ((gpu)); then
  torus_gpu_worker_image >"$out/images.json.new"
else
{
  echo "["
  image --name "$operator_repo" --binary "$TORUS_BUILD/bin/torus" --entrypoint /usr/local/bin/torus --cmd operator \
    --out "$out/torus-operator-$tag.oci.tar"
  echo ","
  image --name "$worker_repo" --binary "$TORUS_BUILD/bin/torus-worker" --entrypoint /usr/local/bin/torus-worker \
    --out "$out/torus-worker-$tag.oci.tar"
  echo "]"
} >"$out/images.json.new"
fi
mv "$out/images.json.new" "$out/images.json"
/usr/bin/python3 - "$out/images.json" <<'PY'
import json, sys
for image in json.load(open(sys.argv[1])):
    print(f"torus: {image['reference']} {image['digest']} "
          f"({image['compressedBytes'] / 1e6:.1f} MB compressed, {image['uncompressedBytes'] / 1e6:.1f} MB unpacked)")
PY
