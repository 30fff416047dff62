#!/usr/bin/python3
"""Real PyTorch profiler traces of a 2-rank DDP run, for `loom-cli import --kineto`.

Starts N processes (torch.multiprocessing spawn), joins them with the gloo backend on
127.0.0.1 (tcp init), wraps a small MLP (784-64-10, like Loom's Fashion-MNIST MLP) in
DistributedDataParallel and trains it on Fashion-MNIST
(/usr/share/datasets/fashion-mnist, IDX gzip; random data with --random) under
torch.profiler with a schedule (wait, warmup, active steps). Each rank writes its
profiler's Chrome trace to OUT_DIR/rank<R>.json (export_chrome_trace from
on_trace_ready), so the files are what PyTorch itself writes, nothing edited.

`--label-layers` names each layer's forward in the trace the way Loom names its spans
("forward linear_1": a record_function range opened and closed by module hooks, with
Loom's default layer names, kind_position), so that the phase diff can match the trace to
a Loom run layer by layer. The model then starts with a Flatten, as Loom's MLPs do.

The test fixtures in tests/data/kineto/ were made with (Debian python3-torch 1.13.1):
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/kineto/make_ddp_trace.py tests/data/kineto \
      --active 4 && gzip -9 tests/data/kineto/rank1.json
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/kineto/make_ddp_trace.py tests/data/kineto/labelled \
      --ranks 1 --active 3 --label-layers

usage: make_ddp_trace.py OUT_DIR [--ranks N] [--active A] [--batch B] [--random] [--label-layers]
"""
import argparse
import gzip
import os
import socket
import struct

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

FASHION = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (gzip) as a tensor: magic, dims as big-endian u32, then u8 data."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def load_data(random, samples=4096):
    if random or not os.path.exists(FASHION):
        gen = torch.Generator().manual_seed(7)
        return torch.rand(samples, 784, generator=gen), torch.randint(0, 10, (samples,), generator=gen)
    x = read_idx(os.path.join(FASHION, "train-images-idx3-ubyte.gz"))[:samples]
    y = read_idx(os.path.join(FASHION, "train-labels-idx1-ubyte.gz"))[:samples]
    return x.reshape(len(x), 784).float() / 255.0, y.long()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOOM_KINDS = {nn.Flatten: "flatten", nn.Linear: "linear", nn.ReLU: "relu"}


def label_layers(layers):
    """Wraps each layer's forward in a record_function range named as Loom names the span."""
    for position, layer in enumerate(layers):
        name = f"forward {LOOM_KINDS[type(layer)]}_{position}"
        ranges = []

        def enter(module, inputs, name=name, ranges=ranges):
            ranges.append(torch.profiler.record_function(name))
            ranges[-1].__enter__()

        def leave(module, inputs, output, ranges=ranges):
            ranges.pop().__exit__(None, None, None)

        layer.register_forward_pre_hook(enter)
        layer.register_forward_hook(leave)


def worker(rank, ranks, port, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    torch.manual_seed(42)  # identical initial weights (DDP broadcasts rank 0's anyway)
    x, y = load_data(args.random)
    layers = [nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10)]
    if args.label_layers:
        layers.insert(0, nn.Flatten())
        label_layers(layers)
    model = DistributedDataParallel(nn.Sequential(*layers))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    local = args.batch // ranks
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[rank::ranks], y[rank::ranks]),
                                         batch_size=local, shuffle=False)
    out = os.path.join(args.out_dir, f"rank{rank}.json")
    schedule = torch.profiler.schedule(wait=args.wait, warmup=1, active=args.active, repeat=1)
    steps = args.wait + 1 + args.active
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule, record_shapes=True,
                                on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
        for step, (xb, yb) in enumerate(loader):
            if step == steps:
                break
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            prof.step()
    dist.barrier()
    if rank == 0:
        print(f"wrote {ranks} traces to {args.out_dir} (torch {torch.__version__}, {args.active} active steps)")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--wait", type=int, default=1, help="profiler schedule: steps not traced")
    parser.add_argument("--active", type=int, default=3, help="profiler schedule: steps traced")
    parser.add_argument("--batch", type=int, default=64, help="global batch (split over ranks)")
    parser.add_argument("--random", action="store_true", help="random data instead of Fashion-MNIST")
    parser.add_argument("--label-layers", action="store_true", help="name each layer's forward as Loom does")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    mp.spawn(worker, args=(args.ranks, free_port(), args), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
