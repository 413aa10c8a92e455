"""The Markdown report: one table per benchmark, then the targets."""

import summary
from report_negotiation import negotiation_section
from summary import MIB, find_row, setting_label, size_label, variants


def markdown_table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def latency_section(latency):
    rows = latency["rows"]
    names = variants(rows)
    sizes = sorted({row["size_bytes"] for row in rows})
    table = []
    for size in sizes:
        cells = [size_label(size)]
        for name in names:
            row = find_row(rows, name, size_bytes=size)
            cells.append(
                f"{row['median_s'] * 1e6:.1f} / {row['p90_s'] * 1e6:.1f} ({row['best_round_median_s'] * 1e6:.1f})"
            )
        table.append(cells)
    return (
        "### 1. Latency: one float32 allreduce at a time (us, median / p90 of the slowest rank; "
        f"in brackets the median of the quietest round of {latency['reps']} ops)\n\n"
        + markdown_table(["size", *names], table)
    )


def _oversubscribed(ranks, cores):
    return f" (oversubscribed: more ranks than the {cores} cores)" if cores and ranks > cores else ""


def idle_section(runs):
    """The background thread while every rank sleeps, after the latency job's ops
    (at 3 ranks a job of its own that only warms up first)."""
    table = []
    for ranks, run in runs.items():
        idle = run.get("idle")
        if not idle or None in idle["core_fraction"]:
            continue
        table.append(
            [
                ranks,
                f"{idle['seconds']:g}",
                ", ".join(f"{fraction * 100:.2f}%" for fraction in idle["core_fraction"]),
                ", ".join(f"{wakeups:.0f}" for wakeups in idle["wakeups_per_s"]),
            ]
        )
    if not table:
        return None
    return (
        "### 1b. Background thread while idle (`lockstep-bg`, from the kernel's scheduler statistics, "
        "while every rank sleeps after its ops; the 3-rank job oversubscribes a 2-core machine)\n\n"
        + markdown_table(
            ["ranks", "seconds asleep", "share of a core, per rank", "wake-ups per second, per rank"], table
        )
    )


def bandwidth_section(runs, cores):
    """One table per rank count (2, and 3 by default; 3 ranks oversubscribe 2 cores)."""
    parts = [
        "### 2. Bandwidth: busbw in GB/s (algbw x 2(n-1)/n), median op of the slowest rank; "
        "(x MPI_Allreduce in the same run)"
    ]
    for ranks, run in runs.items():
        parts.append(f"{ranks} ranks{_oversubscribed(ranks, cores)}:\n\n" + _bandwidth_table(run["rows"]))
    return "\n\n".join(parts)


def _bandwidth_table(rows):
    names = variants(rows)
    table = []
    for size in sorted({row["size_bytes"] for row in rows}):
        mpi = find_row(rows, summary.MPI_VARIANT, size_bytes=size)
        cells = [size_label(size)]
        for name in names:
            row = find_row(rows, name, size_bytes=size)
            ratio = f" ({row['busbw_GBps'] / mpi['busbw_GBps']:.2f}x)" if mpi and name != mpi["variant"] else ""
            cells.append(f"{row['busbw_GBps']:.2f}{ratio}")
        table.append(cells)
    return markdown_table(["size", *names], table)


def gradient_section(gradient):
    rows = gradient["rows"]
    table = [
        [
            row["variant"],
            f"{row['first_step_s'] * 1e3:.1f}",
            f"{row['median_s'] * 1e3:.1f}",
            f"{row['p90_s'] * 1e3:.1f}",
        ]
        for row in rows
    ]
    title = (
        f"### 3. Gradient step: ResNet-50's {gradient['tensors']} tensors, {gradient['bytes'] / MIB:.1f} MiB "
        f"(ms; steady state over {gradient['steady_steps']} steps, slowest rank)\n\n"
    )
    return title + markdown_table(["strategy", "first step", "steady median", "steady p90"], table)


