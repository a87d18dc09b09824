"""HTML pieces of the run browser: escaping, the page frame, inline SVG line charts and Python highlighting.

Everything an environment, a document or the model wrote is untrusted: it only ever reaches a page through
:func:`esc` (text and attribute values alike). Each page also carries a Content-Security-Policy that lets only the
page's own script (by its hash) run, so markup that slipped through would still not execute.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import keyword
import tokenize
from collections.abc import Sequence

__all__ = ["esc", "highlight_python", "line_chart", "page"]

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 24px 40px;color:#222}
nav{padding:10px 0;border-bottom:1px solid #ccc;margin-bottom:12px} nav a{margin-right:16px}
table{border-collapse:collapse} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} tr.admitted td.verdict{color:#167a2c} tr.rejected td.verdict{color:#b3261e}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow:auto;white-space:pre-wrap;word-break:break-word}
.charts{display:flex;flex-wrap:wrap;gap:16px} .chart{border:1px solid #e3e3e3;padding:6px}
.arms{display:grid;gap:12px} .turn{margin:4px 0;padding:4px 6px;border-left:4px solid #aaa}
.turn.agent{border-color:#1f77b4;background:#f1f6fb} .turn.env{border-color:#2ca02c;background:#f2f9f2}
.turn.prompt{border-color:#999;background:#fafafa} .turn pre{margin:2px 0;background:transparent;border:0;padding:0}
.kw{color:#0033b3;font-weight:600} .str{color:#067d17} .com{color:#8c8c8c;font-style:italic} .num{color:#1750eb}
pre.python{max-height:440px} .turn pre{max-height:260px;overflow:auto}
.muted{color:#777} .filters{margin:8px 0} .filters *{margin-right:8px}
"""


def esc(value: object) -> str:
    """``value`` as HTML text or attribute value: every ``<``, ``>``, ``&`` and quote escaped."""
    return html.escape("" if value is None else str(value), quote=True)


def page(title: str, body: str, script: str = "", depth: int = 0) -> str:
    """A whole self-contained page: style inline, ``script`` allowed by its hash and nothing else."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"
    up = "../" * depth
    nav = (f'<nav><a href="{up}index.html">overview</a><a href="{up}designs.html">designs</a>'
           f'<a href="{up}episodes.html">training episodes</a></nav>')  # fmt: skip
    tail = f"<script>{script}</script>" if script else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
            f"<title>{esc(title)}</title><style>{_STYLE}</style></head>\n"
            f"<body>{nav}<h1>{esc(title)}</h1>\n{body}\n{tail}</body></html>\n")  # fmt: skip


def line_chart(title: str, series: dict[str, Sequence[tuple[float, float]]], width: int = 420,
               height: int = 200) -> str:  # fmt: skip
    """An inline SVG chart of one or more ``(step, value)`` series, with its axis range and a legend."""
    points = [p for values in series.values() for p in values]
    if not points:
        return f'<div class="chart"><b>{esc(title)}</b><p class="muted">nothing recorded yet</p></div>'
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(0.0, min(ys)), max(ys) if max(ys) > min(0.0, min(ys)) else min(0.0, min(ys)) + 1
    left, top, w, h = 44, 8, width - 54, height - 30

    def at(x: float, y: float) -> str:
        return f"{left + (x - x0) / (x1 - x0) * w:.1f},{top + h - (y - y0) / (y1 - y0) * h:.1f}"

    parts = [f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>',
             f'<text x="{left - 4}" y="{top + 10}" font-size="10" text-anchor="end">{y1:.3g}</text>',
             f'<text x="{left - 4}" y="{top + h}" font-size="10" text-anchor="end">{y0:.3g}</text>',
             f'<text x="{left}" y="{height - 6}" font-size="10">step {x0:g}</text>',
             f'<text x="{left + w}" y="{height - 6}" font-size="10" text-anchor="end">{x1:g}</text>']  # fmt: skip
    legend = []
    for i, (name, values) in enumerate(series.items()):
        color = _PALETTE[i % len(_PALETTE)]
        coords = " ".join(at(x, y) for x, y in sorted(values))
        if len(values) > 1:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{coords}"/>')
        parts += [f'<circle cx="{c.split(",")[0]}" cy="{c.split(",")[1]}" r="2.2" fill="{color}"/>'
                  for c in coords.split()]  # fmt: skip
        legend.append(f'<span style="color:{color}">&#9632; {esc(name)}</span>')
    svg = f'<svg width="{width}" height="{height}" role="img" aria-label="{esc(title)}">{"".join(parts)}</svg>'
    return f'<div class="chart"><b>{esc(title)}</b><br>{svg}<br>{" ".join(legend)}</div>'


_CLASSES = {tokenize.STRING: "str", tokenize.COMMENT: "com", tokenize.NUMBER: "num"}


def highlight_python(source: str) -> str:
    """``source`` as escaped HTML with keywords, strings, comments and numbers marked (plain past a tokenizer error)."""
    starts = [0]
    for line in io.StringIO(source).readlines():  # the tokenizer's lines (split at \n only), not str.splitlines
        starts.append(starts[-1] + len(line))
    out, pos = [], 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            kind = "kw" if tok.type == tokenize.NAME and keyword.iskeyword(tok.string) else _CLASSES.get(tok.type)
            if kind is None or tok.start[0] > len(starts) - 1:
                continue
            begin = starts[tok.start[0] - 1] + tok.start[1]
            end = starts[tok.end[0] - 1] + tok.end[1]
            if begin < pos:
                continue
            out.append(esc(source[pos:begin]))
            out.append(f'<span class="{kind}">{esc(source[begin:end])}</span>')
            pos = end
    except (tokenize.TokenError, SyntaxError, IndexError):
        pass  # broken code (common in rejected designs): the rest stays plain text
    out.append(esc(source[pos:]))
    return "".join(out)
