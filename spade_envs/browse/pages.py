"""The browser's pages: the run overview, the table of every design, a page per design, the training episodes.

Every value read from the run goes through :func:`~spade_envs.browse.html.esc`; the only script is the design
table's filter, which reads ``data-*`` attributes and never writes HTML.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from spade_envs.browse.html import esc, highlight_python, line_chart, page
from spade_envs.browse.load import Run, design_id

__all__ = ["design_page", "designs_page", "episodes_page", "overview_page"]

_ARM_NAMES = {"no_hint": "no hint", "hint": "hint", "placebo": "placebo"}


def _fmt(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals, as text; anything else a hostile record holds in its place as it is."""
    try:
        return "-" if value is None else f"{float(value):.{digits}f}"
    except (TypeError, ValueError, OverflowError):
        return str(value)


def _num(value: Any, digits: int = 3) -> str:
    """:func:`_fmt` as HTML."""
    return esc(_fmt(value, digits))


def _series(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    return [(float(r["spade/step"]), float(r[key])) for r in rows if key in r and "spade/step" in r]


def _family(rows: list[dict[str, Any]], prefix: str) -> dict[str, list[tuple[float, float]]]:
    """Every series named ``prefix<name>``, keyed by name, counted 0 on the steps that logged the family's kin."""
    names = sorted({k[len(prefix) :] for r in rows for k in r if k.startswith(prefix)})
    designed = [r for r in rows if "spade/propose/validity_rate" in r]
    return {n: [(float(r["spade/step"]), float(r.get(prefix + n, 0))) for r in designed] for n in names}


def overview_page(run: Run) -> str:
    """Curves of the run over its steps, and a summary of what the record holds."""
    rows, designs = run.metrics, run.designs
    admitted = sum(d.get("verdict") == "admitted" for d in designs)
    codes = Counter(d.get("code") for d in designs if d.get("verdict") != "admitted")
    last = max((int(r.get("spade/step", -1)) for r in rows), default=-1)
    summary = [
        ("run directory", str(run.root)),
        ("steps logged", f"{len(rows)} (last: {last})"),
        ("designs recorded", f"{len(designs)} ({admitted} admitted, {len(designs) - admitted} rejected)"),
        ("training episodes recorded", str(len(run.episodes))),
        ("record format", (run.header or {}).get("format", "no run record yet")),
        ("page built", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()) + " (rebuild to refresh)"),
    ]
    # fmt: skip
    table = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in summary)
    charts = [
        line_chart("validity rate of designs", {"valid": _series(rows, "spade/propose/validity_rate")}),
        line_chart("regret of admitted designs", {"regret (credited)": _series(rows, "spade/propose/regret_mean")}),
        line_chart(
            "win rates",
            {
                "designs, no hint": _series(rows, "spade/propose/win_rate_mean"),
                "training plays": _series(rows, "spade/solve/win_rate"),
            },
        ),  # fmt: skip
        line_chart("failure codes (designs per step)", _family(rows, "spade/propose/failure/")),
        line_chart("skill mix (admitted per step)", _family(rows, "spade/propose/skill/")),
        line_chart(
            "memory", {"memory size": _series(rows, "spade/memory_size"), "live envs": _series(rows, "spade/live_envs")}
        ),  # fmt: skip
        line_chart(
            "mean reward",
            {
                "designer": _series(rows, "spade/designer/reward_mean"),
                "agent": _series(rows, "spade/agent/reward_mean"),
            },
        ),  # fmt: skip
    ]
    failures = "".join(f"<tr><td>{esc(c)}</td><td>{n}</td></tr>" for c, n in codes.most_common())
    body = (f'<table id="summary">{table}</table><h2>Curves</h2><div class="charts">{"".join(charts)}</div>'
            f'<h2>Rejections by failure code</h2><table><tr><th>code</th><th>designs</th></tr>{failures}</table>'
            f'<p><a href="designs.html">all {len(designs)} designs</a></p>')  # fmt: skip
    return page("SPADE run overview", body)