def training_section(training):
    numbers = summary.training_summary(training)
    table = []
    for name, values in numbers.items():
        in_sync = {True: "yes", False: "no", None: "-"}[values.get("in_sync")]
        table.append(
            [
                name,
                _number(values.get(1), "{:.0f}"),
                _number(values.get(2), "{:.0f}"),
                _number(values.get("efficiency"), "{:.2f}"),
                _number(values.get("efficiency_best"), "{:.2f}"),
                _number(values.get("efficiency_vs_plain"), "{:.2f}"),
                _number(values.get("paired_vs_sync"), "{:.3f}"),
                in_sync,
            ]
        )
    launches = training["launches"]
    detail = (
        f"batch {launches[0]['batch_per_rank']} per rank, {launches[0]['data']} data, "
        f"{len(launches)} launches alternating 1 and 2 ranks, medians of "
        f"{launches[0]['steps_per_block']}-step blocks"
    )
    headers = [
        "variant",
        "1 rank (samples/s)",
        "2 ranks (samples/s)",
        "scaling efficiency",
        "efficiency of the fastest blocks",
        "vs. 1 rank without communication",
        "2 ranks over per-step sync, paired per round (median)",
        "weights identical on both ranks",
    ]
    return f"### 4. Training throughput: Fashion-MNIST convnet ({detail})\n\n" + markdown_table(headers, table)


def memory_section(memory):
    table = []
    for row in memory["rows"]:
        table.append(
            [
                setting_label(row["fusion_threshold_bytes"], "default (128 MiB)"),
                setting_label(row["chunk_bytes"], "default (1 MiB)"),
                f"{row['lockstep_peak_overhead_bytes'] / MIB:.1f}",
                f"{row['mpi_peak_overhead_bytes'] / MIB:.1f}",
                f"{row['mpi_concatenated_peak_overhead_bytes'] / MIB:.1f}",
                f"{row['steady_step_median_s'] * 1e3:.1f}",
            ]
        )
    headers = [
        "fusion threshold",
        "chunk size",
        "lockstep peak RSS overhead (MiB)",
        "raw MPI per tensor (MiB)",
        "raw MPI, one concatenated buffer (MiB)",
        "lockstep step (ms)",
    ]
    return (
        "### 5. Memory: peak RSS above the gradients themselves during ResNet-50's gradient step "
        "(largest rank; lockstep.torch in place)\n\n" + markdown_table(headers, table)
    )


def shm_section(shm):
    rows = shm["rows"]
    table = []
    for ranks in sorted({row["ranks"] for row in rows}):
        for size in sorted({row["size_bytes"] for row in rows}):
            found = {row["variant"]: row for row in rows if row["ranks"] == ranks and row["size_bytes"] == size}
            shared, mpi_path = found[summary.SHM_VARIANT], found[summary.SHM_MPI_PATH]
            table.append(
                [
                    ranks,
                    size_label(size),
                    f"{shared['busbw_GBps']:.2f}",
                    f"{mpi_path['busbw_GBps']:.2f}",
                    f"{shared['busbw_GBps'] / mpi_path['busbw_GBps']:.2f}x",
                    f"{found[summary.MPI_VARIANT]['busbw_GBps']:.2f}",
                ]
            )
    return (
        "### 6. Shared-memory allreduce against lockstep's MPI path (busbw GB/s, in-place float32, "
        "1 MiB chunks, both paths alternating in one job; 3 ranks oversubscribe the 2 cores)\n\n"
        + markdown_table(
            ["ranks", "size", "shared memory", "MPI path", "shared / MPI path", "MPI_Allreduce (mpi4py), one call"],
            table,
        )
    )


