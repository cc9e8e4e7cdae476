#!/usr/bin/env bash
# Builds .gpu-prefix/: the Debian bookworm libraries the GPU-check build needs, for a machine with the CUDA toolkit
# but no network and no Debian packages (docs/gpu.md, "Running the check on a borrowed GPU machine"). Run it HERE,
# where apt reaches Debian's mirror; .gpu-prefix.tar.gz (git-ignored) then travels with the working tree (the run
# tool's `carry`) and scripts/gpu-check.sh builds against the unpacked prefix alone (torus_use_prefix in lib.sh).
#   scripts/gpu-prefix.sh        # (re)creates .gpu-prefix/ and .gpu-prefix.tar.gz and prints their sizes
# Only runtime .so's, headers and CMake configs are kept; docs, static libraries (GoogleTest's excepted) and
# pkg-config files go. Boost is header-only here and large (135 MiB): only the headers that the GPU build's
# translation units include (common/metrics/http_exporter.cc: Asio, Beast) are kept, with boost/config whole.
# Fashion-MNIST travels too (dataset-fashion-mnist's four IDX files as shipped, already gzip'ed, 29 MiB), under
# .gpu-prefix/usr/share/datasets/fashion-mnist: scripts/gpu-check.sh's bench phase trains on it there.
# The archive must stay under the run tool's 64 MiB for carried paths: the script fails past that.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$ROOT/.gpu-prefix"

# Each with its runtime library; no operator (cpprestsdk), no Python.
PACKAGES=(
  libdnnl-dev libdnnl2 ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers
  libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200
  libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev
  libssl-dev libssl3 zlib1g-dev zlib1g
  libturbojpeg0-dev libturbojpeg0 libjpeg62-turbo-dev libjpeg62-turbo
  libgtest-dev libgmock-dev
)
# The data set the bench phase trains on: only its files under usr/share/datasets are kept (its docs go with the rest).
DATA_PACKAGES=(dataset-fashion-mnist)
DATA_DIR=usr/share/datasets/fashion-mnist
BOOST_PACKAGE=libboost1.74-dev
# The Boost headers the GPU build includes; their closure is computed with the compiler here.
BOOST_ROOTS=(boost/asio/ip/tcp.hpp boost/asio/strand.hpp boost/beast/core.hpp boost/beast/http.hpp)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "gpu-prefix: downloading ${#PACKAGES[@]} packages + $BOOST_PACKAGE + ${DATA_PACKAGES[*]} (Debian" \
  "$(. /etc/os-release && echo "$VERSION_CODENAME"))"
(cd "$work" && apt-get download -q "${PACKAGES[@]}" "$BOOST_PACKAGE" "${DATA_PACKAGES[@]}" 2>&1 |
  grep -v '^W: Download is performed unsandboxed' || true)

rm -rf "$PREFIX"
mkdir -p "$PREFIX"
for deb in "$work"/*.deb; do
  case "$deb" in */"$BOOST_PACKAGE"_*) dpkg -x "$deb" "$work/boost" ;; *) dpkg -x "$deb" "$PREFIX" ;; esac
