"""The background thread while the DistributedOptimizer trains bench_training.py's
convnet, alone: per step, its voluntary and involuntary context switches (from
/proc/self/task/<tid>/status), its CPU share and times scheduled (thread_cpu), the
engine's cycles and responses, and the step time. Rank by rank, the median over
rounds. Run the same job from two trees alternately to compare:

    for tree in /work/main /work/wt-x; do
      PYTHONPATH=$tree/python mpirun -np 2 --bind-to core -x PYTHONPATH \\
        python benchmarks/studies/training_wakeups.py
    done

PROBE_ROUNDS (5) rounds of PROBE_STEPS (20) steps, after 5 warm-up steps.
"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from convnet import FashionConvNet, synthetic_batches  # noqa: E402
from thread_cpu import ThreadMeter  # noqa: E402

import lockstep.torch as ls  # noqa: E402
from lockstep.common.basics import engine_stats  # noqa: E402


def context_switches(tid):
    counts = {}
    with open(f"/proc/self/task/{tid}/status") as stream:
        for line in stream:
            if "ctxt_switches" in line:
                key, value = line.split(":")
                counts[key] = int(value)
    return counts


def main():
    steps = int(os.environ.get("PROBE_STEPS", "20"))
    rounds = int(os.environ.get("PROBE_ROUNDS", "5"))
    torch.set_num_threads(1)
    ls.init()
    torch.manual_seed(42)
    model = FashionConvNet()
    optimizer = ls.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), named_parameters=model.named_parameters()
    )
    ls.broadcast_parameters(model.state_dict(), root_rank=0)
    batches = synthetic_batches(ls.rank(), 64)

    def step():
        images, labels = batches.next()
        optimizer.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()

    for _ in range(5):
        step()
    meter = ThreadMeter("lockstep-bg")
    rows = []
    for _ in range(rounds):
        ls.allreduce(torch.zeros(1), name="probe.sync")
        stats0, switches0, start = engine_stats(), context_switches(meter.tid), time.perf_counter()
        with meter:
            for _ in range(steps):
                step()
        seconds = time.perf_counter() - start
        stats1, switches1 = engine_stats(), context_switches(meter.tid)
        row = {"step_ms": seconds / steps * 1e3}
        for key, short in (("voluntary_ctxt_switches", "vol"), ("nonvoluntary_ctxt_switches", "invol")):
            row[short] = (switches1[key] - switches0[key]) / steps
        row.update({key: (stats1[key] - stats0[key]) / steps for key in stats1})
        rows.append(row)
    summary = {key: round(statistics.median(row[key] for row in rows), 2) for key in rows[0]}
    summary["bg_core_pct"] = round(100 * meter.cpu_ns / 1e9 / meter.wall_s, 2)
    summary["bg_sched_per_step"] = round(meter.scheduled / (meter.spans * steps), 1)
    summary["lockstep"] = os.path.dirname(ls.__file__)
    print(f"rank {ls.rank()}: " + json.dumps(summary), flush=True)
    ls.shutdown()


if __name__ == "__main__":
    main()
