"""Plain-text rendering of an evaluation: one table per data set, then the comparisons."""

from __future__ import annotations

import math
from collections.abc import Sequence

from bnserve.trainer.evaluation.comparison import Comparison
from bnserve.trainer.evaluation.cross_validation import Evaluation


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]


def _number(value: float, digits: int = 4) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def evaluation_rows(evaluations: Sequence[Evaluation], spread: bool) -> list[str]:
    rows = [("algorithm", "accuracy", "0-1 loss", "log-loss", "AUC", "Sum_MI", "fit s", "predict s")]
    for e in evaluations:
        accuracy = _number(e.accuracy) + (f" ± {e.accuracy_std:.4f}" if spread else "")
        rows.append(
            (
                e.label,
                accuracy,
                _number(e.zero_one_loss),
                _number(e.log_loss),
                _number(e.auc),
                _number(e.sum_mi, 3),
                _number(e.fit_seconds, 3),
                _number(e.predict_seconds, 4),
            )
        )
    return _table(rows)


def per_class_rows(e: Evaluation) -> list[str]:
    """The confusion matrix (rows: the true class; columns: the predicted) beside each
    class's precision, recall, F1 and support."""
    figures = e.per_class()
    rows = [("true \\ predicted", *e.classes, "precision", "recall", "F1", "support")]
    for c, counts in zip(e.classes, e.confusion):
        f = figures[c]
        rows.append(
            (c, *map(str, counts), _number(f["precision"]), _number(f["recall"]), _number(f["f1"]), str(f["support"]))
        )
    return [f"  {e.label}:", *_table(rows, indent="    ")]


def render(result: Comparison, headings: dict[str, str], spread: bool = True, per_class: bool = False) -> str:
    """``headings``: data set -> the line that introduces its table; ``per_class``: each
    evaluation's confusion matrix and per-class figures under it."""
    lines: list[str] = []
    datasets = list(dict.fromkeys(e.dataset for e in result.evaluations))
    for d in datasets:
        lines.append(headings.get(d, d))
        lines.extend(evaluation_rows([e for e in result.evaluations if e.dataset == d], spread))
        if per_class:
            for e in result.evaluations:
                if e.dataset == d:
                    lines.extend(per_class_rows(e))
        pairs = result.paired_t.get(d, {})
        if pairs and spread:
            lines.append("  paired t-test on fold accuracies:")
            lines.extend(
                _table(
                    [("A vs B", "t", "p")] + [(pair, f"{t:.2f}", f"{p:.3g}") for pair, (t, p) in pairs.items()],
                    indent="    ",
                )
            )
        lines.append("")
    if len(datasets) > 1 and result.win_draw_loss:
        lines.append(f"W/D/L on zero-one loss over {len(datasets)} data sets (one-tailed binomial sign test):")
        rows = [("A vs B", "W", "D", "L", "p(A better)", "p(B better)")]
        rows += [
            (f"{w.a} vs {w.b}", str(w.wins), str(w.draws), str(w.losses), f"{w.p_a_better:.3g}", f"{w.p_b_better:.3g}")
            for w in result.win_draw_loss
        ]
        lines.extend(_table(rows))
        lines.append("")
    if result.friedman:
        f = result.friedman
        ranks = ", ".join(f"{name} {rank:.2f}" for name, rank in sorted(f.average_ranks.items(), key=lambda kv: kv[1]))
        lines.append(f"Friedman over {f.n_datasets} data sets: average ranks (1 = best) {ranks}")
        lines.append(
            f"  chi2_F = {f.statistic:.3f}, p = {f.p_value:.3g}; Iman-Davenport F = {f.iman_davenport:.3f}, "
            f"p = {f.iman_davenport_p:.3g}"
        )
    return "\n".join(lines).rstrip() + "\n"