def jax_section(jax_result):
    rows = jax_result["allreduce"]
    names = variants(rows)
    table = []
    for size in sorted({row["size_bytes"] for row in rows}):
        found = {row["variant"]: row for row in rows if row["size_bytes"] == size}
        table.append([size_label(size)] + [_jax_cell(found.get(name)) for name in names])
    steps = [[row["variant"], f"{row['seconds'] * 1e3:.2f}"] for row in jax_result["training"]]
    return "\n".join(
        [
            f"### 7. JAX inside `jax.jit` (float32 Sum; median time per call, p90 in brackets / busbw GB/s; "
            f"mpi4jax {jax_result['mpi4jax'] or 'not installed'}; targets at the end)\n",
            markdown_table(["size", *names], table),
            "",
            "Jitted MLP training step (value_and_grad + SGD), gradients averaged over ranks:\n",
            markdown_table(["variant", "ms per step"], steps),
        ]
    )


def _jax_cell(row):
    if row is None:
        return "-"
    p90 = f" ({row['p90_s'] * 1e6:.1f})" if "p90_s" in row else ""
    return f"{row['seconds'] * 1e6:.1f}{p90} us / {row['busbw_GBps']:.2f}"


def tensorflow_section(tensorflow):
    table = [
        [label, f"{row['median_s'] * 1e6:.1f}", f"{row['p90_s'] * 1e6:.1f}"]
        for label, row in tensorflow["results"].items()
    ]
    return (
        "### 10. TensorFlow: lockstep.tensorflow eagerly and inside `tf.function`, with a no-op tf.function, "
        "raw MPI_Allreduce and the torch frontend in the same job (us, slowest rank)\n\n"
        + markdown_table(["variant", "median", "p90"], table)
    )


def autotune_section(autotune):
    launches = autotune["launches"]
    table = []
    for launch in launches:
        row = launch["rows"][0]
        chosen = "-"
        if launch.get("log") and launch["log"]["final"]:
            final = launch["log"]["final"]
            chosen = (
                f"chunk {size_label(int(final['chunk_bytes']))}, fusion "
                f"{size_label(int(final['fusion_threshold_bytes']))}, cycle {final['cycle_time_ms']} ms, "
                f"shm {'on' if final['shm_allreduce'] == '1' else 'off'} "
                f"({launch['log']['windows']} windows)"
            )
        elif launch["mode"] == "autotune":
            chosen = "tuning did not finish"
        table.append([launch["mode"], f"{row['median_s'] * 1e3:.1f}", f"{row['p90_s'] * 1e3:.1f}", chosen])
    medians = summary.autotune_medians(autotune)
    ratio = ""
    if medians:
        ratio = (
            f" Median over launches: default {medians[0] * 1e3:.1f} ms, autotuned "
            f"{medians[1] * 1e3:.1f} ms ({medians[0] / medians[1]:.2f}x)."
        )
    return (
        "### 8. Autotuning: ResNet-50 gradient step after "
        f"{launches[0]['tune_steps']} untimed steps (ms, steady state, slowest rank; launches alternate, "
        "so this compares launches, not variants in one job)."
        + ratio
        + "\n\n"
        + markdown_table(["settings", "median", "p90", "autotune's choice"], table)
    )


def by_ranks_section(by_ranks):
    """One row per rank count: the small-op latency, busbw against MPI at a few sizes,
    and the gradient step against the fastest raw-MPI strategy."""
    table = []
    for count in sorted(by_ranks, key=int):
        runs = by_ranks[count]
        table.append(
            [
                count,
                _latency_cell(runs.get("latency")),
                _bandwidth_cell(runs.get("bandwidth")),
                _gradient_cell(runs.get("gradient_step")),
            ]
        )
    return "### By rank count (same machine, each count its own jobs)\n\n" + markdown_table(
        ["ranks", "4 B allreduce median (us)", "busbw GB/s (x MPI)", "gradient step median (ms)"], table
    )


def _latency_cell(latency):
    if not latency:
        return "-"
    rows = [row for row in latency["rows"] if row["size_bytes"] == 4]
    if not rows:  # an idle-only run
        return "-"
    return ", ".join(f"{row['variant']} {row['median_s'] * 1e6:.1f}" for row in rows)


