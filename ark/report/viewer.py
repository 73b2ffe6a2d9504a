"""Self-contained HTML trajectory viewer for one run directory (no network, inline JS/CSS).

Left: every query with status, metrics and the failure class of each gold node (filterable, click to
open). Right: the chosen query's gold ids, where each was found or lost (ark.analysis.attribution: first step,
agent, tool and rank; selected position; fused position; class), the fused ranking with gold hits
highlighted, then each agent's steps: tool, arguments, observation (gold ids highlighted where they
appear), node ids shown/selected, LLM and tool latency, tokens, the model's mistakes.

    ark viewer results/runs/<experiment>/<graph>/<run> --out viewer.html

Reads the run directory through ark.run.rundir.RunDir (predictions.jsonl, trajectories/<qid>.json).
Large runs: --limit keeps the first N queries, --max-observation-chars trims each observation.
"""
from __future__ import annotations

import html
import json
from dataclasses import asdict
from pathlib import Path

from ark.analysis import attribution
from ark.run import rundir
from ark.run.summary import attribute_record

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


def _parse_args(raw) -> object:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw                       # the model's malformed JSON is shown as it was sent
    return raw


def _trim(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} more characters]"


def _steps(traj: dict, max_chars: int) -> list[dict]:
    out = []
    for s in traj.get("steps", []):
        calls = s.get("tool_calls") or []
        obs = s.get("observations") or []
        shown = s.get("node_ids") or []
        resp = s.get("response") or {}
        out.append({
            "index": s.get("index"),
            "content": _trim(resp.get("content"), max_chars),
            "calls": [{"name": c.get("name") or c.get("function", {}).get("name"),
                       "arguments": _parse_args(c.get("arguments") or c.get("function", {}).get("arguments")),
                       "observation": _trim(obs[i] if i < len(obs) else "", max_chars),
                       "node_ids": shown[i] if i < len(shown) else []}
                      for i, c in enumerate(calls)],
            "extra_observations": [_trim(o, max_chars) for o in obs[len(calls):]],
            "llm_latency_s": s.get("llm_latency_s"), "tool_latency_s": s.get("tool_latency_s"),
            "prompt_tokens": s.get("prompt_tokens"), "completion_tokens": s.get("completion_tokens"),
            "error": s.get("error")})
    return out


def build_view(run_dir: Path | str, limit: int | None = None, max_observation_chars: int = 4000) -> dict:
    """Everything the page shows, as plain JSON-able data (read through ark.run.rundir.RunDir; each ok
    query also carries its failure attribution, ark.analysis.attribution)."""
    run = rundir.RunDir(run_dir)
    preds = run.records()
    preds = preds[:limit] if limit else preds
    _, tie_break = run.fusion_settings()
    queries = []
    for p in preds:
        trajs = run.trajectories(p)
        counts = rundir.tool_counts(p)
        attr = []
        if rundir.status(p) == "ok":
            qa = attribute_record(p, trajs, tie_break=tie_break)
            attr = [{**asdict(g), "label": attribution.CLASS_LABEL[g.cls]} for g in qa.golds]
        queries.append({
            "query_id": p["query_id"], "query": p.get("query", ""), "status": rundir.status(p),
            "error": p.get("error"), "metrics": {k: rundir.query_metrics(p).get(k) for k in METRICS},
            "latency_s": p.get("latency_s"), "prompt_tokens": p.get("prompt_tokens"),
            "completion_tokens": p.get("completion_tokens"), "cost_usd": p.get("cost_usd"),
            "gold": rundir.gold(p), "ranking": rundir.ranking(p), "attribution": attr,
            "external": _external_ids(p),
            "agents": [{"agent_index": t.get("agent_index", i), "stop_reason": t.get("stop_reason"),
                        "error": t.get("error"), "selected": t.get("selected") or [],
                        "tool_counts": counts[i] if i < len(counts) else {},
                        "steps": _steps(t, max_observation_chars)}
                       for i, t in enumerate(trajs)]})
    return {"run": str(run.path), "config": run.config, "summary": run.metrics, "queries": queries,
            "ids": _id_space(run)}