_FILTER_JS = """
const inputs = Array.from(document.querySelectorAll('.filters [data-key]'));
function apply() {
  let shown = 0;
  for (const row of document.querySelectorAll('#designs tbody tr')) {
    let ok = true;
    for (const el of inputs) {
      const key = el.dataset.key, want = el.value;
      if (!want) continue;
      if (key === 'reward') {
        const x = parseFloat(row.dataset.reward);
        if (isNaN(x) || x < parseFloat(want)) ok = false;
      } else if (row.dataset[key] !== want) ok = false;
    }
    row.hidden = !ok;
    if (ok) shown++;
  }
  document.getElementById('shown').textContent = String(shown);
}
inputs.forEach(el => el.addEventListener('input', apply));
apply();
document.getElementById('designs').dataset.filter = 'on';
"""


def _select(key: str, label: str, values: list[str]) -> str:
    options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
    return f'<label>{esc(label)} <select data-key="{key}"><option value="">all</option>{options}</select></label>'


def designs_page(run: Run) -> str:
    """Every design of the run in one table, filterable by step, skill, verdict, failure code and reward."""
    designs = run.designs
    steps = sorted({str(d["step"]) for d in designs}, key=int)
    filters = (_select("step", "step", steps) + _select("skill", "skill", sorted({str(d["skill"]) for d in designs}))
               + _select("verdict", "verdict", ["admitted", "rejected"])
               + _select("code", "failure code", sorted({str(d.get("code")) for d in designs if d.get("code")}))
               + '<label>reward &ge; <input data-key="reward" type="number" step="any"></label>')  # fmt: skip
    head = ("step", "design", "skill", "verdict", "code", "reward", "advantage", "win rate (no hint)", "regret",
            "hint")  # fmt: skip
    rows = []
    for d in designs:
        reward = d.get("reward")
        values = {"step": d["step"], "skill": d["skill"], "verdict": d.get("verdict"), "code": d.get("code") or "",
                  "reward": "" if reward is None else reward}  # fmt: skip
        attrs = " ".join(f'data-{k}="{esc(v)}"' for k, v in values.items())
        cells = [esc(d["step"]), f'<a href="designs/{design_id(d)}.html">{esc(d["design"])}</a>', esc(d["skill"]),
                 esc(d.get("verdict")), esc(d.get("code") or ""), _num(reward), _num(d.get("advantage")),
                 _num(d.get("win_rate"), 2), _num(d.get("regret"), 2), esc(d.get("hint_failure") or
                 ("ok" if d.get("hint") else "-"))]  # fmt: skip
        klass = ' class="verdict"'
        tds = "".join(f"<td{klass if i == 3 else ''}>{c}</td>" for i, c in enumerate(cells))
        rows.append(f'<tr class="{esc(d.get("verdict"))}" {attrs}>{tds}</tr>')
    body = (f'<div class="filters">{filters}</div><p><span id="shown">{len(designs)}</span> of {len(designs)} '
            f'designs shown</p><table id="designs"><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}</tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table>')  # fmt: skip
    return page("Designs", body, script=_FILTER_JS)


def _reward(turn: dict[str, Any]) -> str:
    return f" (reward {_num(turn['reward'], 2)})" if turn.get("reward") is not None else ""


def _transcript(t: dict[str, Any], title: str) -> str:
    turns = "".join(f'<div class="turn {esc(turn.get("role"))}"><span class="muted">{esc(turn.get("role"))}'
                    f'{_reward(turn)}</span><pre>{esc(turn.get("text"))}</pre></div>'
                    for turn in t.get("turns") or [])  # fmt: skip
    fault = f", fault {esc(t['fault'])}" if t.get("fault") else ""
    rewards = ", ".join(_num(r, 2) for r in t.get("rewards") or [])
    head = (f"<b>{esc(title)}</b> seed {esc(t.get('seed'))}: outcome {_num(t.get('outcome'), 2)}{fault}"
            f"<br><span class=\"muted\">env reward per turn: {rewards or '-'}</span>")  # fmt: skip
    return f'<div class="transcript">{head}{turns}</div>'


