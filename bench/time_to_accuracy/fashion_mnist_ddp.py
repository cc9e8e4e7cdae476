#!/usr/bin/python3
"""The PyTorch DDP peer of examples/fashion-mnist.yaml (the recipe in ../shared/reference/anchors.md).

torch.distributed over Gloo, --world processes of --threads threads on this host, the same model (ResNet-9 of
bench/train_throughput/pytorch_peer.py, widths 8-16-32-64, global max pool, channels_last), global batch 256
split over the ranks, Nesterov SGD 0.9, one-cycle LR (0 -> 0.2 linearly over 0.8 epochs, then linearly to 0 at the
last epoch, set before every step), weight decay 5e-4 on conv/linear weights only, label smoothing 0.1, random
horizontal flip, normalization by the training set's mean and std, last partial global batch dropped, BN running
statistics averaged across ranks before each evaluation, the validation set split over the ranks, rank 0 writes a
checkpoint after every epoch, training stops at the first evaluation at or above --target (as torus-worker does).

Time to target: from the start of the first training step (data loaded, model built, ranks joined) to the end of
the first validation pass whose top-1 accuracy is >= --target, both included: the same span torus-worker reports.
images/s: global training images of the last epoch / that epoch's training time (evaluation excluded).

With --synthetic N it trains on N random images of --image x --image x --in-channels instead (any --arch of
pytorch_peer.py, no evaluation): the DDP half of bench/train_throughput.sh.

With --device cuda it trains the same recipe in one process on one GPU (bench/gpu/fashion_mnist.sh): no process
group, both data sets held on the device, flips drawn there, the loss summed there (no host wait per step), TF32
and cuDNN's algorithm search on (as bench/gpu/torch_peer.py), --precision bf16 for bf16 autocast; times taken after
a device synchronize. It exits 3 with "no CUDA device" when PyTorch sees none. --world 1 on the CPU takes the same
single-process path (no DDP); --train-images N trains on the first N images only (a smoke run: a fraction of an
epoch, the schedule scaled to it).

Run with Debian's interpreter (/usr/bin/python3 + python3-torch). Last line, printed by rank 0:
  RESULT accuracy=X time_to_target_s=Y images_per_s=Z epochs=N   (accuracy/time nan when not measured/reached)
"""
import argparse
import gzip
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train_throughput"))
from pytorch_peer import ResNet, ResNet9  # noqa: E402  (the model shared with the throughput peer)


def read_idx(path, header_bytes):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, dtype=np.uint8, offset=header_bytes)


def load_fashion_mnist(folder):
    def split(prefix):
        images = read_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28)
        labels = read_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"), 8)
        return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))

    train_x, train_y = split("train")
    val_x, val_y = split("t10k")
    mean, std = train_x.mean().item(), train_x.std().item()
    return (train_x - mean) / std, train_y, (val_x - mean) / std, val_y


def synthetic(a):
    g = torch.Generator().manual_seed(a.seed)
    x = torch.randn(a.synthetic, a.in_channels, a.image, a.image, generator=g)
    y = torch.arange(a.synthetic) % a.classes
    return x, y, x[:0], y[:0]


def build_model(a):
    widths = [int(w) for w in a.widths.split(",")]
    if a.arch == "resnet9":
        return ResNet9(widths, a.in_channels, a.classes, a.pool)
    return ResNet(a.arch, widths, a.in_channels, a.classes, a.stem, a.pool)


def lr_at(a, fractional_epoch):
    if fractional_epoch < a.warmup_epochs:
        return a.lr_peak * fractional_epoch / a.warmup_epochs
    span = max(a.epochs - a.warmup_epochs, 1e-9)
    return a.lr_peak * max(0.0, (a.epochs - fractional_epoch) / span)


