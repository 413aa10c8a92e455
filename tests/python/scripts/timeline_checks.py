"""Reading lockstep's timeline in rank scripts: which allreduces the core fused."""

import json

# How an allreduce shows that it ran: its collective, or its reduction inside
# negotiation's exchange (a lone small cached allreduce riding with the bits).
ALLREDUCE_RUNS = ("MPI_ALLREDUCE", "ALLREDUCE_IN_NEGOTIATION")


def read_timeline(path):
    with open(path) as stream:
        text = stream.read().rstrip().rstrip(",")
    return json.loads(text if text.endswith("]") else text + "]")


def fused_share(events, name_prefix):
    """Fraction of the allreduces named name_prefix* that went through the fusion
    buffer, i.e. shared one MPI call with at least one other tensor (one that rode
    with negotiation's bits counts as run, not fused)."""
    track_names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    ours = {tid for tid, name in track_names.items() if name.startswith(name_prefix)}
    launches = [e for e in events if e.get("tid") in ours and e.get("ph") == "B" and e["name"] in ALLREDUCE_RUNS]
    fused = [e for e in events if e.get("tid") in ours and e.get("name") == "MEMCPY_IN_FUSION_BUFFER"]
    return len(fused) / max(1, len(launches)), len(launches)
