"""The papers' comparison plots as PNG bytes (matplotlib, Agg; no pyplot state, so safe in any process).

Each function takes the rows one plot needs (from `tables`) and returns `Plot`s; a plot without data is left
out and the caller says why in the report.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

from src.metrics.display import Row, bounds

from ..metrics.chance import option_count_chance
from ..metrics.intervals import wilson_interval
from .load import CONDITION_KEYS
from .tables.common import ONE_VARIANT_SETS, condition_label, has, latest, slug, varying
from .tables.cora import bmca_levels
from .tables.repetition import repetition_groups, repetition_runs
from .tables.revas import option_levels, revas_runs

QUADRANTS = (  # (x, y, text, horizontal alignment, vertical alignment): the repetition paper's section 4.4
    (0.98, 0.98, "USEFUL", "right", "top"),
    (0.02, 0.98, "RELIABLE but inconsistent", "left", "top"),
    (0.98, 0.02, "CONSISTENT but unreliable", "right", "bottom"),
    (0.02, 0.02, "USELESS", "left", "bottom"),
)
SHARE_COLOURS = {"sure_right": "#1a7f37", "unsure_right": "#8fd19e", "unsure_wrong": "#f4a3a3", "sure_wrong": "#b42318"}
INVALID_STYLE = {"color": "#d9d9d9", "hatch": "///", "edgecolor": "#555555"}  # INVALID never looks like wrong
CHANCE_STYLE: dict[str, Any] = {"color": "black", "ls": "--", "lw": 1.0, "alpha": 0.7}  # the chance level on every plot
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINE_STYLES = ("-", "-.", ":", (0, (3, 1, 1, 1, 1, 1)))  # no plain dashes: they mark the chance level


def series_style(i: int, *, line: bool = True) -> dict[str, Any]:
    """Colour, marker and line style of the i-th model of a plot: no two of the first 20 look alike, and lines
    that lie on top of each other stay apart by their markers."""
    style: dict[str, Any] = {"color": f"C{i % 10}", "marker": MARKERS[i % len(MARKERS)]}
    if line:
        style["ls"] = LINE_STYLES[(i + i // len(MARKERS)) % len(LINE_STYLES)]
    return style


def chance_line(ax: Axes, value: float, label: str = "chance") -> bool:
    """A dashed horizontal line at the chance level (and a legend entry); False when the level is unknown."""
    if value is None or value != value:
        return False
    ax.axhline(value, label=f"{label} ({value:.3f})", zorder=1.5, **CHANCE_STYLE)
    return True


def _mean_chance(rows: pd.DataFrame, column: str = "chance") -> float:
    return float(rows[column].mean()) if column in rows.columns and rows[column].notna().any() else float("nan")


CHANCE_CAPTION = (
    "dashed black line: chance, the accuracy of a uniform guesser on these questions (src/metrics/chance.py)"
)
MAX_MARKER_AREA = 600.0  # points^2 of a marker at acc_mean = 1


@dataclass
class Plot:
    title: str
    name: str  # file stem
    png: bytes
    caption: str = ""


def _figure(width: float = 6.4, height: float = 4.8) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def _rows_with_any(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The rows with a value in at least one of `columns` (none when there are no such columns)."""
    if frame.empty or not columns:
        return frame.iloc[0:0]
    return frame[frame[columns].notna().any(axis=1)]


