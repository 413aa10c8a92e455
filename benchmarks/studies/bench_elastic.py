"""Elastic training costs: what a commit costs with a ResNet-50-sized model and
optimizer state (torch), and what a recovery costs (from killing a host's ranks to
the first training step after it).

    # commit: 2 ranks on this machine (--with-ft ulfm: with the agreement before each commit)
    mpirun --allow-run-as-root [--with-ft ulfm] -np 2 .venv/bin/python \
        benchmarks/studies/bench_elastic.py commit [--rounds 10]
    # recovery: 5 ranks on the pretend cluster (root), a host killed, the job goes on on 4
    # (in process and by a restart, alternating)
    sudo .venv/bin/python benchmarks/studies/bench_elastic.py recovery [--rounds 3]

Commit figures per round, medians over rounds, on rank 0 (the host's writer):
`copy` is a plain clone of every tensor of that state (the floor for a commit),
`save` is State.save() (deep copies of the model's and the optimizer's state_dicts,
what restore() returns to), `commit` is all that the training thread waits for in
state.commit() (save, handing the copy to the writer thread, and the one-broadcast
check for host updates), `write` is how long the writer thread then needs to pickle
the copy to /dev/shm, and `resume` is what a restarted job spends on state: loading
the newest commit on its holder and syncing it to every rank.
"""

import argparse
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))


def bench_commit(rounds):
    os.environ.setdefault("LOCKSTEP_ELASTIC_JOB_ID", f"bench{os.getppid()}")
    import torch
    from resnet50_model import ResNet50

    import lockstep.torch as hvd
    from lockstep.common import basics
    from lockstep.common.elastic import environment
    from lockstep.common.elastic.store import CommitStore

    torch.set_num_threads(1)
    hvd.init()
    model = ResNet50()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for parameter in model.parameters():  # one step creates the momentum buffers
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    state = hvd.elastic.TorchState(model, optimizer, epoch=0)
    # Rank 0 writes, as the one rank per host that writes in an elastic job.
    root = tempfile.mkdtemp(prefix="lockstep-bench-elastic-", dir="/dev/shm") if hvd.rank() == 0 else None
    store = CommitStore(root, environment.job_id(), secrets.token_bytes(32)) if hvd.rank() == 0 else None
    state._store = store
    # As elastic.run sets it where survivors recover in process (mpirun --with-ft ulfm).
    state._agree_before_commit = basics.can_recover_in_process()
    tensors = [*model.state_dict().values()]
    tensors += [value for entry in optimizer.state_dict()["state"].values() for value in entry.values()]
    tensors = [tensor for tensor in tensors if torch.is_tensor(tensor)]
    times = {"copy": [], "save": [], "commit": [], "write": [], "resume": []}
    for _ in range(rounds):
        hvd.barrier()
        started = time.perf_counter()
        copies = [tensor.clone() for tensor in tensors]
        times["copy"].append(time.perf_counter() - started)
        del copies
        hvd.barrier()
        started = time.perf_counter()
        state.save()
        times["save"].append(time.perf_counter() - started)
        started = time.perf_counter()
        state.commit()
        committed = time.perf_counter()
        times["commit"].append(committed - started)
        if store is not None:
            store.flush()
        times["write"].append(time.perf_counter() - committed)
        hvd.barrier()
        started = time.perf_counter()
        if hvd.rank() == 0:
            state.load_snapshot(store.load(store.newest()))
        state._sync_root = 0
        state.sync()
        times["resume"].append(time.perf_counter() - started)
    if hvd.rank() == 0:
        size = sum(os.path.getsize(os.path.join(store.directory, name)) for name in os.listdir(store.directory))
        size /= len(os.listdir(store.directory))
        print(
            f"ResNet-50 + SGD momentum state, {hvd.size()} ranks, {rounds} rounds; commit file "
            f"{size / 2**20:.0f} MiB on /dev/shm; agreement before each commit: {state._agree_before_commit}"
        )
        for what, values in times.items():
            print(
                f"  {what:<7} median {statistics.median(values) * 1e3:7.1f} ms   "
                f"(min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f})"
            )
        store.remove()
        os.rmdir(root)


def bench_recovery(rounds):
    sys.path.insert(0, str(REPO / "tests" / "python"))
    import elastic_cluster
    import pretend_cluster

    reason = pretend_cluster.unavailable_reason()
    if reason:
        sys.exit(reason)
    # Both paths in the same run, alternating: in process where the MPI has ULFM (the
    # survivors go on), and the restart (LOCKSTEP_ELASTIC_IN_PROCESS=0: a new job).
    modes = ["in process", "restart"] if elastic_cluster.recovers_in_process() else ["restart"]
    results = {mode: [] for mode in modes}
    with pretend_cluster.PretendCluster([2, 2, 1]) as cluster:
        for round_index, mode in ((r, m) for r in range(rounds) for m in modes):
            with tempfile.TemporaryDirectory() as tmp:
                env = {"LOCKSTEP_TEST_STEP_SECONDS": "0.1"}
                if mode == "restart":
                    env["LOCKSTEP_ELASTIC_IN_PROCESS"] = "0"
                run = elastic_cluster.ElasticRun(
                    cluster,
                    Path(tmp),
                    ["node1:2", "node2:2", "node3:1"],
                    ("--min-np", "2"),
                    env=env,
                )
                try:
                    run.wait_for_progress(size=5, commits=2)
                    killed_at = time.monotonic()
                    elastic_cluster.kill_ranks(cluster, 2)
                    step = run.job.wait_for(r"\[train\] size 4 epoch \d+ commits (?P<rank>\d+)", 1, 120)
                    assert step, run.job.output()
                    results[mode].append(next(iter(step.values()))[0] - killed_at)
                    print(
                        f"round {round_index + 1}, {mode}: {results[mode][-1]:.2f} s from the kill to the first "
                        f"step on 4 ranks ({phases(run.job, killed_at)})",
                        flush=True,
                    )
                finally:
                    run.stop()
    for mode, seconds in results.items():
        print(f"recovery {mode} (kill -> first step after it), median of {rounds}: {statistics.median(seconds):.2f} s")


def phases(job, killed_at):
    """When the next job started, its last rank was ready (imports and init done) and it
    resumed, in seconds after the kill."""
    marks = {
        "next mpirun started": r"generation 1:",
        "all ranks ready": r"ready rank",
        "state resumed": r"resuming from commit",
        "recovered in process": r"recovered in process",
    }
    found = {}
    with job.changed:
        for at, line in job.lines:
            for name, pattern in marks.items():
                if at >= killed_at and re.search(pattern, line):
                    found[name] = at - killed_at  # the last match: the last rank to get ready
    return ", ".join(f"{name} at {seconds:.1f} s" for name, seconds in found.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["commit", "recovery"])
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    if args.what == "commit":
        bench_commit(args.rounds or 10)
    else:
        bench_recovery(args.rounds or 3)


if __name__ == "__main__":
    main()
