#!/usr/bin/python3
"""PyTorch peer for Loom's single-process training benchmark.

Reads a Loom plan (loom-plan/1 JSON), builds the same model in torch.nn (layouts match
Loom's: Linear weight [out, in], Conv2d NCHW, exact GELU, parallel blocks concatenated
along dim 1), reads Fashion-MNIST from the same IDX files with its own gzip+numpy reader
(no torchvision download), and trains with the plan's optimizer and batch size.

Throughput mode (default): `--warmup W` untimed steps, then `--steps N` timed steps.
Accuracy mode: `--epochs E --eval` trains E full epochs and reports test accuracy.
Either way it prints ONE JSON line, so bench scripts can parse it.

`--device cuda` (or cuda:N) trains on a GPU: batches are gathered on the host and copied
to the device each step, as Loom's gpu ranks do; the clock reads after a synchronize.
`--cuda-graph` (with a CUDA device) captures the whole training step, forward, loss,
backward and optimizer, as one CUDA graph and replays it each step: PyTorch's documented
whole-network capture (torch.cuda.graph, warm-up on a side stream, Adam and SGD with
capturable state where the version has it), the fastest a PyTorch step of this model
gets. The batch still goes host gather -> copy into the graph's static input each step.

Run with Debian's interpreter, which has PyTorch: /usr/bin/python3 bench/torch_train.py plan.json
"""
import argparse
import ctypes
import gzip
import json
import os
import sys
import time

import numpy as np


def _set_openmp_wait_policy():
    """Must run before torch loads libgomp, which reads OMP_WAIT_POLICY once. Debian's
    torch runs its ops on an OpenMP pool and its GEMMs on OpenBLAS's separate pthread
    pool; with GOMP's default (spin after each region) the idle OpenMP workers steal the
    cores OpenBLAS needs, which made 2-thread steps ~25x slower on a 2-core machine.
    'passive' is the peer's best configuration, so a ratio against it is conservative."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--omp-wait", choices=["passive", "active", "default"], default="passive")
    policy = pre.parse_known_args()[0].omp_wait
    if policy != "default":
        os.environ["OMP_WAIT_POLICY"] = policy.upper()
    return policy


OMP_WAIT = _set_openmp_wait_policy()
import torch  # noqa: E402  (after the OpenMP environment is set)
from torch import nn  # noqa: E402

IMAGES_MAGIC, LABELS_MAGIC = 0x00000803, 0x00000801


# ---------------------------------------------------------------------------- data

def read_idx(path, magic):
    """Reads an IDX file (gzip or raw) into a uint8 array shaped by its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    found = int.from_bytes(raw[0:4], "big")
    if found != magic:
        sys.exit(f"error: {path}: wrong magic number 0x{found:08X}, expected 0x{magic:08X}")
    ndims = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    payload = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndims)
    if payload.size < int(np.prod(dims)):
        sys.exit(f"error: {path}: truncated, expected {int(np.prod(dims))} bytes, read {payload.size}")
    return payload[:int(np.prod(dims))].reshape(dims)


def find_idx(directory, stem):
    """Prefers the .gz file, as Debian ships it, like Loom's reader does."""
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    sys.exit(f"error: {os.path.join(directory, stem)}(.gz) not found "
             "(hint: apt-get install dataset-fashion-mnist or set data.path)")


def load_split(directory, prefix):
    images = read_idx(find_idx(directory, f"{prefix}-images-idx3-ubyte"), IMAGES_MAGIC)
    labels = read_idx(find_idx(directory, f"{prefix}-labels-idx1-ubyte"), LABELS_MAGIC)
    # Same scaling as Loom: x / 255 in float32, samples [N, 1, H, W].
    x = torch.from_numpy(images.astype(np.float32) / np.float32(255.0)).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def synthetic_split(data, count, seed):
    """Blobs/spirals with numpy: the same shapes and kind of data as Loom's synthetic sets,
    not the same numbers (throughput does not depend on the values)."""
    rng = np.random.default_rng(seed)
    classes = data.get("classes", 3)
    noise = data.get("noise", 0.5)
    y = np.arange(count) % classes
    if data.get("synthetic", "blobs") == "spirals":
        t = rng.random(count)
        angle = 2 * np.pi * (y / classes + 1.5 * t)
        x = np.stack([t * np.cos(angle), t * np.sin(angle)], 1) + 0.1 * noise * rng.standard_normal((count, 2))
    else:
        features = data.get("features", 2)
        centres = np.random.default_rng(data.get("seed", 7)).uniform(-3, 3, (classes, features))
        x = centres[y] + noise * rng.standard_normal((count, features))
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))