def _series(rows: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Legend label per run: the model, plus the condition keys that vary."""
    if not keys:
        return rows["model"].astype(str)
    return rows.apply(lambda r: f"{r['model']} ({condition_label(r, keys)})", axis=1)


def consistency_plots(runs: pd.DataFrame) -> tuple[list[Plot], list[str]]:
    """Per benchmark: x = S/T, y = RWS, marker area proportional to acc_mean, one path per model across
    temperatures, quadrant lines at 0.5 with the repetition paper's labels."""
    plots: list[Plot] = []
    notes: list[str] = []
    rows_with = repetition_runs(runs)
    if rows_with.empty:
        return plots, ["consistency plot: no run logged `st` (needs repetitions > 1)"]
    for benchmark, label, rows, _, _rule in repetition_groups(rows_with):
        title = f"Consistency plot: {benchmark}" + (f" ({label})" if label else "")
        fig = _figure()
        ax = fig.add_subplot()
        chance_shown = _quadrants(ax, rows)
        undefined, with_bars = [], False
        for i, (model, path) in enumerate(rows.groupby("model", sort=True)):
            path = path.sort_values("temperature")
            undefined += [f"{model} T={t:g}" for t in path.loc[~has(path, "rws"), "temperature"]]
            defined = path[has(path, "rws")]
            if not defined.empty:
                with_bars |= _consistency_path(ax, str(model), defined, series_style(i))
        ax.set(
            xlim=(-0.06, 1.06),
            ylim=(-0.06, 1.06),
            xlabel="S/T (share of questions SURE)",
            ylabel="RWS (right when SURE)",
            title=title,
        )
        if ax.get_legend_handles_labels()[0]:
            legend = ax.legend(
                loc="center left",
                bbox_to_anchor=(1.01, 0.5),
                fontsize=8,
                markerscale=0.4,
                title="model (area ∝ acc mean)",
                title_fontsize=8,
            )
            legend.get_frame().set_linewidth(0.5)
        caption = (
            "path = one model across temperatures; marker area ∝ mean accuracy over the repetitions; dotted: "
            "the quadrant lines at 0.5"
        )
        if chance_shown:
            caption += "; " + CHANCE_CAPTION + ": the RWS of a model that guesses"
        if with_bars:
            caption += "; error bars: the 95% intervals of S/T and RWS the runs logged"
        if undefined:
            caption += f". Not plotted (nothing SURE, RWS undefined): {', '.join(undefined)}"
        plots.append(Plot(title=title, name=slug("consistency", benchmark, label), png=_png(fig), caption=caption))
    return plots, notes


def _quadrants(ax: Axes, rows: pd.DataFrame) -> bool:
    """The quadrant lines at 0.5 with the paper's labels, and the chance line; whether chance was drawn."""
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.axvline(0.5, color="grey", lw=0.8, ls=":")
    chance_shown = chance_line(ax, _mean_chance(rows), "chance: a guesser's RWS")
    for x, y, text, ha, va in QUADRANTS:
        ax.text(x, y, text, transform=ax.transAxes, ha=ha, va=va, fontsize=9, color="dimgrey", weight="bold", zorder=1)
    return chance_shown


def _consistency_path(ax: Axes, model: str, defined: pd.DataFrame, style: dict[str, Any]) -> bool:
    """One model's path across temperatures: line, the intervals each run logged, markers, labels; whether an
    error bar was drawn."""
    colour = style["color"]
    ax.plot(defined["st"], defined["rws"], color=colour, ls=style["ls"], lw=1.2, alpha=0.8, zorder=2)
    with_bars = False
    for _, r in defined.iterrows():  # the intervals each run logged: S/T across, RWS up and down
        x_ci, y_ci = bounds(r, "st"), bounds(r, "rws")
        if x_ci or y_ci:
            ax.errorbar(
                [r["st"]],
                [r["rws"]],
                xerr=_err(r["st"], x_ci),
                yerr=_err(r["rws"], y_ci),
                fmt="none",
                ecolor=colour,
                elinewidth=1.0,
                capsize=3,
                alpha=0.8,
                zorder=2,
            )
            with_bars = True
    ax.scatter(
        defined["st"],
        defined["rws"],
        s=defined["acc_mean"].fillna(0).clip(lower=0) * MAX_MARKER_AREA,
        color=colour,
        marker=style["marker"],
        alpha=0.5,
        edgecolors=colour,
        label=model,
        zorder=3,
        clip_on=False,
    )
    for _, r in defined.iterrows():
        ax.annotate(
            f"T={r['temperature']:g}",
            (r["st"], r["rws"]),
            textcoords="offset points",
            xytext=(6, 6),
            fontsize=8,
            color=colour,
        )
    return with_bars


# The parts of a SURE/UNSURE bar: shares of trials (`src.metrics.repetition.trial_parts`, from each run's records:
# `sure_rule.trial_parts_of`), so that the right parts add up to acc_mean.
TRIAL_BAR_PARTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("right, SURE question", "right_sure", {"color": SHARE_COLOURS["sure_right"]}),
    ("right, UNSURE question", "right_unsure", {"color": SHARE_COLOURS["unsure_right"]}),
    ("wrong, UNSURE question", "wrong_unsure", {"color": SHARE_COLOURS["unsure_wrong"]}),
    ("wrong, SURE question", "wrong_sure", {"color": SHARE_COLOURS["sure_wrong"]}),
    ("INVALID (unparsed)", "invalid", INVALID_STYLE),
)
# Without the records (--no-paired): the same bar from the logged metrics, right and wrong not split by class.
METRIC_BAR_PARTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("right (acc mean)", "right", {"color": SHARE_COLOURS["sure_right"]}),
    ("wrong", "wrong", {"color": SHARE_COLOURS["sure_wrong"]}),
    ("INVALID (unparsed)", "invalid", INVALID_STYLE),
)


