#!/usr/bin/env bash
# Data loading speed: Fashion-MNIST training epochs (60k 28x28x1, batch 256, shuffle, per-sample normalize and
# random horizontal flip) through Torus' prefetching loader and through PyTorch's DataLoader with the same work
# (the newest torch from PyPI, bench/peer.sh; no torchvision), in the same run, for 1 and 2 loader threads/workers.
#   bench/data_loader.sh               # 3 epochs each
#   EPOCHS=5 JPEGS=1000 bench/data_loader.sh
#   SMOKE=1 bench/data_loader.sh       # 1 epoch of the first 2,560 images, 16 JPEGs (bench/common.sh)
# Last line: RESULT data_loader_ratio_vs_pytorch=X  (images/s, ours / theirs, 2 threads vs 2 workers)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
# shellcheck source=bench/peer.sh
source "$ROOT/bench/peer.sh"
bench_peer_python  # PYTHON, PEER_VERSION: the newest torch from PyPI (PEER=debian: Debian's)
EPOCHS="${EPOCHS:-3}"
JPEGS="${JPEGS:-300}"
DATA_DIR="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
if [[ "${SMOKE:-0}" == 1 ]]; then
  EPOCHS=1 JPEGS=16
  bench_small_idx "$DATA_DIR" "$OUT/data" 2560 256
  DATA_DIR="$OUT/data"
fi

if [[ -z "${BENCH:-}" ]]; then
  bench_build "$BUILD_DIR" torus_data_bench
  BENCH="$BUILD_DIR/bin/torus_data_bench"
fi

cat >"$OUT/torch_loader.py" <<'PY'
import gzip, sys, time
import numpy as np
import torch

workers, epochs, data_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(1)
raw = gzip.open(f"{data_dir}/train-images-idx3-ubyte.gz").read()
images = torch.from_numpy(np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 28, 28, 1).copy())
labels = torch.from_numpy(np.frombuffer(gzip.open(f"{data_dir}/train-labels-idx1-ubyte.gz").read(), np.uint8,
                                        offset=8).astype(np.int64))
MEAN, STD = 0.2860, 0.3530

class FashionMnist(torch.utils.data.Dataset):
    def __len__(self):
        return images.shape[0]

    def __getitem__(self, i):
        x = images[i].float().div_(255).sub_(MEAN).div_(STD)  # (H, W, C), like ours
        if torch.rand(1).item() < 0.5:
            x = x.flip(1)
        return x, labels[i]

def worker_init(_):
    torch.set_num_threads(1)

loader = torch.utils.data.DataLoader(FashionMnist(), batch_size=256, shuffle=True, num_workers=workers,
                                     persistent_workers=True, prefetch_factor=4, worker_init_fn=worker_init)
total, count, checksum = 0.0, 0, 0.0
for epoch in range(epochs):
    t0 = time.perf_counter()
    for x, y in loader:
        checksum += float(x[0, 0, 0, 0])
        count += x.shape[0]
    s = time.perf_counter() - t0
    total += s
    print(f"# epoch {epoch}: {s:.3f} s", flush=True)
print(f"pytorch workers={workers} batch=256 augment=flip img_per_s={count / total:.0f} epoch_s={total / epochs:.3f}")
PY

for t in 1 2; do
  echo "# torus loader, $t thread(s)"
  "$BENCH" --threads "$t" --epochs "$EPOCHS" --dir "$DATA_DIR" | tee -a "$OUT/torus.txt"
  bench_has_peer || continue
  echo "# pytorch DataLoader, $t worker(s)"
  "$PYTHON" "$OUT/torch_loader.py" "$t" "$EPOCHS" "$DATA_DIR" | tee -a "$OUT/torch.txt"
done

# JPEG pipeline (no PyTorch peer: torchvision is not packaged here): ImageNet-like files, RRC 224 + flip, rect val.
echo "# torus JPEG folder (decode + random-resized-crop 224 + flip; rectangular validation)"
"$BENCH" --jpegs "$JPEGS" --threads 2

pick() {  # pick FILE THREADS_FIELD -> img_per_s
  [[ -f "$1" ]] || { echo skipped; return; }
  awk -v f="$2" '$2 == f { for (i = 1; i <= NF; ++i) if ($i ~ /^img_per_s=/) { split($i, kv, "="); print kv[2] } }' "$1"
}
ours=$(pick "$OUT/torus.txt" threads=2)
theirs=$(pick "$OUT/torch.txt" workers=2)
ours1=$(pick "$OUT/torus.txt" threads=1)
theirs1=$(pick "$OUT/torch.txt" workers=1)
ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { print (b == "skipped") ? b : sprintf("%.2f", a / b) }')
echo "RESULT data_loader_ratio_vs_pytorch=$ratio torus_img_per_s=$ours pytorch_img_per_s=$theirs" \
  "torus_1thread_img_per_s=$ours1 pytorch_1worker_img_per_s=$theirs1 peer=$(bench_peer_name)"
