"""Where lockstep-run puts ranks: hosts and slots from -H, a hostfile or a Slurm allocation.

Plain parsing, no lockstep imports, so the launcher works without the compiled core.
Every function returns a list of (host, slots) in order and raises HostsError with a
message naming the source and the offending entry.
"""

import re


class HostsError(Exception):
    """A malformed host list, hostfile or Slurm variable."""


def _slot_count(text, where):
    if not text.isdigit() or int(text) < 1:
        raise HostsError(f"{where}: slot count {text!r} must be a whole number >= 1")
    return int(text)


def merge(hosts):
    """Adds up the slots of repeated hosts, keeping first-seen order."""
    slots = {}
    for name, count in hosts:
        slots[name] = slots.get(name, 0) + count
    return list(slots.items())


def parse_host_list(text):
    """-H "node1:4,node2:2"; a host without ":N" has one slot."""
    hosts = []
    for entry in text.split(","):
        name, _, slots = entry.strip().partition(":")
        if not name:
            raise HostsError(f"bad -H entry {entry!r}: expected host or host:slots")
        hosts.append((name, _slot_count(slots, f"bad -H entry {entry!r}") if slots else 1))
    return merge(hosts)


def parse_hostfile(text, path="hostfile"):
    """Horovod's and Open MPI's hostfile syntax: one host per line, optionally followed
    by `slots=N` (Open MPI also takes `max_slots=N`/`max-slots=N`, which bounds nothing
    here, and `host:N`); `#` starts a comment. A host without slots has one."""
    hosts = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path} line {number} ({raw.strip()!r})"
        fields = line.split()
        name, _, colon_slots = fields[0].partition(":")
        slots = _slot_count(colon_slots, where) if colon_slots else None
        for field in fields[1:]:
            key, equals, value = field.partition("=")
            if not equals:
                raise HostsError(f"{where}: expected key=value after the host, got {field!r}")
            if key == "slots":
                slots = _slot_count(value, where)
            elif key in ("max_slots", "max-slots"):
                _slot_count(value, where)
            else:
                raise HostsError(f"{where}: unknown setting {key!r} (expected slots=N)")
        if not name:
            raise HostsError(f"{where}: no host name")
        hosts.append((name, slots or 1))
    if not hosts:
        raise HostsError(f"{path} names no hosts")
    return merge(hosts)


def _split_top_level(text):
    """Splits on commas outside brackets: "a[1-2,4],b" -> ["a[1-2,4]", "b"]."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _expand_range(item, where):
    low, _, high = item.partition("-")
    if not low.isdigit() or (high and not high.isdigit()):
        raise HostsError(f"{where}: bad range {item!r}")
    if not high:
        return [low]
    if int(high) < int(low):
        raise HostsError(f"{where}: range {item!r} runs backwards")
    width = len(low)  # node[01-10] keeps its zero padding
    return [str(n).zfill(width) for n in range(int(low), int(high) + 1)]


def expand_nodelist(text):
    """Slurm's compressed host lists: "node[1-3,5],gpu07,rack[1-2]-n[01-02]"."""
    where = f"Slurm node list {text!r}"
    names = []
    for part in _split_top_level(text.strip()):
        if not part:
            raise HostsError(f"{where}: empty entry")
        expanded = [""]
        for literal, bracket in re.findall(r"([^\[\]]*)(?:\[([^\[\]]*)\])?", part):
            choices = [literal]
            if bracket:
                numbers = [n for item in bracket.split(",") for n in _expand_range(item, where)]
                choices = [literal + n for n in numbers]
            expanded = [prefix + choice for prefix in expanded for choice in choices]
        if part.count("[") != part.count("]"):
            raise HostsError(f"{where}: unbalanced brackets in {part!r}")
        names += expanded
    return names


def expand_tasks_per_node(text):
    """SLURM_TASKS_PER_NODE: "2(x3),1" -> [2, 2, 2, 1]."""
    counts = []
    for entry in text.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", entry)
        if not match:
            raise HostsError(f"SLURM_TASKS_PER_NODE {text!r}: bad entry {entry!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def in_slurm_allocation(env):
    return bool(env.get("SLURM_JOB_ID")) and bool(nodelist_variable(env))


def nodelist_variable(env):
    return env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")


def slurm_hosts(env):
    """Hosts and slots of the Slurm allocation this process runs in: the node list with
    SLURM_TASKS_PER_NODE, else SLURM_NTASKS spread as evenly as Slurm's block layout
    does, else one slot per node."""
    nodes = expand_nodelist(nodelist_variable(env))
    per_node = env.get("SLURM_TASKS_PER_NODE")
    if per_node:
        counts = expand_tasks_per_node(per_node)
        if len(counts) != len(nodes):
            raise HostsError(
                f"SLURM_TASKS_PER_NODE {per_node!r} gives {len(counts)} counts "
                f"for {len(nodes)} nodes ({nodelist_variable(env)!r})"
            )
    elif env.get("SLURM_NTASKS", "").isdigit():
        total = int(env["SLURM_NTASKS"])
        base, extra = divmod(total, len(nodes))
        counts = [base + (i < extra) for i in range(len(nodes))]
    else:
        counts = [1] * len(nodes)
    return [(node, count) for node, count in zip(nodes, counts) if count > 0]


def format_host_list(hosts):
    return ",".join(f"{name}:{slots}" for name, slots in hosts)