def trial_bar(row: Row, parts: Mapping[str, Mapping[str, float]]) -> dict[str, float] | None:
    """The five trial parts of a run's bar where its records gave them (`parts`, by run id), else None."""
    found = parts.get(row["run_id"]) or {}
    if any(found.get(part) is None for _, part, _ in TRIAL_BAR_PARTS):
        return None
    return {part: float(found[part]) for _, part, _ in TRIAL_BAR_PARTS}


def metric_bar(row: Row) -> dict[str, float]:
    """The bar from the logged metrics: right = acc_mean, INVALID = invalid_rate, wrong = the rest (sum 1)."""
    right = float(row.get("acc_mean", float("nan")))
    invalid = row.get("invalid_rate")
    invalid = 0.0 if invalid is None or invalid != invalid else float(invalid)
    return {"right": right, "wrong": max(0.0, 1.0 - right - invalid), "invalid": invalid}


def sure_bars(
    runs: pd.DataFrame, parts: Mapping[str, Mapping[str, float]] | None = None
) -> tuple[list[Plot], list[str]]:
    """Per benchmark: one stacked bar per model x temperature, its trials in parts (`trial_bar`): right on SURE
    and on UNSURE questions (together acc mean), wrong on UNSURE and on SURE questions, INVALID; `metric_bar`
    where a run's records were not read."""
    plots: list[Plot] = []
    rows_with = repetition_runs(runs)
    if "acc_mean" in rows_with.columns:
        rows_with = rows_with[rows_with["acc_mean"].notna()]
    if rows_with.empty:
        return plots, ["SURE/UNSURE bars: no run logged `st` and `acc_mean` (needs repetitions > 1)"]
    for benchmark, label, rows, _, _rule in repetition_groups(rows_with):
        rows = rows.sort_values(["model", "temperature"])
        split = [trial_bar(row, parts or {}) for _, row in rows.iterrows()]
        kind = "trials" if all(p is not None for p in split) else "metrics"
        # bars of both kinds in one plot would not compare: every bar from the metrics when one lacks its records
        bars = [p for p in split if p is not None] if kind == "trials" else [metric_bar(r) for _, r in rows.iterrows()]
        fig = _figure(max(4.8, 0.6 * len(rows) + 2.5), 4.2)
        ax = fig.add_subplot()
        positions = list(range(len(rows)))
        bottom = [0.0] * len(rows)
        for name, part, style in TRIAL_BAR_PARTS if kind == "trials" else METRIC_BAR_PARTS:
            values = [bar[part] for bar in bars]
            ax.bar(positions, values, bottom=bottom, label=name, width=0.6, **style)
            bottom = [b + v for b, v in zip(bottom, values)]
        chance_shown = chance_line(ax, _mean_chance(rows), "chance accuracy")
        ax.set_xticks(
            positions,
            [f"{m}\nT={t:g}" for m, t in zip(rows["model"], rows["temperature"])],
            fontsize=7,
            rotation=30,
            ha="right",
        )
        title = f"Trials right, wrong and INVALID by SURE/UNSURE: {benchmark}" + (f" ({label})" if label else "")
        ax.set(ylim=(0, 1), ylabel="share of trials", title=title)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
        caption = (
            "stacked: shares of trials (question x repetition), each repetition's shares averaged as acc mean is; "
            + (
                "right on SURE + right on UNSURE questions = acc mean; the wrong parts hold valid answers only; "
                "hatched grey: INVALID trials (unparsed, counted wrong in every accuracy); SURE/UNSURE by the "
                "table's rule (its SURE right ... SURE wrong columns are shares of questions)"
                if kind == "trials"
                else "right = acc mean, hatched grey: INVALID (invalid_rate), wrong: the rest (the records were not "
                "read, --no-paired, so the parts are not split by SURE/UNSURE)"
            )
            + ("; " + CHANCE_CAPTION if chance_shown else "")
        )
        plots.append(Plot(title=title, name=slug("sure_unsure", benchmark, label), png=_png(fig), caption=caption))
    return plots, []


