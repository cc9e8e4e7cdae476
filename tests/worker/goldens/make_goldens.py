#!/usr/bin/python3
"""Generates the PyTorch goldens the worker tests compare against (run once; the JSON files are committed).

    /usr/bin/python3 tests/worker/goldens/make_goldens.py   # Debian's python3-torch (CPU)

Tensors are written in PyTorch's layouts (NCHW activations, OIHW conv weights) as flat lists; the C++ test
transposes activations to NHWC. Everything is float32, computed in float64 first for tight references.
"""
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def flat(t):
    return [float(v) for v in t.detach().to(torch.float32).reshape(-1).tolist()]


def basic_block():
    """A ResNet basic block with a projection shortcut (stride 2, 4 -> 8 channels), BN in training mode."""
    torch.manual_seed(1)
    n, c_in, c_out, hw = 2, 4, 8, 6

    def conv(i, o, k, s):
        return nn.Conv2d(i, o, k, s, k // 2, bias=False).double()

    def bn(c):
        b = nn.BatchNorm2d(c).double()
        with torch.no_grad():
            b.weight.uniform_(0.5, 1.5)
            b.bias.uniform_(-0.5, 0.5)
        return b

    conv1, bn1, conv2, bn2 = conv(c_in, c_out, 3, 2), bn(c_out), conv(c_out, c_out, 3, 1), bn(c_out)
    conv_s, bn_s = conv(c_in, c_out, 1, 2), bn(c_out)
    x = torch.randn(n, c_in, hw, hw, dtype=torch.float64, requires_grad=True)
    params = {
        "conv1": conv1.weight, "bn1.weight": bn1.weight, "bn1.bias": bn1.bias,
        "conv2": conv2.weight, "bn2.weight": bn2.weight, "bn2.bias": bn2.bias,
        "shortcut.conv": conv_s.weight, "shortcut.bn.weight": bn_s.weight, "shortcut.bn.bias": bn_s.bias,
    }
    inputs = {k: flat(v) for k, v in params.items()}
    y = F.relu(bn2(conv2(F.relu(bn1(conv1(x))))) + bn_s(conv_s(x)))
    dy = torch.randn_like(y)
    y.backward(dy)
    out = {
        "shape": {"n": n, "c_in": c_in, "c_out": c_out, "h": hw, "w": hw},
        "x": flat(x), "dy": flat(dy), "y": flat(y), "dx": flat(x.grad),
        "params": inputs,
        "grads": {k: flat(v.grad) for k, v in params.items()},
        "running": {
            "bn1.running_mean": flat(bn1.running_mean), "bn1.running_var": flat(bn1.running_var),
            "bn2.running_mean": flat(bn2.running_mean), "bn2.running_var": flat(bn2.running_var),
        },
        "y_shape_nchw": list(y.shape),
    }
    return out


def loss_and_sgd():
    """Label-smoothed cross-entropy (mean) and its logit gradient; one Nesterov SGD step with weight decay."""
    torch.manual_seed(2)
    n, k, smoothing = 5, 7, 0.1
    logits = torch.randn(n, k, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 3, 6, 2, 3])
    loss = F.cross_entropy(logits, labels, label_smoothing=smoothing)
    loss.backward()
    w = torch.randn(11, dtype=torch.float64, requires_grad=True)
    w0 = w.detach().clone()
    opt = torch.optim.SGD([w], lr=0.3, momentum=0.9, nesterov=True, weight_decay=0.01)
    grads = [torch.randn(11, dtype=torch.float64) for _ in range(3)]
    for g in grads:  # three steps, so the momentum buffer matters
        w.grad = g.clone()
        opt.step()
    return {
        "n": n, "k": k, "smoothing": smoothing, "logits": flat(logits), "labels": labels.tolist(),
        "loss": float(loss), "dlogits": flat(logits.grad),
        "sgd": {"lr": 0.3, "momentum": 0.9, "weight_decay": 0.01, "w0": flat(w0),
                "grads": [flat(g) for g in grads], "w3": flat(w)},
    }


def main():
    with open(os.path.join(HERE, "basic_block.json"), "w") as f:
        json.dump(basic_block(), f)
    with open(os.path.join(HERE, "loss_sgd.json"), "w") as f:
        json.dump(loss_and_sgd(), f)
    print("torch", torch.__version__, "goldens written to", HERE)


if __name__ == "__main__":
    main()