def load_data(plan, path_override):
    data = plan.get("data", {})
    source = data.get("source", "fashion-mnist")
    if source == "synthetic":
        train = synthetic_split(data, data.get("train_samples", 3000), data.get("seed", 7) + 1)
        test = synthetic_split(data, data.get("test_samples", 600), data.get("seed", 7) + 2)
    else:
        directory = path_override or data.get("path", "/usr/share/datasets/fashion-mnist")
        train, test = load_split(directory, "train"), load_split(directory, "t10k")

    def limit(split, n):
        return (split[0][:n], split[1][:n]) if n and n > 0 else split
    return limit(train, data.get("train_limit", 0)), limit(test, data.get("test_limit", 0))


# --------------------------------------------------------------------------- model

class Parallel(nn.Module):
    """Loom's parallel block: every branch sees the same input; outputs are concatenated."""

    def __init__(self, branches):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x):
        return torch.cat([branch(x) for branch in self.branches], dim=1)


def build_layer(spec, shape):
    """Returns (module, output shape) for one layer; shape excludes the batch dim."""
    kind = spec["type"]
    if kind == "flatten":
        return nn.Flatten(), [int(np.prod(shape))]
    if kind == "linear":
        return nn.Linear(shape[0], spec["out"], bias=spec.get("bias", True)), [spec["out"]]
    if kind in ("relu", "tanh", "gelu"):
        return {"relu": nn.ReLU(), "tanh": nn.Tanh(), "gelu": nn.GELU()}[kind], shape
    if kind == "dropout":
        return nn.Dropout(spec.get("p", 0.0)), shape
    if kind == "conv2d":
        k, s, p = spec["kernel"], spec.get("stride", 1) or 1, spec.get("padding", 0)
        conv = nn.Conv2d(shape[0], spec["out_channels"], k, stride=s, padding=p, bias=spec.get("bias", True))
        h, w = (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1
        return conv, [spec["out_channels"], h, w]
    if kind == "maxpool2d":
        k = spec["kernel"]
        s = spec.get("stride", k) or k
        return nn.MaxPool2d(k, stride=s), [shape[0], (shape[1] - k) // s + 1, (shape[2] - k) // s + 1]
    if kind == "parallel":
        branches, outs = [], []
        for branch in spec["branches"]:
            module, out = build_sequence(branch["layers"], shape)
            branches.append(module)
            outs.append(out)
        return Parallel(branches), [sum(o[0] for o in outs)] + outs[0][1:]
    sys.exit(f"error: unknown layer type '{kind}'")


def build_sequence(layers, shape):
    modules = []
    for spec in layers:
        module, shape = build_layer(spec, shape)
        modules.append(module)
    return nn.Sequential(*modules), shape


def build_optimizer(spec, params):
    if isinstance(spec, str):
        spec = {"type": spec}
    kind = spec.get("type", "sgd")
    lr, wd = spec.get("lr", 0.01), spec.get("weight_decay", 0.0)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd)
    if kind == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=spec.get("momentum", 0.9), weight_decay=wd)
    if kind == "adam":
        betas = (spec.get("beta1", 0.9), spec.get("beta2", 0.999))
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=spec.get("eps", 1e-8), weight_decay=wd)
    sys.exit(f"error: unknown optimizer '{kind}'")


# ------------------------------------------------------------------------ training

def set_threads(threads):
    """Debian's torch is built with BLAS_INFO=generic, so torch.set_num_threads does not
    reach OpenBLAS, which would start its own pool of one thread per core on top of
    torch's OpenMP threads. Tell OpenBLAS directly (the library torch and numpy already
    loaded: dlopen of the same soname returns it). Returns OpenBLAS's thread count."""
    torch.set_num_threads(threads)
    for soname in ("libblas.so.3", "libopenblas.so.0"):
        try:
            lib = ctypes.CDLL(soname)
            lib.openblas_set_num_threads(ctypes.c_int(threads))
            return lib.openblas_get_num_threads()
        except (OSError, AttributeError):
            continue
    return None


class Batches:
    """Endless shuffled batches, last incomplete batch dropped (as Loom does); a fresh
    permutation each epoch. The gather is part of a timed step, as it is in Loom."""

    def __init__(self, x, y, batch, seed):
        self.x, self.y, self.batch = x, y, batch
        self.per_epoch = len(y) // batch
        self.gen = torch.Generator().manual_seed(seed)
        self.epoch, self.index, self.order = 0, 0, torch.randperm(len(y), generator=self.gen)

    def next(self):
        if self.index == self.per_epoch:
            self.epoch, self.index = self.epoch + 1, 0
            self.order = torch.randperm(len(self.y), generator=self.gen)
        idx = self.order[self.index * self.batch:(self.index + 1) * self.batch]
        self.index += 1
        return self.x.index_select(0, idx), self.y.index_select(0, idx)


