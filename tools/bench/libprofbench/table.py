"""Text and Markdown tables and the number formats every benchmark report prints."""

import statistics


def med(xs):
    """Median, NaN for no values."""
    return statistics.median(xs) if xs else float("nan")


def fmt_int(n):
    return f"{int(round(n)):,}"


def render_text(head, rows):
    """Columns padded to their widest cell: the first left-aligned, the others right-aligned,
    under a rule of dashes."""
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]

    def line(r):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render_md(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)
