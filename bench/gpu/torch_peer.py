"""The PyTorch side of bench/gpu/gpu.sh: the same runs as torus_gpu_bench, in PyTorch with CUDA.

  torch_peer.py resnet50 [--batch 128] [--steps 30] [--warmup 10] [--precision tf32|bf16]
  torch_peer.py resnet9 --data DIR [--epochs 24] [--batch 512] [--lr 0.4] [--target 0.94]
  torch_peer.py nccl [--max-bytes 1073741824] [--iters 20]

Same recipes as Torus: fp32 with TF32 (or bf16 autocast, --precision bf16, as Torus's bf16 activations with fp32
master weights), channels_last, Nesterov SGD, label smoothing. Exits 3 without a GPU.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def require_cuda():
    if not torch.cuda.is_available():
        print("no CUDA device: torch.cuda.is_available() is False", file=sys.stderr)
        sys.exit(3)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.c3, self.b3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


def resnet50(classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.b = conv_bn(c, c), conv_bn(c, c)

    def forward(self, x):
        return x + self.b(self.a(x))


def resnet9(widths=(64, 128, 256, 512), classes=10):
    p, a, b, c = widths
    return nn.Sequential(conv_bn(3, p), conv_bn(p, a), nn.MaxPool2d(2), Residual(a), conv_bn(a, b), nn.MaxPool2d(2),
                         conv_bn(b, c), nn.MaxPool2d(2), Residual(c), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                         nn.Linear(c, classes))


def bench_resnet50(args):
    require_cuda()
    model = resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.arange(args.batch, device="cuda") * 7 % 1000

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.steps):
        step()
    stop.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(stop) / 1000
    print(f"RESULT torch_resnet50_images_per_s={args.batch * args.steps / seconds:.1f} batch={args.batch} "
          f"precision={args.precision} torch={torch.__version__}")


def load_cifar(directory, names):
    raw = np.concatenate([np.fromfile(os.path.join(directory, n), dtype=np.uint8).reshape(-1, 3073) for n in names])
    images = raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # (N, H, W, C) like Torus
    return torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(raw[:, 0].astype(np.int64))


def bench_resnet9(args):
    require_cuda()
    xtr, ytr = load_cifar(args.data, [f"data_batch_{i}.bin" for i in range(1, 6)])
    xva, yva = load_cifar(args.data, ["test_batch.bin"])
    mean = torch.tensor([0.4914, 0.4822, 0.4465], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616], device="cuda").view(1, 3, 1, 1)
    xtr, ytr, xva, yva = xtr.cuda(), ytr.cuda(), xva.cuda(), yva.cuda()

    def normalize(u8):
        return ((u8.permute(0, 3, 1, 2).float() / 255 - mean) / std).contiguous(memory_format=torch.channels_last)

    model = resnet9().cuda().to(memory_format=torch.channels_last)
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    other = [p for n, p in model.named_parameters() if p.dim() <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": other, "weight_decay": 0}],
                          lr=args.lr, momentum=0.9, nesterov=True)
    steps = xtr.shape[0] // args.batch
    total = steps * args.epochs
    warm = total * 5 / 24
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / warm if s < warm else max(0.0, (total - s) / (total - warm)))
    train_seconds, accuracy, epoch = 0.0, 0.0, 0
    while epoch < args.epochs and accuracy < args.target:
        torch.cuda.synchronize()
        t0 = time.time()
        model.train()
        perm = torch.randperm(xtr.shape[0], device="cuda")
        for i in range(steps):
            idx = perm[i * args.batch:(i + 1) * args.batch]
            x = normalize(xtr[idx])
            flip = torch.rand(x.shape[0], device="cuda") < 0.5
            x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)
            x = F.pad(x, (4, 4, 4, 4))
            dy, dx = np.random.randint(0, 9, 2)
            x = x[:, :, dy:dy + 32, dx:dx + 32]
            loss = F.cross_entropy(model(x), ytr[idx], label_smoothing=0.2)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        torch.cuda.synchronize()
        train_seconds += time.time() - t0
        model.eval()
        with torch.no_grad():
            correct = sum((model(normalize(xva[i:i + 1000])).argmax(1) == yva[i:i + 1000]).sum().item()
                          for i in range(0, xva.shape[0], 1000))
        accuracy = correct / xva.shape[0]
        epoch += 1
        print(f"# torch epoch {epoch}: {train_seconds:.2f} s training so far, test accuracy {accuracy:.4f}")
    reached = f"{train_seconds:.2f}" if accuracy >= args.target else "nan"
    print(f"RESULT torch_resnet9_cifar10_seconds_to_{args.target * 100:.0f}={reached} epochs={epoch} "
          f"accuracy={accuracy:.4f} train_seconds={train_seconds:.2f}")


def nccl_rank(rank, world, args, port):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    size, busbw = 1 << 20, 0.0
    while size <= args.max_bytes:
        t = torch.ones(size // 4, device="cuda")
        for _ in range(5):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        t0 = time.time()
        for _ in range(args.iters):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        seconds = (time.time() - t0) / args.iters
        busbw = size / seconds / 1e9 * 2 * (world - 1) / world
        if rank == 0:
            print(f"# torch {size} bytes: {seconds * 1e6:.1f} us, busbw {busbw:.2f} GB/s")
        size *= 4
    if rank == 0:
        print(f"RESULT torch_nccl_allreduce_busbw_gbps={busbw:.2f} gpus={world}")
    dist.destroy_process_group()


def bench_nccl(args):
    require_cuda()
    import torch.multiprocessing as mp
    world = torch.cuda.device_count()
    mp.spawn(nccl_rank, args=(world, args, 29500 + os.getpid() % 1000), nprocs=world)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["resnet50", "resnet9", "nccl"])
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--precision", choices=["tf32", "bf16"], default="tf32")
    parser.add_argument("--data", default=os.environ.get("CIFAR10_DIR", ""))
    parser.add_argument("--epochs", type=int, default=24)
    parser.add_argument("--lr", type=float, default=0.4)
    parser.add_argument("--target", type=float, default=0.94)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    if args.batch is None:
        args.batch = 512 if args.mode == "resnet9" else 128
    {"resnet50": bench_resnet50, "resnet9": bench_resnet9, "nccl": bench_nccl}[args.mode](args)


if __name__ == "__main__":
    main()