def _bandwidth_cell(bandwidth):
    if not bandwidth:
        return "-"
    rows = bandwidth["rows"]
    cells = []
    for size in sorted({row["size_bytes"] for row in rows}):
        mpi = find_row(rows, summary.MPI_VARIANT, size_bytes=size)
        for name in (name for name in variants(rows) if name.startswith(summary.LOCKSTEP_PREFIX)):
            row = find_row(rows, name, size_bytes=size)
            if row and mpi:
                cells.append(
                    f"{size_label(size)} {row['busbw_GBps']:.2f} ({row['busbw_GBps'] / mpi['busbw_GBps']:.2f}x)"
                )
            break  # the first lockstep variant only, to keep the cell short
    return "; ".join(cells)


def _gradient_cell(gradient):
    if not gradient:
        return "-"
    rows = gradient["rows"]
    fastest = min((row for row in rows if row["variant"] in summary.MPI_STEP_VARIANTS), key=lambda row: row["median_s"])
    ours = [row for row in rows if row["variant"].startswith(summary.LOCKSTEP_PREFIX)]
    return ", ".join(f"{row['variant']} {row['median_s'] * 1e3:.1f}" for row in ours) + (
        f" vs {fastest['variant']} {fastest['median_s'] * 1e3:.1f}"
    )


def targets_section(results):
    checks = summary.targets(results)
    table = [[check["target"], check["measured"], check["comparator"], _held_label(check["held"])] for check in checks]
    return (
        "### Targets (issue 23; 2 ranks where a row names no count; every comparator measured in the same job)\n\n"
        + markdown_table(["target", "measured", "comparator", "held"], table)
    )


SECTIONS = (
    ("latency", latency_section),
    ("bandwidth", bandwidth_section),
    ("gradient_step", gradient_section),
    ("training", training_section),
    ("memory", memory_section),
    ("shm", shm_section),
    ("jax", jax_section),
    ("autotune", autotune_section),
    ("negotiation", negotiation_section),
    ("tensorflow", tensorflow_section),
)


def _sections(results):
    """(benchmark, Markdown) for every section whose benchmark ran, in report order."""
    cores = results["meta"].get("cores")
    for key, section in SECTIONS:
        if key not in results:
            continue
        if key == "bandwidth":  # every rank count it ran at, not only the main one
            yield key, section(summary.runs_by_ranks(results, key), cores)
        else:
            yield key, section(results[key])
        if key == "latency":
            idle = idle_section(summary.runs_by_ranks(results, key))
            if idle:
                yield "idle", idle


# The committed report's pointer to the plots, which are build output, not committed.
PLOTS_NOTE = (
    "Plots of these tables: `make bench` draws them into `results/<date-time>/plots/` "
    "(git-ignored), and that run's `results.md` shows them."
)


def render(results, plot_links=None):
    """The whole report. `plot_links`: {benchmark: relative PNG path} to embed; None
    (the committed copy, which embeds no build output) says where the plots are drawn."""
    meta = results["meta"]
    header = (
        f"Produced by `{meta['command']}` on {meta['date']} ({meta['machine']}); total {meta['total_s']:.0f} s. "
        f"Load average {meta['load_before']} before, {meta['load_after']} after: other work on the machine "
        "adds noise, which is why every comparator runs interleaved with lockstep in the same job."
    )
    if plot_links is None:
        header += f" {PLOTS_NOTE}"
    parts = ["## Benchmark results\n", header]
    for key, markdown in _sections(results):
        parts.append(markdown)
        if plot_links and key in plot_links:
            parts.append(f"![{key}]({plot_links[key]})")
    # Only when --np asked for other counts: the extra 3-rank runs have sections of their own.
    if "by_ranks" in results and meta.get("rank_counts", [2]) != [2]:
        parts.append(by_ranks_section(results["by_ranks"]))
    parts.append(targets_section(results))
    return "\n\n".join(parts) + "\n"


def _number(value, pattern):
    return "-" if value is None else pattern.format(value)


def _held_label(held):
    if held is None:  # shown for context, not a target
        return "n/a"
    return "yes" if held else "**no**"