def design_page(d: dict[str, Any]) -> str:
    """One design: its verdict and scores, document head, highlighted source, hint, per-seed arms, transcripts."""
    facts = [("step / design", f"{d['step']} / {d['design']}"), ("skill", d.get("skill")),
             ("document", d.get("doc_id")), ("verdict", d.get("verdict")), ("failure code", d.get("code")),
             ("reason", d.get("reason")), ("reward", _fmt(d.get("reward"))), ("advantage", _fmt(d.get("advantage"))),
             ("trained", d.get("trained")), ("win rate (no hint)", _fmt(d.get("win_rate"), 2)),
             ("regret (credited)", _fmt(d.get("regret"), 2)), ("regret (raw)", _fmt(d.get("raw_regret"), 2)),
             ("hint verdict", d.get("hint_failure") or ("ok" if d.get("hint") else "-")),
             ("hint verdict reason", d.get("hint_reason"))]  # fmt: skip
    parts = ["<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts) + "</table>"]
    if d.get("compact"):
        parts.append('<p class="muted">texts not kept: the record was past spade.record.max_mb</p>')
    if d.get("doc_head"):
        parts.append(f"<h2>Document (head)</h2><pre>{esc(d['doc_head'])}</pre>")
    kind = {"admitted": "admitted source", "extracted": "extracted code", "raw": "raw answer (no code block)"}
    if d.get("source") is not None:
        label = kind.get(d.get("source_kind") or "", "source")
        code = d["source"] if d.get("source_kind") == "raw" else None
        shown = esc(code) if code is not None else highlight_python(str(d["source"]))
        parts.append(f'<h2>{esc(label)}</h2><pre id="source" class="python">{shown}</pre>')
    if d.get("hint_text") is not None:
        parts.append(f"<h2>Hint as written</h2><pre>{esc(d['hint_text'])}</pre>")
    if d.get("hint") and d.get("hint") != d.get("hint_text"):
        parts.append(f"<h2>Hint as shown</h2><pre>{esc(d['hint'])}</pre>")
    arms = {k: v for k, v in (d.get("arms") or {}).items() if v}
    if arms and d.get("seeds"):
        head = "".join(f"<th>{esc(_ARM_NAMES.get(a, a))}</th>" for a in arms)
        rows = "".join(f"<tr><td>{esc(s)}</td>" + "".join(f"<td>{_num(v[i], 2) if i < len(v) else '-'}</td>"
                                                           for v in arms.values()) + "</tr>"
                       for i, s in enumerate(d["seeds"]))  # fmt: skip
        parts.append(f'<h2>Outcomes per seed</h2><table id="arms"><tr><th>seed</th>{head}</tr>{rows}</table>')
    transcripts = {k: v for k, v in (d.get("transcripts") or {}).items() if v}
    if transcripts:
        n = max(len(v) for v in transcripts.values())
        grid = f"grid-template-columns:repeat({len(transcripts)},minmax(0,1fr))"
        for i in range(n):
            cells = "".join(_transcript(v[i], _ARM_NAMES.get(a, a)) if i < len(v) else "<div></div>"
                            for a, v in transcripts.items())  # fmt: skip
            parts.append(f'<div class="arms" style="{grid}">{cells}</div>')
        parts.insert(len(parts) - n, "<h2>Transcripts (measurement plays, side by side)</h2>")
    return page(f"Design {design_id(d)} ({d.get('verdict')})", "".join(parts), depth=1)


def episodes_page(run: Run) -> str:
    """The record's sample of training episodes, by step, with the rewards and advantages of each one's group."""
    parts = []
    for e in run.episodes:
        group = ", ".join(f"{_num(g['reward'], 2)} / {_num(g['advantage'], 2)}" for g in e.get("group") or [])
        head = (f"<h2>step {esc(e['step'])}, row {esc(e['slot'])}: {esc(e['env_id'])} ({esc(e.get('skill'))})</h2>"
                f"<p>group reward / advantage: {group or '-'}</p>")  # fmt: skip
        parts.append(head + _transcript(e.get("transcript") or {}, "training play"))
    return page("Training episodes", "".join(parts) or '<p class="muted">none recorded yet</p>')