def _id_space(run: rundir.RunDir) -> str:
    """The ids the run's observations show (ark.tools.ids): "user" (the graph's own, recorded in run.json's
    identity as ablation.tools.user_ids) or "internal"."""
    identity = run.info.get("identity") or {}
    return "user" if identity.get("ablation.tools.user_ids") is True else "internal"


def _external_ids(rec: dict) -> dict[str, str]:
    """Node id -> the graph's own id, for graphs that have them (tables graphs record
    ranking_external/gold_external beside ranking/gold)."""
    pairs = [*zip(rec.get("ranking") or [], rec.get("ranking_external") or []),
             *zip(rec.get("gold") or [], rec.get("gold_external") or [])]
    return {str(int(i)): str(e) for i, e in pairs}


_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:0;display:flex;height:100vh;color:#222}
#list{width:38%;overflow:auto;border-right:1px solid #ccc}#detail{flex:1;overflow:auto;padding:8px 16px}
header{padding:8px;background:#f4f4f4;position:sticky;top:0}header input{width:95%}
table{border-collapse:collapse;width:100%}td,th{padding:3px 6px;border-bottom:1px solid #eee;text-align:left;
vertical-align:top}tr.q{cursor:pointer}tr.q:hover{background:#eef5ff}tr.q.active{background:#d8e8ff}
tr.failed td{color:#a00}.num{text-align:right;font-variant-numeric:tabular-nums}
.node{display:inline-block;padding:0 4px;margin:1px;border-radius:3px;background:#eee;font-family:monospace}
.node.gold{background:#74c69d;font-weight:bold}.agent{border:1px solid #ccc;border-radius:4px;margin:10px 0;padding:6px}
pre{white-space:pre-wrap;margin:0;font-size:12px;max-height:300px;overflow:auto;background:#fafafa}
.err{color:#a00}.tool{font-weight:bold;font-family:monospace}.muted{color:#777}
mark.gold{background:#74c69d;font-weight:bold}.cls{font-size:11px;padding:0 3px;border-radius:3px;margin:1px;
display:inline-block}.cls-retrieved{background:#d8f3dc}.cls-never_surfaced{background:#f8d7da}
.cls-surfaced_not_selected{background:#ffe8a3}.cls-selected_fused_out{background:#e2d4f0}.cls-beyond_top{background:#cfe2ff}
"""

_JS = r"""
const D = JSON.parse(document.getElementById('data').textContent);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) { if (v == null) continue; if (k === 'class') e.className = v; else e.setAttribute(k, v); }
  for (const k of kids.flat()) e.append(k instanceof Node ? k : document.createTextNode(k == null ? '' : String(k)));
  return e;
}
const fmt = v => (v == null ? '–' : (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : String(v)));
let EXT = {};  // node id -> the graph's own id (tables graphs), for the query shown
function nodes(ids, gold) {
  return el('span', {}, (ids || []).map(i => el('span', {class: 'node' + (gold.has(i) ? ' gold' : ''), 'data-node': i,
    title: EXT[i] || ''}, EXT[i] ? i + ' ' + EXT[i] : i)));
}
function marked(text, gold) {
  // the observation as text nodes, with every "[id]" of a gold node wrapped in <mark class="gold">; the ids
  // are the graph's own where the run's observations showed those (D.ids), else the internal ones
  const box = el('pre', {});
  const shown = new Set([...gold].map(g => String(D.ids === 'user' && EXT[g] != null ? EXT[g] : g)));
  const re = /\[([^\]\n]+)\]/g;
  let last = 0, m;
  while ((m = re.exec(text || '')) !== null) {
    if (!shown.has(m[1])) continue;
    box.append(text.slice(last, m.index), el('mark', {class: 'gold', 'data-node': m[1]}, m[0]));
    last = m.index + m[0].length;
  }
  box.append((text || '').slice(last));
  return box;
}
function classes(q) {
  return el('span', {}, (q.attribution || []).map(a => el('span', {class: 'cls cls-' + a.cls, title: a.label}, a.gold + ': ' + a.label)));
}
function attributionTable(q) {
  const t = el('table', {id: 'attribution'}, el('tr', {}, ['gold', 'class', 'first shown (step · agent · tool · rank)',
    'selected (agent · position)', 'fused position'].map(h => el('th', {}, h))));
  for (const a of q.attribution || []) {
    t.append(el('tr', {class: 'gold-row', 'data-gold': a.gold, 'data-cls': a.cls},
      el('td', {}, el('span', {class: 'node gold'}, a.gold)), el('td', {}, el('span', {class: 'cls cls-' + a.cls}, a.label)),
      el('td', {}, a.first_step == null ? '–' : `step ${a.first_step} · agent ${a.first_agent} · ${a.first_tool} · rank ${a.first_rank}`),
      el('td', {}, a.selected ? `agent ${a.selected_agent} · ${a.selected_position}` : '–'),
      el('td', {}, a.fused_position == null ? '–' : String(a.fused_position) + (a.cut_by_truncation ? ' (cut)' : ''))));
  }
  return t;
}
function args(a, gold) {
  if (a == null || typeof a !== 'object') return el('pre', {}, fmt(a));
  const box = el('div', {});
  for (const [k, v] of Object.entries(a)) {
    const isIds = Array.isArray(v) && v.every(x => Number.isInteger(x));
    box.append(el('div', {}, el('span', {class: 'muted'}, k + ': '), isIds ? nodes(v, gold) : JSON.stringify(v)));
  }
  return box;
}
function showQuery(qid) {
  const q = D.queries.find(x => String(x.query_id) === String(qid));
  if (!q) return;
  document.querySelectorAll('tr.q').forEach(r => r.classList.toggle('active', r.dataset.qid === String(qid)));
  const gold = new Set(q.gold);
  EXT = q.external || {};
  const d = document.getElementById('detail');
  d.replaceChildren();
  d.append(el('h2', {}, 'Query ' + q.query_id), el('p', {}, q.query));
  if (q.error) d.append(el('p', {class: 'err'}, 'error: ' + q.error));
  d.append(el('p', {}, METRICS.map(m => m + ' ' + fmt(q.metrics[m])).join(' · '),
    ` · latency ${fmt(q.latency_s)} s · tokens ${fmt(q.prompt_tokens)}+${fmt(q.completion_tokens)} · $${fmt(q.cost_usd)}`));
  d.append(el('div', {}, el('b', {}, 'Gold: '), nodes(q.gold, gold)));
  if ((q.attribution || []).length) d.append(attributionTable(q));
  d.append(el('div', {id: 'ranking'}, el('b', {}, 'Fused ranking: '), nodes(q.ranking, gold)));
  for (const a of q.agents) {
    const box = el('div', {class: 'agent', 'data-agent': a.agent_index},
      el('h3', {}, `Agent ${a.agent_index}`, el('span', {class: 'muted'}, ` stop: ${a.stop_reason} · tools: ${JSON.stringify(a.tool_counts)}`)),
      el('div', {}, el('b', {}, 'Selected: '), nodes(a.selected, gold)));
    if (a.error) box.append(el('p', {class: 'err'}, a.error));
    const t = el('table', {class: 'steps'}, el('tr', {}, ['#', 'tool', 'arguments', 'observation', 'nodes shown',
      'LLM s', 'tool s', 'tokens in/out'].map(h => el('th', {}, h))));
    for (const s of a.steps) {
      const calls = s.calls.length ? s.calls : [{name: '(no tool call)', arguments: null, observation: (s.extra_observations || []).join('\n'), node_ids: []}];
      calls.forEach((c, i) => t.append(el('tr', {class: 'step'},
        el('td', {}, i ? '' : s.index), el('td', {class: 'tool'}, c.name), el('td', {}, args(c.arguments, gold)),
        el('td', {}, el('details', {open: (c.node_ids || []).some(i => gold.has(i)) ? '' : null}, el('summary', {}, (c.observation || '').slice(0, 80)), marked(c.observation, gold))),
        el('td', {}, nodes(c.node_ids, gold)),
        el('td', {class: 'num'}, i ? '' : fmt(s.llm_latency_s)), el('td', {class: 'num'}, i ? '' : fmt(s.tool_latency_s)),
        el('td', {class: 'num'}, i ? '' : `${fmt(s.prompt_tokens)}/${fmt(s.completion_tokens)}`))));
      if (s.content) t.append(el('tr', {}, el('td', {}), el('td', {colspan: 7}, el('pre', {class: 'muted'}, s.content))));
      if (s.error) t.append(el('tr', {}, el('td', {}), el('td', {colspan: 7, class: 'err'}, s.error)));
    }
    box.append(t);
    d.append(box);
  }
  history.replaceState(null, '', '#q=' + q.query_id);
}
const METRICS = ['hit@1', 'hit@5', 'recall@20', 'mrr'];
function renderList(filter) {
  const tb = document.getElementById('rows');
  tb.replaceChildren();
  for (const q of D.queries) {
    if (filter && !(String(q.query_id) + ' ' + q.query).toLowerCase().includes(filter.toLowerCase())) continue;
    const r = el('tr', {class: 'q' + (q.status !== 'ok' ? ' failed' : ''), 'data-qid': String(q.query_id)},
      el('td', {}, q.query_id), el('td', {}, (q.query || '').slice(0, 90)), el('td', {}, q.status),
      METRICS.map(m => el('td', {class: 'num'}, fmt(q.metrics[m]))), el('td', {class: 'num'}, fmt(q.latency_s)),
      el('td', {}, classes(q)));
    r.addEventListener('click', () => showQuery(q.query_id));
    tb.append(r);
  }
}
document.getElementById('filter').addEventListener('input', e => renderList(e.target.value));
renderList('');
const m = location.hash.match(/q=([^&]+)/);
if (m) showQuery(decodeURIComponent(m[1]));
"""


def render_html(view: dict) -> str:
    """The page: data as inline JSON (</ escaped), CSS and JS inline, no external resources."""
    data = json.dumps(view, default=str).replace("</", "<\\/")
    summary = view.get("summary") or {}
    means = " · ".join(f"{k.split('/')[-1]} {v['mean']:.3f}" for k, v in (summary.get("metrics") or {}).items()
                       if isinstance(v, dict) and isinstance(v.get("mean"), (int, float)))
    head = f"{len(view['queries'])} queries" + (f" · {means}" if means else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>ARK trajectories: {html.escape(view['run'])}</title><style>{_CSS}</style></head>
<body><div id="list"><header><b>{html.escape(view['run'])}</b><br><span class="muted">{html.escape(head)}</span><br>
<input id="filter" placeholder="filter by id or text"></header>
<table><thead><tr><th>id</th><th>query</th><th>status</th><th>Hit@1</th><th>Hit@5</th><th>R@20</th><th>MRR</th>
<th>s</th><th>gold: where found or lost</th></tr></thead><tbody id="rows"></tbody></table></div>
<div id="detail"><p class="muted">Click a query to see each agent's steps.</p></div>
<script id="data" type="application/json">{data}</script>
<script>{_JS}</script></body></html>
"""


def write_viewer(run_dir: Path | str, out: Path | str, limit: int | None = None,
                 max_observation_chars: int = 4000) -> Path:
    """Write the page for ``run_dir`` to ``out``; returns its path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(build_view(run_dir, limit, max_observation_chars)), encoding="utf-8")
    return out
