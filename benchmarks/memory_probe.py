"""Resident memory of this process from /proc/self/status (Linux only)."""

import re

_FIELD = re.compile(r"^(VmRSS|VmHWM):\s+(\d+) kB$", re.MULTILINE)


def resident_bytes():
    """{'VmRSS': current, 'VmHWM': peak since start or the last reset}, in bytes."""
    with open("/proc/self/status") as stream:
        return {name: int(kib) * 1024 for name, kib in _FIELD.findall(stream.read())}


def reset_peak():
    """Set the peak (VmHWM) to the current RSS, so the next peak covers only what follows."""
    with open("/proc/self/clear_refs", "w") as stream:
        stream.write("5")


class PeakOverhead:
    """Context manager: how far RSS peaked above its level at entry.

    with PeakOverhead() as probe:
        work()
    probe.bytes
    """

    def __enter__(self):
        reset_peak()
        self._start = resident_bytes()["VmRSS"]
        self.bytes = None
        return self

    def __exit__(self, *exc_info):
        self.bytes = resident_bytes()["VmHWM"] - self._start
        return False
