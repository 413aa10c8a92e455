"""The report's negotiation section: cycle cost by rank count."""

from summary import find_row, variants


def negotiation_section(negotiation):
    rows = negotiation["rows"]
    names = variants(rows)
    counts = sorted({row["ranks"] for row in rows})
    lines = ["| ranks | " + " | ".join(names) + " |", "|" + "|".join("---" for _ in range(len(names) + 1)) + "|"]
    for count in counts:
        cells = []
        for name in names:
            row = find_row(rows, name, ranks=count)
            cells.append("-" if row is None else f"{row['median_s'] * 1e6:.0f} / {row['p90_s'] * 1e6:.0f}")
        marker = " (oversubscribed)" if any(r["ranks"] == count and r.get("oversubscribed") for r in rows) else ""
        lines.append(f"| {count}{marker} | " + " | ".join(cells) + " |")
    return (
        "### 9. Negotiation: a lone 4-byte allreduce by rank count (us, median / p90 of the slowest "
        "rank). Cached: one AND across ranks per cycle; uncached: also a gather and a broadcast "
        "through the coordinator. Oversubscribed rows measure the scheduler more than the "
        'exchange; see docs/PERFORMANCE.md, "Negotiation at scale"\n\n' + "\n".join(lines)
    )


# The cycle model of docs/PERFORMANCE.md ("Negotiation at scale"). alpha: one-way
# latency of a small message; g: the gap between messages at one rank (its CPU cost
# per message); beta: bandwidth; bits: the AND vector's bytes; request/response: the
# bytes one rank sends and the coordinator answers in a full round.
MODEL_RANKS = (1024, 2048, 4096, 8192, 16384)


def _log2(n):
    return max(1, (n - 1).bit_length())


def model_cycle_seconds(n, alpha, g, beta, bits=272, request=128, response=128):
    """{name: seconds} for one cycle at n ranks, star (the old exchange) and log depth."""
    rounds = _log2(n)
    star_and = 2 * alpha + 2 * (n - 1) * (g + bits / beta)  # n-1 receives then n-1 sends at rank 0
    star_full = 2 * alpha + (n - 1) * (2 * g + (request + response) / beta)
    log_and = rounds * (alpha + 2 * g + bits / beta)  # recursive doubling
    # Igather of sizes and Igatherv of requests: libnbc gathers linearly at the root, so
    # the root still pays a gap per rank; the broadcast of responses is a binomial tree.
    log_full = (
        (alpha + (n - 1) * (g + 8 / beta))
        + (alpha + (n - 1) * (g + request / beta))
        + rounds * (alpha + g + 1024 / beta)
    )
    return {
        "star cached": star_and,
        "star uncached": star_and + star_full,
        "log cached": log_and,
        "log uncached": log_and + log_full,
    }


def model_table(alpha, g, beta, label):
    names = ["star cached", "log cached", "star uncached", "log uncached"]
    lines = [f"| ranks ({label}) | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for n in MODEL_RANKS:
        cycle = model_cycle_seconds(n, alpha, g, beta)
        lines.append(f"| {n} | " + " | ".join(f"{cycle[name] * 1e6:,.0f} us" for name in names) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys

    with open(sys.argv[1]) as stream:  # a 2-rank bench_negotiation.py result
        model = json.load(stream)["model"]
    alpha, g, beta = model["alpha_s"], model["gap_s"], model["beta_bytes_per_s"]
    print(f"measured: alpha {alpha * 1e6:.2f} us, g {g * 1e6:.2f} us, beta {beta / 1e9:.2f} GB/s")
    print(model_table(alpha, g, beta, "measured here"))
    print()
    print(model_table(max(alpha, 5e-6), g, min(beta, 10e9), "alpha 5 us, 10 GB/s between hosts"))
