"""The PyTorch peer of bench/allreduce.sh: torch.distributed all_reduce over Gloo, same sizes, same output format.

Run with /usr/bin/python3 (Debian's python3-torch). Spawns --world processes on this host.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    size = args.min_bytes
    while size <= args.max_bytes:
        t = torch.ones(size // 4, dtype=torch.float32)
        dist.all_reduce(t)  # warm-up
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        one = time.perf_counter() - t0
        iters = torch.tensor([max(2.0, min(200.0, args.seconds_per_point / max(one, 1e-6)))], dtype=torch.float64)
        dist.broadcast(iters, 0)
        n = int(iters.item())
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(t)
        elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        per = elapsed.item() / n
        if rank == 0:
            algbw = size / per / 1e9
            busbw = algbw * 2 * (args.world - 1) / args.world
            print(f"allreduce algo=torch_gloo world={args.world} nodes=1 bytes={size} time_us={per * 1e6:.1f} "
                  f"algbw_gbps={algbw:.3f} busbw_gbps={busbw:.3f}", flush=True)
        size *= args.size_step
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--min-bytes", type=int, default=4096)
    p.add_argument("--max-bytes", type=int, default=256 << 20)
    p.add_argument("--size-step", type=int, default=4)
    p.add_argument("--seconds-per-point", type=float, default=0.5)
    p.add_argument("--port", type=int, default=29631)
    args = p.parse_args()
    mp.spawn(run, args=(args, args.port), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
