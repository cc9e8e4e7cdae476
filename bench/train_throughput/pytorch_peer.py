#!/usr/bin/python3
"""PyTorch CPU peer of torus-train-bench: the same ResNet, batch, image and thread count, synthetic data.

Run with Debian's interpreter (/usr/bin/python3 + python3-torch). Prints `RESULT images_per_second=X`.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_bn(c_in, c_out, kernel=3, stride=1, relu=True):
    layers = [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(c_out)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(conv_bn(c, c), conv_bn(c, c))

    def forward(self, x):
        return x + self.body(x)


class ResNet9(nn.Module):
    """Page's ResNet-9 shape: prep, stages of conv-bn-relu + max pool, residuals on the first and last stage."""

    def __init__(self, widths, in_channels, classes, pool):
        super().__init__()
        layers = [conv_bn(in_channels, widths[0])]
        stages = widths[1:]
        for s, w in enumerate(stages):
            layers += [conv_bn(widths[s], w), nn.MaxPool2d(2)]
            if s == 0 or s == len(stages) - 1:
                layers.append(Residual(w))
        layers.append(nn.AdaptiveMaxPool2d(1) if pool == "max" else nn.AdaptiveAvgPool2d(1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(widths[-1], classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class Block(nn.Module):
    def __init__(self, c_in, width, stride, bottleneck):
        super().__init__()
        out = width * 4 if bottleneck else width
        if bottleneck:
            self.branch = nn.Sequential(conv_bn(c_in, width, 1), conv_bn(width, width, 3, stride),
                                        conv_bn(width, out, 1, relu=False))
        else:
            self.branch = nn.Sequential(conv_bn(c_in, width, 3, stride), conv_bn(width, width, relu=False))
        self.shortcut = conv_bn(c_in, out, 1, stride, relu=False) if stride != 1 or c_in != out else None
        self.out = out

    def forward(self, x):
        s = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.branch(x) + s)


class ResNet(nn.Module):
    def __init__(self, arch, widths, in_channels, classes, stem, pool):
        super().__init__()
        depth = [2, 2, 2, 2] if arch == "resnet18" else [3, 4, 6, 3]
        bottleneck = arch == "resnet50"
        if stem == "imagenet":
            layers = [conv_bn(in_channels, widths[0], 7, 2), nn.MaxPool2d(3, 2, 1)]
        else:
            layers = [conv_bn(in_channels, widths[0])]
        c = widths[0]
        for s, w in enumerate(widths):
            for i in range(depth[s]):
                b = Block(c, w, 2 if s > 0 and i == 0 else 1, bottleneck)
                layers.append(b)
                c = b.out
        layers.append(nn.AdaptiveMaxPool2d(1) if pool == "max" else nn.AdaptiveAvgPool2d(1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="resnet9")
    p.add_argument("--widths", default="")
    p.add_argument("--stem", default="cifar")
    p.add_argument("--pool", default="max")
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--image", type=int, default=32)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    widths = [int(w) for w in a.widths.split(",")] if a.widths else [64, 128, 256, 512]
    if a.arch == "resnet9":
        model = ResNet9(widths, a.in_channels, a.classes, a.pool)
    else:
        model = ResNet(a.arch, widths, a.in_channels, a.classes, a.stem, a.pool)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    x = torch.randn(a.batch, a.in_channels, a.image, a.image).to(memory_format=torch.channels_last)
    y = torch.arange(a.batch) % a.classes

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    seconds = time.perf_counter() - start
    ips = a.steps * a.batch / seconds
    params = sum(p.numel() for p in model.parameters())
    print(f"pytorch {a.arch} params={params} batch={a.batch} image={a.image}x{a.image}x{a.in_channels} "
          f"threads={a.threads}: {ips:.1f} img/s ({1000 * seconds / a.steps:.2f} ms/step, loss {loss:.3f})")
    print(f"RESULT images_per_second={ips:.2f}")


if __name__ == "__main__":
    main()