def _err(value: float, interval: tuple[float, float] | None) -> list[list[float]]:
    """matplotlib's [[below], [above]] for one point; zero length without an interval."""
    if interval is None:
        return [[0.0], [0.0]]
    return [[max(0.0, value - interval[0])], [max(0.0, interval[1] - value)]]


def bmca_band(row: pd.Series) -> tuple[list[float], list[float], list[float]] | None:
    """(levels, lo, hi): the Wilson 95% band of a run's BMCA(c) curve, or None.

    Each BMCA(c) is the share of the run's questions whose response consistency reaches c, so its interval is the
    Wilson interval of that share over `n_questions`, the one the run logged for BMCA(1.0). The band is drawn only
    when the run logged BMCA(1.0)'s interval and this formula gives back exactly those bounds (the same level and
    questions), so no interval is made for a run that logged none."""
    logged, n = bounds(row, "bmca_1.0"), row.get("n_questions")
    if logged is None or n is None or not n == n or n <= 0 or pd.isna(row.get("bmca_1.0")):
        return None
    check = wilson_interval(round(row["bmca_1.0"] * n), n, 0.95)
    if max(abs(check[0] - logged[0]), abs(check[1] - logged[1])) > 1e-6:
        return None
    levels = [c for c in bmca_levels(row.index) if pd.notna(row.get(c))]
    found = [wilson_interval(round(row[c] * n), n, 0.95) for c in levels]
    return [float(c[5:]) for c in levels], [f[0] for f in found], [f[1] for f in found]


def bmca_curves(runs: pd.DataFrame) -> tuple[list[Plot], list[str]]:
    """Per benchmark: BMCA(c) against the consistency level c, one line per model (and condition), with the
    Wilson band of each curve where the run logged BMCA(1.0)'s interval (`bmca_band`)."""
    plots: list[Plot] = []
    runs = runs[~runs["variants"].isin(ONE_VARIANT_SETS)]  # one variant per question: BMCA(c) = MCQA at every c
    rows_with = _rows_with_any(runs, bmca_levels(runs.columns))
    if rows_with.empty:
        return plots, ["BMCA(c) curves: no run logged bmca_<c> (needs variants=cora or cora_same_size)"]
    for benchmark, rows in rows_with.groupby("benchmark", sort=True):
        keys = varying(rows, CONDITION_KEYS)
        rows = latest(rows, ["model", *keys])
        labels = _series(rows, keys)
        levels = bmca_levels(rows.columns)
        fig = _figure()
        ax = fig.add_subplot()
        banded = 0
        for i, ((_, r), label) in enumerate(sorted(zip(rows.iterrows(), labels), key=lambda item: item[1])):
            xs = [float(c[5:]) for c in levels if pd.notna(r.get(c))]
            ys = [r[c] for c in levels if pd.notna(r.get(c))]
            ax.plot(xs, ys, label=label, ms=4, **series_style(i))
            band = bmca_band(r)
            if band is not None:
                ax.fill_between(band[0], band[1], band[2], color=f"C{i % 10}", alpha=0.15, lw=0)
                banded += 1
        chance_shown = chance_line(ax, _mean_chance(rows, "chance_variants"), "chance accuracy over the variants")
        ax.set(
            xlabel="consistency level c",
            ylabel="BMCA(c): share of questions with RC ≥ c",
            ylim=(-0.02, 1.02),
            title=f"BMCA(c): {benchmark}",
        )
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
        caption = "the higher and flatter, the more of a model's answers survive every variant"
        if chance_shown:
            caption += "; " + CHANCE_CAPTION + ", over every variant (MCQA+'s chance)"
        if banded:
            caption += (
                "; bands: Wilson 95% interval of each BMCA(c) over the run's questions (the interval it "
                "logged for BMCA(1.0))"
            )
        plots.append(
            Plot(title=f"BMCA(c) curves: {benchmark}", name=slug("bmca", benchmark), png=_png(fig), caption=caption)
        )
    return plots, []


