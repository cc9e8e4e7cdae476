#!/usr/bin/env python3
"""Where the GPU time of profiled training steps goes, by kind of kernel.

Reads the per-kernel table of either profiler and prints, per step, each kind's milliseconds and share, then the
longest kernels; the last line is `RESULT <label>_gpu_ms_per_step=... <label>_<kind>_ms=...`:
  nsys stats --report cuda_gpu_kern_sum --format csv REPORT.nsys-rep > kernels.csv     (Nsight Systems)
  ncu --csv --metrics gpu__time_duration.sum ... > kernels.csv                          (Nsight Compute)
  kernel_summary.py kernels.csv --steps 3 --label resnet50_bf16

Why kinds: each lever of docs/gpu.md (batch norm's passes, the element-wise kernels folded into them, the weight
gradient's algorithm) shows as one kind's time, so a lever's effect is read off two runs' kinds.
"""
import argparse
import csv
import io
import re
import sys

# First match wins; names are matched lower-cased. Torus's own kernels (kernels.cu, norm_kernels.cu) by name, cuDNN's
# and cuBLAS's by the pass their names carry.
KINDS = [
    ("nccl", re.compile(r"nccl")),
    ("batch_norm", re.compile(r"\bbn_|batchnorm|bn_fw|bn_bw|var_from_invstd|invstd_from_var")),
    ("conv_wgrad", re.compile(r"wgrad")),
    ("conv_dgrad", re.compile(r"dgrad")),
    ("conv_fprop", re.compile(r"fprop|conv")),
    ("gemm", re.compile(r"gemm|xmma|cutlass")),
    ("elementwise", re.compile(r"relu|add_kernel|convert|fill|bias_add|unscale|elementwise")),
    ("pooling", re.compile(r"pool")),
    ("optimizer", re.compile(r"sgd|loss_scale")),
    ("loss", re.compile(r"xent|softmax|top_k|mean_kernel")),
    ("input", re.compile(r"augment")),
]
UNIT_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def kind_of(name):
    lowered = name.lower()
    for kind, pattern in KINDS:
        if pattern.search(lowered):
            return kind
    return "other"


def number(text):
    return float(text.replace(",", "").strip())


def column(header, *candidates):
    for i, h in enumerate(header):
        if any(c.lower() == h.strip().lower() for c in candidates):
            return i
    return None


def read_kernels(text):
    """[(name, total ns, calls)] from an nsys or ncu CSV (lines before the header, e.g. ncu's ==PROF== notes, are
    skipped)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    for at, header in enumerate(rows):
        name = column(header, "Name", "Kernel Name")
        total = column(header, "Total Time (ns)", "Total Time")
        value = column(header, "Metric Value")
        if name is not None and (total is not None or value is not None):
            break
    else:
        raise ValueError("no kernel table: expected nsys's 'Name' and 'Total Time (ns)' or ncu's 'Kernel Name' and "
                         "'Metric Value' columns")
    out = []
    if total is not None:  # nsys: one row per kernel name, its total and its instances
        calls = column(header, "Instances")
        for row in rows[at + 1:]:
            if len(row) > max(name, total):
                out.append((row[name], number(row[total]), int(number(row[calls])) if calls is not None else 1))
        return out
    metric = column(header, "Metric Name")
    unit = column(header, "Metric Unit")
    for row in rows[at + 1:]:  # ncu: one row per launch (and metric)
        if len(row) <= max(name, value) or (metric is not None and row[metric] != "gpu__time_duration.sum"):
            continue
        scale = UNIT_NS.get(row[unit].strip().lower(), None) if unit is not None else 1.0
        if scale is None:
            raise ValueError("unknown time unit " + repr(row[unit]) + " for " + row[name])
        out.append((row[name], number(row[value]) * scale, 1))
    return out


def summarize(kernels, steps):
    by_kind, by_name = {}, {}
    for name, ns, calls in kernels:
        kind = kind_of(name)
        by_kind[kind] = by_kind.get(kind, 0.0) + ns
        total, count = by_name.get(name, (0.0, 0))
        by_name[name] = (total + ns, count + calls)
    total_ms = sum(by_kind.values()) / 1e6 / steps
    kinds = {kind: ns / 1e6 / steps for kind, ns in by_kind.items()}
    top = sorted(by_name.items(), key=lambda item: -item[1][0])
    return total_ms, kinds, top


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--steps", type=int, required=True, help="training steps the profile holds")
    parser.add_argument("--label", default="step")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    if args.steps <= 0:
        parser.error("--steps: expected a positive count, got %d" % args.steps)
    with open(args.csv, encoding="utf-8") as f:
        kernels = read_kernels(f.read())
    if not kernels:
        raise SystemExit(args.csv + ": the profile holds no kernel (was the profiled range empty?)")
    total_ms, kinds, top = summarize(kernels, args.steps)
    print("# %s: %.2f ms of GPU time per step (%d steps, %d kernel names)" % (args.label, total_ms, args.steps,
                                                                             len(top)))
    for kind, ms in sorted(kinds.items(), key=lambda item: -item[1]):
        print("  %-12s %8.2f ms  %5.1f%%" % (kind, ms, 100.0 * ms / total_ms))
    print("# the longest kernels, per step (calls per step)")
    for name, (ns, calls) in top[:args.top]:
        print("  %8.3f ms  %5.1f  %-11s %s" % (ns / 1e6 / args.steps, calls / args.steps, kind_of(name), name[:110]))
    fields = ["%s_gpu_ms_per_step=%.2f" % (args.label, total_ms)]
    fields += ["%s_%s_ms=%.2f" % (args.label, kind, ms) for kind, ms in sorted(kinds.items())]
    print("RESULT " + " ".join(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
