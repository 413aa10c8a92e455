"""PNG plots of the benchmark results (matplotlib, no display needed)."""

import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import summary  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402
from report import size_label  # noqa: E402
from summary import MIB, find_row, setting_label, variants  # noqa: E402

STYLE = {"figure.figsize": (7.5, 4.5), "axes.grid": True, "grid.alpha": 0.3, "font.size": 10}


def _size_axis(axis, sizes):
    axis.set_xscale("log", base=2)
    axis.set_xticks(sizes)
    axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: size_label(int(value))))
    axis.minorticks_off()


def plot_latency(latency, path):
    rows = latency["rows"]
    sizes = sorted({row["size_bytes"] for row in rows})
    figure, axis = plt.subplots()
    for name in variants(rows):
        found = [find_row(rows, name, size_bytes=size) for size in sizes]
        (line,) = axis.plot(sizes, [row["median_s"] * 1e6 for row in found], marker="o", label=f"{name} (median)")
        axis.plot(sizes, [row["p90_s"] * 1e6 for row in found], linestyle=":", color=line.get_color())
        if all("best_round_median_s" in row for row in found):
            axis.plot(
                sizes,
                [row["best_round_median_s"] * 1e6 for row in found],
                linestyle="--",
                marker="x",
                color=line.get_color(),
                alpha=0.7,
            )
    mpi = find_row(rows, summary.MPI_VARIANT, size_bytes=summary.LATENCY_SIZE)
    if mpi:  # the 4 B target: 3x raw MPI's median in the same run
        limit_us = summary.LATENCY_MEDIAN_RATIO * mpi["median_s"] * 1e6
        axis.axhline(limit_us, color="grey", linestyle="-.", linewidth=1, label=f"4 B target {limit_us:.1f} us")
    _size_axis(axis, sizes)
    axis.set_yscale("log")
    axis.set_xlabel("message size (float32)")
    axis.set_ylabel("time per allreduce (us, slowest rank)")
    axis.set_title("Latency, 2 ranks (solid: median, dotted: p90, dashed: quietest round's median)", fontsize=9)
    axis.legend(fontsize=8)
    _save(figure, path)


def plot_bandwidth(bandwidth, path):
    rows = bandwidth["rows"]
    sizes = sorted({row["size_bytes"] for row in rows})
    figure, axis = plt.subplots()
    for name in variants(rows):
        found = [find_row(rows, name, size_bytes=size) for size in sizes]
        axis.plot(sizes, [row["busbw_GBps"] for row in found], marker="o", label=name)
    _size_axis(axis, sizes)
    axis.set_ylim(bottom=0)
    axis.set_xlabel("message size (float32)")
    axis.set_ylabel("bus bandwidth (GB/s)")
    axis.set_title("Allreduce bandwidth, 2 ranks (median op)")
    axis.legend(fontsize=8)
    _save(figure, path)


def plot_gradient_step(gradient, path):
    rows = gradient["rows"]
    names = [row["variant"] for row in rows]
    positions = range(len(rows))
    figure, axis = plt.subplots()
    medians = [row["median_s"] * 1e3 for row in rows]
    spread = [row["p90_s"] * 1e3 - row["median_s"] * 1e3 for row in rows]
    axis.barh(positions, medians, xerr=[[0] * len(rows), spread], color="tab:blue", label="steady median (to p90)")
    axis.scatter([row["first_step_s"] * 1e3 for row in rows], positions, color="tab:red", zorder=3, label="first step")
    axis.set_yticks(list(positions), names)
    axis.invert_yaxis()
    axis.set_xlabel("time per step (ms, slowest rank)")
    axis.set_title(f"ResNet-50 gradient step: {gradient['tensors']} tensors, {gradient['bytes'] / MIB:.1f} MiB")
    axis.legend(fontsize=8)
    _save(figure, path)


def plot_training(training, path):
    numbers = summary.training_summary(training)
    names = list(numbers)
    width = 0.38
    figure, axis = plt.subplots()
    for offset, ranks in ((-width / 2, 1), (width / 2, 2)):
        values = [numbers[name].get(ranks, 0) for name in names]
        axis.bar([i + offset for i in range(len(names))], values, width, label=f"{ranks} rank{'s' * (ranks > 1)}")
    for index, name in enumerate(names):
        efficiency = numbers[name].get("efficiency")
        if efficiency is not None:
            top = max(numbers[name].get(1, 0), numbers[name].get(2, 0))
            axis.annotate(f"eff. {efficiency:.2f}", (index, top), ha="center", va="bottom", fontsize=9)
    axis.set_xticks(range(len(names)), [textwrap.fill(name, 16, break_long_words=False) for name in names], fontsize=9)
    axis.set_ylabel("throughput (samples/s, all ranks)")
    axis.set_title("Fashion-MNIST convnet, batch 64 per rank, 1 torch thread per rank")
    axis.margins(y=0.15)
    axis.legend(fontsize=8, loc="lower right")
    _save(figure, path)


