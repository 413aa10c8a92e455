"""Elastic host discovery for lockstep-run: the discovery script's hosts, minus those
blacklisted after a failure, in a stable order.

Plain Python, no lockstep imports (the launcher runs without the compiled core).
"""

import random
import subprocess
import time


class DiscoveryError(Exception):
    """The discovery script failed or printed something that is not `host:slots`."""


def parse_discovery_output(text, script):
    """`host:slots` lines (a host alone has one slot) -> {host: slots}, in order."""
    hosts = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        name, colon, slots = line.partition(":")
        if not name or (colon and not (slots.isdigit() and int(slots) >= 1)):
            raise DiscoveryError(f"host discovery script {script} printed {raw!r}: expected host:slots with slots >= 1")
        hosts[name] = int(slots) if colon else 1
    return hosts


def run_discovery_script(script, timeout=30):
    """Run the script (a shell command line, as in Horovod) and parse what it prints."""
    try:
        done = subprocess.run(script, shell=True, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DiscoveryError(f"host discovery script {script} did not finish within {timeout} s") from None
    if done.returncode != 0:
        raise DiscoveryError(
            f"host discovery script {script} failed with exit status {done.returncode}: {done.stderr.strip()[-500:]}"
        )
    return parse_discovery_output(done.stdout, script)


class Blacklist:
    """Hosts that failed. Without a cool-down range they stay out for good (Horovod's
    default); with (low, high) seconds a host returns after low * 2^(failures-1) plus up
    to `low` of random jitter, at most `high`."""

    def __init__(self, cooldown_range=None, clock=time.monotonic, rng=random.random):
        self._cooldown_range = cooldown_range
        self._clock = clock
        self._rng = rng
        self._failures = {}
        self._until = {}

    def add(self, host):
        self._failures[host] = self._failures.get(host, 0) + 1
        if self._cooldown_range is None:
            self._until[host] = float("inf")
            return float("inf")
        low, high = self._cooldown_range
        delay = min(high, low * 2 ** (self._failures[host] - 1) + self._rng() * low)
        self._until[host] = self._clock() + delay
        return delay

    def contains(self, host):
        return self._clock() < self._until.get(host, float("-inf"))

    def hosts(self):
        return sorted(host for host in self._until if self.contains(host))


class HostManager:
    """The hosts a job may use now. Order is stable: hosts keep their place (so the
    oldest hosts keep the lowest ranks) and new ones go last."""

    def __init__(self, discover, blacklist):
        self._discover = discover
        self.blacklist = blacklist
        self._order = []
        self.discovered = {}

    def refresh(self):
        self.discovered = self._discover()
        self._order = [host for host in self._order if host in self.discovered]
        self._order += [host for host in self.discovered if host not in self._order]

    def available(self):
        """[(host, slots)] of discovered hosts that are not blacklisted."""
        return [(host, self.discovered[host]) for host in self._order if not self.blacklist.contains(host)]


def assign(available, max_np):
    """The hosts and slots of the next job: available ones in order, up to max_np slots."""
    chosen, total = [], 0
    for host, slots in available:
        if max_np is not None and total >= max_np:
            break
        take = slots if max_np is None else min(slots, max_np - total)
        chosen.append((host, take))
        total += take
    return chosen