def options_plots(runs: pd.DataFrame) -> tuple[list[Plot], list[str]]:
    """Per benchmark: REVAS accuracy (solid) and Acc-H (dashed) against the number of options shown."""
    plots: list[Plot] = []
    notes: list[str] = []
    merged = revas_runs(runs)
    rows_with = _rows_with_any(merged, [f"acc@{n}" for n in option_levels(merged.columns)])
    if rows_with.empty:
        return plots, ["accuracy vs number of options: no acc@n metrics (needs variants=revas_option_count)"]
    for benchmark, rows in rows_with.groupby("benchmark", sort=True):
        keys = varying(rows, [k for k in CONDITION_KEYS if k != "variants"])
        labels = _series(rows, keys)
        fig = _figure()
        ax = fig.add_subplot()
        for i, ((_, r), label) in enumerate(sorted(zip(rows.iterrows(), labels), key=lambda item: item[1])):
            levels = [n for n in option_levels(rows.columns) if pd.notna(r.get(f"acc@{n}"))]
            style = series_style(i, line=False)
            colour = style["color"]
            ax.plot(levels, [r[f"acc@{n}"] for n in levels], ls="-", label=f"{label}: Acc", **style)
            _option_bars(ax, r, "acc", levels, colour)
            hard = [n for n in levels if pd.notna(r.get(f"acc_h@{n}"))]
            if hard:
                ax.plot(
                    hard,
                    [r[f"acc_h@{n}"] for n in hard],
                    ls=":",
                    alpha=0.7,
                    label=f"{label}: Acc-H",
                    mfc="none",
                    **style,
                )
                _option_bars(ax, r, "acc_h", hard, colour)

        shown = option_levels(rows.columns)
        if shown:
            ax.plot(shown, [option_count_chance(n) for n in shown], label="chance (1/n)", **CHANCE_STYLE)
        ax.set(
            xlabel="number of options shown",
            ylabel="accuracy",
            ylim=(-0.02, 1.02),
            title=f"Accuracy vs number of options: {benchmark}",
        )
        from matplotlib.ticker import MaxNLocator  # loaded with the figure (`_figure`), never for no plot

        locator = ax.xaxis.get_major_locator()
        if isinstance(locator, MaxNLocator):  # the default AutoLocator: ticks at whole option counts only
            locator.set_params(integer=True)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
        plots.append(
            Plot(
                title=f"Accuracy vs number of options: {benchmark}",
                name=slug("options", benchmark),
                png=_png(fig),
                caption="Acc on the reference order (solid), Acc-H = right on every order "
                "(dotted, open markers); error bars: the 95% intervals the runs "
                "logged; dashed black line: chance, 1/n with n options",
            )
        )
    return plots, notes


def _option_bars(ax: Axes, row: Row, prefix: str, levels: list[int], colour: str) -> None:
    """Error bars at each option count where the run logged `<prefix>@n`'s interval."""
    for n in levels:
        interval = bounds(row, f"{prefix}@{n}")
        if interval is not None:
            value = row[f"{prefix}@{n}"]
            ax.errorbar(
                [n],
                [value],
                yerr=_err(value, interval),
                fmt="none",
                ecolor=colour,
                elinewidth=1.0,
                capsize=3,
                alpha=0.7,
            )
