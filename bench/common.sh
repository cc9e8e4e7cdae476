# shellcheck shell=bash
# Sourced by every benchmark: SMOKE=1 and building what a benchmark runs.
#
# SMOKE=1 runs a benchmark for its plumbing, not its figures: seconds, tiny sizes, the PyTorch peer only where it is
# installed already (Debian's python3-torch; bench/peer.sh says when it is skipped), nothing built or downloaded, and
# the same last line `RESULT name=value ...`. The test command runs every benchmark so (tests/bench/bench_smoke_test.cc,
# ctest label bench_smoke), so a change that breaks one turns the suite red. Its figures mean nothing.

# bench_build BUILD_DIR TARGET...: builds the targets; under SMOKE=1 only checks that they are built (a smoke runs
# inside the test command, which built them, and must not start a second build in a build folder someone may be
# building in).
bench_build() {
  local dir="$1" target missing=()
  shift
  if [[ "${SMOKE:-0}" != 1 ]]; then
    cmake --build "$dir" --target "$@" >/dev/null
    return
  fi
  for target in "$@"; do
    [[ -x "$dir/bin/$target" ]] || missing+=("$target")
  done
  if ((${#missing[@]})); then
    echo "SMOKE=1: ${missing[*]} not built in $dir/bin (cmake --build $dir --target ${missing[*]})" >&2
    return 2
  fi
}

# bench_small_idx SRC DST TRAIN TEST: DST gets the first TRAIN training and TEST test images and labels of the
# Fashion-MNIST IDX files in SRC (gzipped, as dataset-fashion-mnist ships them): a smoke's data set, read by both
# sides as the full one is.
bench_small_idx() {
  mkdir -p "$2"
  /usr/bin/python3 - "$@" <<'PY'
import gzip, struct, sys
src, dst, train, test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for split, n in (("train", train), ("t10k", test)):
    for kind in ("images-idx3", "labels-idx1"):
        name = f"{split}-{kind}-ubyte.gz"
        raw = gzip.open(f"{src}/{name}").read()
        dims = raw[3]
        shape = struct.unpack(f">{dims}I", raw[4:4 + 4 * dims])
        if shape[0] < n:
            sys.exit(f"{src}/{name}: {shape[0]} items, fewer than the {n} asked for")
        item = 1
        for d in shape[1:]:
            item *= d
        head = raw[:4] + struct.pack(f">{dims}I", n, *shape[1:])
        body = raw[4 + 4 * dims:4 + 4 * dims + n * item]
        with gzip.open(f"{dst}/{name}", "wb") as f:
            f.write(head + body)
PY
}

# bench_free_port: a TCP port free on this host now, for a peer's rendezvous (a random one is taken by some other
# process often enough on a busy machine to fail a run: 1 in 12 here).
bench_free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}
