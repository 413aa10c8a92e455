"""Derived numbers from the benchmarks' JSON: lookups, training scaling, targets.

`results` is the driver's combined dict: one entry per benchmark as its script
wrote it, except "training" ({"launches": [...]}, one JSON per launch) and
"memory" ({"rows": [...]}, one row per fusion setting).
"""

import numpy as np

MIB = 1 << 20
LOCKSTEP_PREFIX = "lockstep"
MPI_VARIANT = "MPI_Allreduce (mpi4py)"
MPI_STEP_VARIANTS = ("MPI per tensor", "MPI per tensor, nonblocking", "MPI one concatenated buffer")
TRAINING_VARIANT = "lockstep DistributedOptimizer"
NO_COMMUNICATION = "no communication"
SYNC_ONLY = "per-step sync only"
SHM_VARIANT = "lockstep, shared memory"
SHM_MPI_PATH = "lockstep, MPI"
SHM_AUTO_MIN_RANKS = 3  # LOCKSTEP_SHM_ALLREDUCE=auto, the default
# The targets (2 ranks on the 2-core machine).
LATENCY_TARGET_S = 30e-6
BUSBW_TARGET_RATIO = 0.95
LARGE_SIZES = tuple(size * MIB for size in (16, 64, 256))
SCALING_TARGET = 0.95
BACKGROUND_THREAD_TARGET = 0.05  # of one core
MEMORY_CONSTANT_BYTES = 16 * MIB  # "a small constant": allocator slack, MPI's own buffers
DEFAULT_FUSION_THRESHOLD = 128 * MIB


def variants(rows):
    """Variant names in first-seen order."""
    return list(dict.fromkeys(row["variant"] for row in rows))


def find_row(rows, variant, **match):
    for row in rows:
        if row["variant"] == variant and all(row.get(key) == value for key, value in match.items()):
            return row
    return None


def training_summary(training):
    """{variant: {1: samples/s, 2: samples/s, efficiency, efficiency_vs_plain, efficiency_best, in_sync}}
    pooled over all launches at each rank count (median of the timed blocks);
    in_sync: the parameters ended identical on all ranks in every 2-rank launch."""
    pooled, in_sync = {}, {}
    for launch in training["launches"]:
        for row in launch["rows"]:
            per_ranks = pooled.setdefault(row["variant"], {})
            per_ranks.setdefault(launch["ranks"], []).extend(row["throughput_per_block"])
            if launch["ranks"] > 1:
                in_sync[row["variant"]] = in_sync.get(row["variant"], True) and row["parameters_in_sync"]
    summary = {
        name: {ranks: float(np.median(values)) for ranks, values in per_ranks.items()}
        for name, per_ranks in pooled.items()
    }
    for name, per_ranks in pooled.items():
        if 1 in per_ranks and 2 in per_ranks:
            # The fastest blocks are the ones other work on the machine disturbed least.
            summary[name]["efficiency_best"] = max(per_ranks[2]) / (2 * max(per_ranks[1]))
    for name, agreed in in_sync.items():
        summary[name]["in_sync"] = agreed
    plain_one = summary.get(NO_COMMUNICATION, {}).get(1)
    for numbers in summary.values():
        if 1 in numbers and 2 in numbers:
            numbers["efficiency"] = numbers[2] / (2 * numbers[1])
            if plain_one:
                numbers["efficiency_vs_plain"] = numbers[2] / (2 * plain_one)
    return summary


def memory_limit(row):
    threshold = row["fusion_threshold_bytes"]
    threshold = DEFAULT_FUSION_THRESHOLD if threshold is None else threshold
    return threshold + MEMORY_CONSTANT_BYTES


def setting_label(value, default_label="default"):
    if value is None:
        return default_label
    if value == 0:
        return "0"
    return f"{value / MIB:g} MiB"