done
[[ -d "$work/boost/usr/include/boost" ]] || { echo "gpu-prefix: $BOOST_PACKAGE did not download" >&2; exit 1; }
# The data set's four IDX files, as the package ships them (gzip'ed: the archive does not shrink them further).
for f in {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz; do
  [[ -f "$PREFIX/$DATA_DIR/$f" ]] ||
    { echo "gpu-prefix: ${DATA_PACKAGES[*]} did not download ($DATA_DIR/$f)" >&2; exit 1; }
done

# One library folder: bookworm still ships some libraries under /lib.
lib="$PREFIX/usr/lib/x86_64-linux-gnu"
if [[ -d "$PREFIX/lib/x86_64-linux-gnu" ]]; then
  cp -a "$PREFIX/lib/x86_64-linux-gnu/." "$lib/"
  rm -rf "${PREFIX:?}/lib"
fi
# Gloo's CMake targets name /usr/lib/libgloo.so.0.5.0: make them relative to the config file.
sed -i 's#"/usr/lib/#"${CMAKE_CURRENT_LIST_DIR}/../../../lib/#g' "$PREFIX"/usr/share/cmake/Gloo/GlooTargets-*.cmake
# Relative symlinks only: an absolute one (/usr/lib/...) would point at the machine's own files.
while IFS= read -r link; do
  target="$(readlink "$link")"
  [[ "$target" == /* ]] && ln -sfn "$(basename "$target")" "$link"
done < <(find "$PREFIX" -type l)

rm -rf "$PREFIX/usr/share/doc" "$PREFIX/usr/share/lintian" "$PREFIX/usr/share/man" "$PREFIX/usr/src" \
  "${PREFIX:?}/etc" "$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig" "$PREFIX/usr/lib/x86_64-linux-gnu/cmake/libjpeg-turbo" "$PREFIX/usr/share/pkgconfig" "$PREFIX/usr/lib/ssl"
find "$PREFIX" -name '*.a' ! -name 'libg[mt]*.a' -delete

# Boost: the closure of BOOST_ROOTS as the compiler sees it (C++20 and C++17), plus boost/config for other compilers.
probe="$work/boost_probe.cc"
printf '#include <%s>\n' "${BOOST_ROOTS[@]}" >"$probe"
{
  for std in c++20 c++17; do
    "${CXX:-g++}" -std="$std" -pthread -M -MT x -isystem "$work/boost/usr/include" "$probe"
  done
} | tr ' \\' '\n\n' | grep "^$work/boost/usr/include/boost/" | sort -u >"$work/boost.list"
sed "s#^$work/boost/usr/include/##" "$work/boost.list" | tar -C "$work/boost/usr/include" -cf - -T - |
  tar -C "$PREFIX/usr/include" -xf -
cp -a "$work/boost/usr/include/boost/config" "$PREFIX/usr/include/boost/"
mkdir -p "$PREFIX/usr/lib/x86_64-linux-gnu/cmake"
cp -a "$work/boost/usr/lib/x86_64-linux-gnu/cmake/Boost-"* "$work/boost/usr/lib/x86_64-linux-gnu/cmake/boost_headers-"* \
  "$PREFIX/usr/lib/x86_64-linux-gnu/cmake/" 2>/dev/null || true

# The newest glibc symbol version any carried library needs: the GPU machine's glibc must be at least that.
glibc="$(find "$lib" -name '*.so*' -type f -exec objdump -T {} + 2>/dev/null | grep -o 'GLIBC_[0-9.]*' |
  sort -t. -k2,2n -k3,3n -u | tail -1)"
echo "${glibc#GLIBC_}" >"$PREFIX/GLIBC_MIN"
# What travels: the archive (the libraries shrink to a third; the data set's files are gzip'ed already);
# scripts/lib.sh unpacks it into .gpu-prefix/ there.
tar -C "$PREFIX" -czf "$PREFIX.tar.gz" .
echo "gpu-prefix: $PREFIX: $(du -sm --apparent-size "$PREFIX" | cut -f1) MiB in $(find "$PREFIX" -type f | wc -l)" \
  "files (Fashion-MNIST: $(du -sm --apparent-size "$PREFIX/$DATA_DIR" | cut -f1) MiB); $PREFIX.tar.gz:" \
  "$(du -sm --apparent-size "$PREFIX.tar.gz" | cut -f1) MiB; its libraries need glibc >= ${glibc#GLIBC_}"
# Everything carried to a borrowed machine (the run tool's `carry`) must fit in 64 MiB.
if (($(stat -c %s "$PREFIX.tar.gz") >= 64 * 1024 * 1024)); then
  echo "gpu-prefix: $PREFIX.tar.gz is over the 64 MiB that travels with the working tree" >&2
  exit 1
fi