def train_step(model, loss_fn, optimizer, x, y, device=None):
    if device is not None and device.type != "cpu":
        x, y = x.to(device), y.to(device)
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def build_optimizer_capturable(spec, params):
    """The plan's optimizer with its step count on the device, so a captured graph can
    replay it (Adam's bias correction reads the step)."""
    if isinstance(spec, str):
        spec = {"type": spec}
    if spec.get("type", "sgd") == "adam":
        betas = (spec.get("beta1", 0.9), spec.get("beta2", 0.999))
        return torch.optim.Adam(params, lr=spec.get("lr", 0.01), betas=betas, eps=spec.get("eps", 1e-8),
                                weight_decay=spec.get("weight_decay", 0.0), capturable=True)
    return build_optimizer(spec, params)


class GraphedStep:
    """The whole step captured once and replayed (PyTorch's CUDA notes, whole-network
    capture): static input and target tensors, three warm-up steps on a side stream,
    then torch.cuda.graph around zero_grad-free forward, loss, backward and step."""

    def __init__(self, model, loss_fn, optimizer, x, y, device):
        self.static_x = x.to(device).clone()
        self.static_y = y.to(device).clone()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(3):
                optimizer.zero_grad(set_to_none=True)
                loss_fn(model(self.static_x), self.static_y).backward()
                optimizer.step()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = loss_fn(model(self.static_x), self.static_y)
            self.static_loss.backward()
            optimizer.step()

    def __call__(self, x, y):
        self.static_x.copy_(x)
        self.static_y.copy_(y)
        self.graph.replay()
        return self.static_loss


def evaluate(model, loss_fn, x, y, batch=1000):
    model.eval()
    correct, total_loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            logits = model(x[i:i + batch])
            total_loss += loss_fn(logits, y[i:i + batch]).item() * len(logits)
            correct += (logits.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / len(y), total_loss / len(y)


def run(args, plan):
    training = plan.get("training", {})
    batch = args.batch or training.get("batch", 64)
    seed = training.get("seed", 42)
    torch.manual_seed(seed)
    (x, y), (tx, ty) = load_data(plan, args.data)
    model_spec = plan["model"]
    model, _ = build_sequence(model_spec["layers"], list(model_spec.get("input", list(x.shape[1:]))))
    x = x.reshape([len(x)] + list(model_spec.get("input", list(x.shape[1:]))))
    device = torch.device(args.device)
    model = model.to(device)
    loss_fn = nn.CrossEntropyLoss()
    graphed = args.cuda_graph and device.type == "cuda"
    if args.cuda_graph and not graphed:
        sys.exit("error: --cuda-graph needs --device cuda")
    make_optimizer = build_optimizer_capturable if graphed else build_optimizer
    optimizer = make_optimizer(training.get("optimizer", "sgd"), model.parameters())
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    batches = Batches(x, y, batch, seed)
    model.train()
    result = {"threads": torch.get_num_threads(), "batch": batch, "torch": torch.__version__, "device": str(device),
              "cuda_graph": graphed}
    step = lambda bx, by: train_step(model, loss_fn, optimizer, bx, by, device)  # noqa: E731
    if graphed:
        step = GraphedStep(model, loss_fn, optimizer, *batches.next(), device)

    if args.eval or args.epochs:
        epochs = args.epochs or training.get("epochs", 1)
        steps = epochs * batches.per_epoch
    else:
        for _ in range(args.warmup):
            step(*batches.next())
        steps = args.steps or training.get("steps", 0) or 200
    steps = max(steps, 1)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(*batches.next())
    sync()
    elapsed = time.perf_counter() - start
    result.update(samples_per_s=steps * batch / elapsed, step_ms=1000 * elapsed / steps, steps=steps,
                  final_loss=loss.item())
    if args.eval or args.epochs:
        acc, test_loss = evaluate(model, loss_fn, tx.reshape([len(tx)] + list(x.shape[1:])).to(device), ty.to(device))
        result.update(epochs=epochs, train_s=elapsed, test_accuracy=acc, test_loss=test_loss)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", help="Loom plan JSON file (loom-plan/1)")
    parser.add_argument("--steps", type=int, default=0, help="timed steps (default: plan's steps or 200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps before timing")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--batch", type=int, default=0, help="override the plan's batch")
    parser.add_argument("--epochs", type=int, default=0, help="train full epochs instead of --steps")
    parser.add_argument("--eval", action="store_true", help="train epochs and report test accuracy")
    parser.add_argument("--data", default=None, help="override data.path")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--cuda-graph", action="store_true", help="capture the training step as one CUDA graph")
    parser.add_argument("--omp-wait", choices=["passive", "active", "default"], default="passive",
                        help="OMP_WAIT_POLICY for torch's OpenMP pool (default: passive, see above)")
    args = parser.parse_args()
    blas_threads = set_threads(args.threads)
    with open(args.plan) as f:
        plan = json.load(f)
    result = run(args, plan)
    result.update(blas_threads=blas_threads, omp_wait=OMP_WAIT)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