def targets(results):
    """[{"target", "measured", "held"}] for every target whose benchmark ran."""
    checks = []
    if "latency" in results:
        checks += _latency_targets(results["latency"]["rows"])
    if "bandwidth" in results:
        checks += _bandwidth_targets(results["bandwidth"]["rows"])
    if "gradient_step" in results:
        checks += _gradient_targets(results["gradient_step"]["rows"])
    if "training" in results:
        checks += _training_targets(training_summary(results["training"]))
        checks += _background_thread_targets(results["training"])
    if "memory" in results:
        checks += _memory_targets(results["memory"]["rows"])
    if "shm" in results:
        checks += _shm_targets(results["shm"]["rows"])
    if "autotune" in results:
        checks += _autotune_targets(results["autotune"])
    return checks


def _lockstep_variants(rows):
    return [name for name in variants(rows) if name.startswith(LOCKSTEP_PREFIX)]


def _latency_targets(rows):
    checks = []
    for name in _lockstep_variants(rows):
        row = find_row(rows, name, size_bytes=4)
        checks.append(
            {
                "target": f"4 B allreduce median <= 30 us ({name})",
                "measured": f"{row['median_s'] * 1e6:.1f} us (p90 {row['p90_s'] * 1e6:.1f} us; "
                f"quietest round {row['best_round_median_s'] * 1e6:.1f} us)",
                "held": row["median_s"] <= LATENCY_TARGET_S,
            }
        )
    return checks


def _bandwidth_targets(rows):
    checks = []
    for name in _lockstep_variants(rows):
        ratios = []
        for size in LARGE_SIZES:
            ours, mpi = find_row(rows, name, size_bytes=size), find_row(rows, MPI_VARIANT, size_bytes=size)
            if ours and mpi:
                ratios.append((size, ours["busbw_GBps"] / mpi["busbw_GBps"]))
        checks.append(
            {
                "target": f"busbw >= 0.95x MPI_Allreduce at 16-256 MiB ({name})",
                "measured": ", ".join(f"{size // MIB} MiB {ratio:.2f}x" for size, ratio in ratios),
                "held": all(ratio >= BUSBW_TARGET_RATIO for _, ratio in ratios),
            }
        )
    return checks


def _gradient_targets(rows):
    fastest = min((find_row(rows, name) for name in MPI_STEP_VARIANTS), key=lambda row: row["median_s"])
    checks = []
    for name in _lockstep_variants(rows):
        row = find_row(rows, name)
        # The raw-MPI strategies reduce into buffers they allocated once; a variant
        # that returns fresh output arrays also pays for faulting in 97.5 MiB of new
        # pages every step, so it is shown for context rather than held to the target.
        in_place = "in place" in name
        checks.append(
            {
                "target": f"gradient step steady state <= fastest raw MPI ({name})"
                + ("" if in_place else "; fresh outputs, context only"),
                "measured": f"{row['median_s'] * 1e3:.1f} ms vs {fastest['variant']} "
                f"{fastest['median_s'] * 1e3:.1f} ms",
                "held": row["median_s"] <= fastest["median_s"] if in_place else None,
            }
        )
    return checks


def _training_targets(summary):
    numbers = summary.get(TRAINING_VARIANT, {})
    if "efficiency" not in numbers:
        return []
    ceiling = summary.get(SYNC_ONLY, {}).get("efficiency")
    ceiling_text = f"; per-step sync alone {ceiling:.2f}" if ceiling is not None else ""
    return [
        {
            "target": "training scaling efficiency >= 0.95 (DistributedOptimizer)",
            "measured": f"{numbers['efficiency']:.2f} ({numbers[1]:.0f} -> {numbers[2]:.0f} samples/s; "
            f"fastest blocks {numbers['efficiency_best']:.2f}{ceiling_text})",
            "held": numbers["efficiency"] >= SCALING_TARGET,
        }
    ]


