"""Adds function and source names to the backtrace lines segv_trace.c prints
(`lib(+0xOFF)` or `lib(symbol+0xOFF)`), with nm and addr2line: stdin to stdout."""

import functools
import re
import subprocess
import sys

FRAME = re.compile(r"^(\S+?)\((\S*?)\+0x([0-9a-f]+)\)")


@functools.lru_cache(None)
def symbol_addresses(library):
    table = {}
    for flags in (["-D"], []):
        listing = subprocess.run(["nm", *flags, "--defined-only", library], capture_output=True, text=True).stdout
        for line in listing.splitlines():
            parts = line.split()
            if len(parts) == 3:
                table.setdefault(parts[2], int(parts[0], 16))
    return table


def resolve(line):
    match = FRAME.match(line.strip())
    if not match:
        return None
    library, symbol, offset = match.group(1), match.group(2), int(match.group(3), 16)
    base = symbol_addresses(library).get(symbol) if symbol else 0
    if base is None:
        return None
    # The return address points after the call: look up the byte before it.
    found = subprocess.run(
        ["addr2line", "-f", "-C", "-i", "-e", library, hex(base + offset - 1)], capture_output=True, text=True
    ).stdout
    return " / ".join(part for part in found.splitlines() if part)


def main():
    for line in sys.stdin:
        line = line.rstrip("\n")
        print(line)
        where = resolve(line)
        if where:
            print(f"      -> {where}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