def plot_memory(memory, path):
    rows = memory["rows"]
    labels = [
        f"{setting_label(row['fusion_threshold_bytes'], '128 MiB')}\nchunk {setting_label(row['chunk_bytes'], '1 MiB')}"
        for row in rows
    ]
    positions = list(range(len(rows)))
    figure, axis = plt.subplots()
    axis.plot(
        positions,
        [row["lockstep_peak_overhead_bytes"] / MIB for row in rows],
        marker="o",
        label="lockstep peak RSS overhead",
    )
    axis.plot(
        positions,
        [row["mpi_peak_overhead_bytes"] / MIB for row in rows],
        marker="s",
        label="raw MPI, one call per tensor",
    )
    axis.plot(
        positions,
        [row["mpi_concatenated_peak_overhead_bytes"] / MIB for row in rows],
        marker="D",
        label="raw MPI, one concatenated buffer",
    )
    axis.plot(
        positions,
        [summary.memory_limit(row) / MIB for row in rows],
        linestyle="--",
        color="grey",
        label="fusion threshold + 16 MiB",
    )
    axis.set_yscale("symlog", linthresh=1)
    axis.set_xticks(positions, labels, fontsize=8)
    axis.set_xlabel("fusion threshold (LOCKSTEP_FUSION_THRESHOLD)")
    axis.set_ylabel("MiB above the gradients")
    axis.set_title("Memory during ResNet-50's gradient step, per rank")
    times = axis.twinx()
    times.plot(
        positions,
        [row["steady_step_median_s"] * 1e3 for row in rows],
        color="tab:green",
        marker="^",
        linestyle=":",
        label="step time",
    )
    times.set_ylabel("lockstep step time (ms)", color="tab:green")
    times.set_ylim(bottom=0)
    times.grid(False)
    handles = axis.get_legend_handles_labels()[0] + times.get_legend_handles_labels()[0]
    axis.legend(handles, [h.get_label() for h in handles], fontsize=8, loc="upper left")
    _save(figure, path)


def plot_jax(jax_result, path):
    """Allreduce busbw inside jax.jit against mpi4jax and raw MPI, and the jitted
    training step's time per variant."""
    rows = jax_result["allreduce"]
    sizes = sorted({row["size_bytes"] for row in rows if row["size_bytes"] >= 1024})
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for name in variants(rows):
        found = [find_row(rows, name, size_bytes=size) for size in sizes]
        if None in found:  # the jitted no-op runs at 4 B only
            continue
        left.plot(sizes, [row["busbw_GBps"] for row in found], marker="o", label=name)
    _size_axis(left, sizes)
    left.set_ylim(bottom=0)
    left.set_xlabel("message size (float32)")
    left.set_ylabel("bus bandwidth (GB/s)")
    left.set_title(f"Allreduce inside jax.jit, {jax_result['ranks']} ranks")
    left.legend(fontsize=8)
    steps = jax_result["training"]
    right.barh([row["variant"] for row in steps], [row["seconds"] * 1e3 for row in steps])
    right.invert_yaxis()
    right.set_xlabel("ms per jitted step")
    right.set_title("MLP training step, gradients averaged")
    _save(figure, path)


PLOTTERS = {
    "latency": plot_latency,
    "bandwidth": plot_bandwidth,
    "gradient_step": plot_gradient_step,
    "training": plot_training,
    "memory": plot_memory,
    "jax": plot_jax,
}


def write_plots(results, directory):
    """One PNG per benchmark present in `results`; returns {benchmark: file name}."""
    os.makedirs(directory, exist_ok=True)
    written = {}
    with plt.rc_context(STYLE):
        for key, plotter in PLOTTERS.items():
            if key in results:
                name = f"{key}.png"
                plotter(results[key], os.path.join(directory, name))
                written[key] = name
    return written


def _save(figure, path):
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