def background_thread_use(training):
    """Medians over the 2-rank launches of the background thread's share of a core and
    its wake-ups per step while the DistributedOptimizer trains; None if not measured."""
    rows = [
        row
        for launch in training["launches"]
        if launch["ranks"] == 2
        for row in launch["rows"]
        if row["variant"] == TRAINING_VARIANT and "background_thread_core_fraction" in row
    ]
    if not rows:
        return None
    return (
        float(np.median([row["background_thread_core_fraction"] for row in rows])),
        float(np.median([row["background_thread_wakeups_per_step"] for row in rows])),
    )


def _background_thread_targets(training):
    use = background_thread_use(training)
    if use is None:
        return []
    fraction, wakeups = use
    return [
        {
            "target": "background thread <= 5% of a core while training (2 ranks)",
            "measured": f"{fraction * 100:.1f}% of a core, {wakeups:.0f} wake-ups per step",
            "held": fraction <= BACKGROUND_THREAD_TARGET,
        }
    ]


def autotune_medians(autotune):
    """(default, autotuned) medians over launches of the steady step, or None."""
    by_mode = {}
    for launch in autotune["launches"]:
        by_mode.setdefault(launch["mode"], []).append(launch["rows"][0]["median_s"])
    if {"default", "autotune"} <= set(by_mode):
        return float(np.median(by_mode["default"])), float(np.median(by_mode["autotune"]))
    return None


def _autotune_targets(autotune):
    medians = autotune_medians(autotune)
    if medians is None:
        return []
    return [
        {
            "target": "autotuned gradient step no slower than default settings",
            "measured": f"{medians[1] * 1e3:.1f} vs {medians[0] * 1e3:.1f} ms",
            "held": medians[1] <= medians[0] * 1.02,
        }
    ]


def _memory_targets(rows):
    checks = []
    for row in rows:
        overhead = row["lockstep_peak_overhead_bytes"]
        label = f"threshold {setting_label(row['fusion_threshold_bytes'])}, chunk {setting_label(row['chunk_bytes'])}"
        # Chunking off (chunk 0) is the opt-out that shows why chunking is the default:
        # the whole gradient set fuses into one buffer, and MPI adds a temporary half its
        # size (as in the raw-MPI concatenated column): 97.5 + 48.7 MiB.
        chunking_off = row["chunk_bytes"] == 0
        checks.append(
            {
                "target": f"peak RSS overhead <= fusion threshold + 16 MiB ({label})"
                + ("; chunking switched off, context only" if chunking_off else ""),
                "measured": f"{overhead / MIB:.1f} MiB (limit {memory_limit(row) / MIB:.0f} MiB)",
                "held": None if chunking_off else overhead <= memory_limit(row),
            }
        )
    return checks


def _shm_targets(rows):
    """From 3 ranks, where auto uses it, shared memory must beat the MPI path; at 2
    ranks, where it measured anywhere from 0.8x to 1.25x across runs, auto keeps MPI
    and the ratio is shown for context."""
    checks = []
    for ranks in sorted({row["ranks"] for row in rows}):
        ratios = []
        for size in sorted({row["size_bytes"] for row in rows}):
            found = {row["variant"]: row for row in rows if row["ranks"] == ranks and row["size_bytes"] == size}
            ratios.append(found[SHM_VARIANT]["busbw_GBps"] / found[SHM_MPI_PATH]["busbw_GBps"])
        median = float(np.median(ratios))
        uses_shm = ranks >= SHM_AUTO_MIN_RANKS
        checks.append(
            {
                "target": f"shared-memory allreduce >= lockstep's MPI path at {ranks} ranks"
                + ("" if uses_shm else "; auto keeps MPI here, context only"),
                "measured": f"shared memory / MPI path {median:.2f}x (median over sizes; "
                + ", ".join(f"{r:.2f}" for r in ratios)
                + ")",
                "held": median >= 1.0 if uses_shm else None,
            }
        )
    return checks
