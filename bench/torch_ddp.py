#!/usr/bin/python3
"""PyTorch DDP peer for Loom's data-parallel benchmark (bench_dp).

Starts N processes (torch.multiprocessing spawn), joins them with the gloo backend on
127.0.0.1, wraps the model built from a Loom plan (torch_train.py's builders) in
DistributedDataParallel, and trains like Loom's replicas do: the global batch is the
plan's batch, every rank draws the same shuffled global batch and trains on its own
contiguous shard of batch/N samples. DDP averages gradients over ranks, and each rank's
loss is a mean over its shard, so the update equals the full-batch one, as in Loom.
`--warmup W` untimed steps, then `--steps S` timed; rank 0 prints ONE JSON line.

usage: /usr/bin/python3 bench/torch_ddp.py PLAN --ranks N [--steps S] [--warmup W] [--threads T]
"""
import argparse
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_train  # noqa: E402  (sets OMP_WAIT_POLICY before torch loads, see there)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


class ShardBatches(torch_train.Batches):
    """The same global batch sequence on every rank (same seed), this rank's shard of it:
    only the shard is gathered, as Loom's gather_batch does."""

    def __init__(self, x, y, batch, seed, rank, ranks):
        super().__init__(x, y, batch, seed)
        self.local = batch // ranks
        self.offset = rank * self.local

    def next(self):
        if self.index == self.per_epoch:
            self.epoch, self.index = self.epoch + 1, 0
            self.order = torch.randperm(len(self.y), generator=self.gen)
        begin = self.index * self.batch + self.offset
        idx = self.order[begin:begin + self.local]
        self.index += 1
        return self.x.index_select(0, idx), self.y.index_select(0, idx)


def free_port():
    """A port the OS just handed out; released before gloo binds it (a small race that
    does not matter on a benchmark machine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(plan, rank, ranks, args):
    training = plan.get("training", {})
    batch, seed = training.get("batch", 64), training.get("seed", 42)
    if batch % ranks:
        sys.exit(f"error: batch {batch} is not divisible by {ranks} ranks")
    torch.manual_seed(seed)  # identical initial weights (DDP also broadcasts rank 0's)
    (x, y), _ = torch_train.load_data(plan, None)
    spec = plan["model"]
    shape = list(spec.get("input", list(x.shape[1:])))
    model, _ = torch_train.build_sequence(spec["layers"], shape)
    x = x.reshape([len(x)] + shape)
    bucket = {"bucket_cap_mb": args.bucket_mb} if args.bucket_mb > 0 else {}
    ddp = DistributedDataParallel(model, **bucket)
    optimizer = torch_train.build_optimizer(training.get("optimizer", "sgd"), ddp.parameters())
    return ddp, optimizer, ShardBatches(x, y, batch, seed, rank, ranks), batch


def worker(rank, ranks, port, args):
    torch_train.set_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    with open(args.plan) as f:
        plan = json.load(f)
    model, optimizer, batches, batch = build(plan, rank, ranks, args)
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(args.warmup):
        torch_train.train_step(model, loss_fn, optimizer, *batches.next())
    dist.barrier()  # every rank starts the window together
    start = time.perf_counter()
    for _ in range(args.steps):
        torch_train.train_step(model, loss_fn, optimizer, *batches.next())
    dist.barrier()  # and the window ends when the slowest rank is done
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(json.dumps({"engine": "torch_ddp", "backend": "gloo", "world_size": ranks,
                          "threads": torch.get_num_threads(), "batch": batch, "batch_per_rank": batch // ranks,
                          "steps": args.steps, "samples_per_s": args.steps * batch / elapsed,
                          "step_ms": 1000 * elapsed / args.steps, "torch": torch.__version__,
                          "omp_wait": torch_train.OMP_WAIT}), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", help="Loom plan JSON file (loom-plan/1)")
    parser.add_argument("--ranks", type=int, default=2, help="DDP processes (world size)")
    parser.add_argument("--steps", type=int, default=100, help="timed steps")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps before timing")
    parser.add_argument("--threads", type=int, default=0, help="threads per rank (default: cores / ranks)")
    parser.add_argument("--bucket-mb", type=float, default=0, help="DDP bucket_cap_mb (default: DDP's 25)")
    parser.add_argument("--omp-wait", choices=["passive", "active", "default"], default="passive",
                        help="OMP_WAIT_POLICY (read by torch_train on import)")
    args = parser.parse_args()
    if args.threads <= 0:
        args.threads = max(1, (os.cpu_count() or 1) // args.ranks)
    mp.spawn(worker, args=(args.ranks, free_port(), args), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