def optimizer(a, model):
    decay = [p for p in model.parameters() if p.dim() > 1]  # conv and linear weights
    rest = [p for p in model.parameters() if p.dim() <= 1]  # BN gamma/beta, biases
    groups = [{"params": decay, "weight_decay": a.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.SGD(groups, lr=0.0, momentum=a.momentum, nesterov=True)


def average_bn_statistics(model, world):
    for name, buf in model.named_buffers():
        if name.endswith("running_mean") or name.endswith("running_var"):
            dist.all_reduce(buf)
            buf.div_(world)


def autocast(a):
    return torch.autocast(device_type=a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16")


def synchronize(a):
    """Waits for the device's queued work (a time taken before it would miss the work still queued)."""
    if a.device == "cuda":
        torch.cuda.synchronize()


def evaluate(a, model, val_x, val_y, rank, world):
    model.eval()
    if world > 1:
        average_bn_statistics(model, world)
    counts = torch.zeros(2, dtype=torch.float64, device=val_x.device)  # correct, seen
    with torch.no_grad(), autocast(a):
        for start in range(rank * a.eval_batch, val_x.shape[0], world * a.eval_batch):
            x = val_x[start:start + a.eval_batch].contiguous(memory_format=torch.channels_last)
            pred = model(x).argmax(1)
            counts[0] += (pred == val_y[start:start + a.eval_batch]).sum()
            counts[1] += x.shape[0]
    if world > 1:
        dist.all_reduce(counts)
    model.train()
    correct, seen = counts.tolist()
    return correct / max(seen, 1.0)


def train_epoch(a, ddp, opt, loss_fn, train_x, train_y, epoch, rank, world):
    per_rank = a.batch // world
    g = torch.Generator().manual_seed(a.seed * 1000003 + epoch)  # the same order on every rank
    order = torch.randperm(train_x.shape[0], generator=g).to(train_x.device)
    batches = train_x.shape[0] // a.batch
    loss_sum = torch.zeros((), dtype=torch.float64, device=train_x.device)  # read once, after the epoch
    for b in range(batches):
        idx = order[b * a.batch + rank * per_rank:b * a.batch + (rank + 1) * per_rank]
        x, y = train_x[idx], train_y[idx]
        if a.flip:
            flip = torch.rand(x.shape[0], device=x.device) < 0.5
            x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)  # no host wait, unlike x[flip] = ...
        x = x.contiguous(memory_format=torch.channels_last)
        for group in opt.param_groups:
            group["lr"] = lr_at(a, epoch + b / batches)
        opt.zero_grad(set_to_none=True)
        with autocast(a):
            loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        loss_sum += loss.detach()
    return loss_sum.item() / max(batches, 1), batches * a.batch


def require_cuda():
    if not torch.cuda.is_available():
        print(f"no CUDA device: torch.cuda.is_available() is False (torch {torch.__version__}, {sys.executable})",
              file=sys.stderr)
        sys.exit(3)
    # As bench/gpu/torch_peer.py: TF32 products for fp32 (Torus's default on the GPU), cuDNN's timed search.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True


def run(rank, a):
    torch.set_num_threads(a.threads)
    distributed = a.world > 1
    if distributed:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(a.port)
        dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.manual_seed(a.seed)
    train_x, train_y, val_x, val_y = synthetic(a) if a.synthetic else load_fashion_mnist(a.data)
    if a.train_images:
        train_x, train_y = train_x[:a.train_images], train_y[:a.train_images]
    train_x, train_y, val_x, val_y = (t.to(a.device) for t in (train_x, train_y, val_x, val_y))
    model = build_model(a).to(device=a.device, memory_format=torch.channels_last)
    ddp = model
    if distributed:  # rank 0's weights
        ddp = DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb, broadcast_buffers=False)
    opt = optimizer(a, model)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    checkpoint = os.path.join(a.checkpoint_dir, "peer.pt") if a.checkpoint_dir else None
    if distributed:
        dist.barrier()
    synchronize(a)
    start = time.perf_counter()
    accuracy, to_target, ips, done = float("nan"), float("nan"), 0.0, 0
    for epoch in range(a.epochs):
        epoch_start = time.perf_counter()
        loss, images = train_epoch(a, ddp, opt, loss_fn, train_x, train_y, epoch, rank, a.world)
        synchronize(a)
        ips = images / (time.perf_counter() - epoch_start)
        done = epoch + 1
        if not a.synthetic:
            accuracy = evaluate(a, model, val_x, val_y, rank, a.world)
        if rank == 0 and checkpoint:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": done}, checkpoint)
        elapsed = time.perf_counter() - start
        if rank == 0:
            print(f"pytorch {a.name} epoch {done}/{a.epochs}: train loss {loss:.4f}, {ips:.0f} img/s, "
                  f"validation top-1 {accuracy * 100:.2f}% ({elapsed:.1f} s)", flush=True)
        if a.target > 0 and accuracy >= a.target:
            to_target = elapsed
            break
    if rank == 0:
        print(f"RESULT accuracy={accuracy:.4f} time_to_target_s={to_target:.{a.digits}f} images_per_s={ips:.0f} "
              f"epochs={done}", flush=True)
    if distributed:
        dist.destroy_process_group()
        # Leave without the interpreter's teardown: there torch 1.13 destroys the DDP module's Reducer, which joins the
        # Gloo process group's worker threads while holding the GIL, and a worker freeing a tensor waits for the GIL
        # (a deadlock at exit, seen in 1 run of 4 of bench/time_to_accuracy.sh's smoke). Everything is written by now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--synthetic", type=int, default=0, help="train on this many random images instead")
    p.add_argument("--arch", default="resnet9")
    p.add_argument("--widths", default="8,16,32,64")
    p.add_argument("--stem", default="cifar")
    p.add_argument("--pool", default="max")
    p.add_argument("--in-channels", type=int, default=1)
    p.add_argument("--image", type=int, default=28)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch", type=int, default=256, help="global batch, split evenly over the ranks")
    p.add_argument("--eval-batch", type=int, default=0, help="default: the per-rank training batch")
    p.add_argument("--lr-peak", type=float, default=0.2)
    p.add_argument("--warmup-epochs", type=float, default=0.8)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--flip", type=int, default=1)
    p.add_argument("--target", type=float, default=0.92)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--world", type=int, default=None, help="processes (DDP when > 1); default 2, with cuda 1")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: one process on one GPU")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: bf16 autocast")
    p.add_argument("--train-images", type=int, default=0, help="train on the first N images only (a smoke run)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bucket-mb", type=float, default=25)
    p.add_argument("--port", type=int, default=29651)
    p.add_argument("--checkpoint-dir", default="", help="rank 0 saves model + optimizer here after every epoch")
    a = p.parse_args()
    if a.world is None:
        a.world = 1 if a.device == "cuda" else 2
    if a.device == "cuda" and a.world != 1:
        p.error("--device cuda trains in one process on one GPU: --world 1")
    if a.batch % a.world:
        p.error(f"--batch {a.batch} must be divisible by --world {a.world}")
    if a.train_images and a.train_images < a.batch:
        p.error(f"--train-images {a.train_images} must hold at least one global batch ({a.batch})")
    a.eval_batch = a.eval_batch or a.batch // a.world
    a.name = f"cuda {a.precision}" if a.device == "cuda" else f"ddp-{a.world}x{a.threads}" if a.world > 1 else \
        f"1 process x {a.threads}"
    a.digits = 2 if a.device == "cuda" else 1  # a GPU run takes seconds
    if a.device == "cuda":
        require_cuda()
    with tempfile.TemporaryDirectory() as scratch:
        a.checkpoint_dir = a.checkpoint_dir or scratch
        if a.world == 1:
            run(0, a)
        else:
            mp.spawn(run, args=(a,), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
