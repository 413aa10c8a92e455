"""Per-step phase times from a lockstep timeline (Chrome trace JSON).

    .venv/bin/python benchmarks/run_all.py --only gradient_step --timeline
    .venv/bin/python benchmarks/timeline_phases.py results/latest/timeline_gradient_step.json

Tensors are grouped by the first dot-separated part of their name (the gradient
step benchmark names them numpy.grad.* and torch.grad.*). A step is a burst of
spans separated from the next by a quiet gap. For each phase the wall time during
which at least one tensor was in it is printed, so overlapping tensors count once.
"""

import argparse
import collections
import json

QUIET_GAP_US = 5000


def read_spans(path):
    """[(tensor name, phase, begin us, end us)] from matched B/E events."""
    with open(path) as stream:
        events = json.load(stream)
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    open_spans = collections.defaultdict(list)
    spans = []
    for event in events:
        if event.get("ph") == "B":
            open_spans[event["tid"]].append(event)
        elif event.get("ph") == "E" and open_spans[event["tid"]]:
            begin = open_spans[event["tid"]].pop()
            spans.append((names.get(event["tid"], "?"), begin["name"], begin["ts"], event["ts"]))
    cycles = sorted(e["ts"] for e in events if e.get("name") == "CYCLE_START")
    return spans, cycles


def split_steps(spans):
    steps, current, current_end = [], [], None
    for span in sorted(spans, key=lambda s: s[2]):
        if current and span[2] - current_end > QUIET_GAP_US:
            steps.append(current)
            current = []
        current.append(span)
        current_end = span[3] if len(current) == 1 else max(current_end, span[3])
    if current:
        steps.append(current)
    return steps


def covered_us(intervals):
    """Length of the union of [begin, end) intervals."""
    total, end = 0, None
    for begin, finish in sorted(intervals):
        if end is None or begin > end:
            total += finish - begin
            end = finish
        elif finish > end:
            total += finish - end
            end = finish
    return total


def describe_step(step, cycles):
    begin, end = min(s[2] for s in step), max(s[3] for s in step)
    phases = sorted({s[1] for s in step})
    parts = [f"{phase} {covered_us([(s[2], s[3]) for s in step if s[1] == phase]) / 1e3:.1f}" for phase in phases]
    cycle_count = sum(1 for c in cycles if begin <= c <= end)
    return f"span {(end - begin) / 1e3:.1f} ms, {cycle_count} cycles: " + ", ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("timeline")
    args = parser.parse_args()
    spans, cycles = read_spans(args.timeline)
    groups = collections.defaultdict(list)
    for span in spans:
        groups[span[0].split(".")[0]].append(span)
    for group, group_spans in groups.items():
        steps = split_steps(group_spans)
        print(f"{group}: {len(steps)} steps (phase times in ms)")
        for index, step in enumerate(steps):
            print(f"  step {index}: {describe_step(step, cycles)}")


if __name__ == "__main__":
    main()
