"""A plan for the full reproduction on a SLURM cluster: jobs, LLM calls, tokens, dollars and hours for the
paper's Table 1, Table 2, Figure 2 and Figure 4, computed from what this repo measures.

    python scripts/plan_reproduction.py                   # measure the token profile, print the plan (markdown)
    python scripts/plan_reproduction.py --tpm 2000000 --rpm 10000 --steps 20

What is measured here (on the demo graph, no network): real ARK agents, the paper's system prompt, tool
schemas and observation renderer, answering a scripted server whose policy takes exactly ``--profile-steps``
steps (search the question, explore the top hit's neighbors, alternating, then select and finish). Every
request is counted in approximate tokens (``ark.observation.approx_tokens``, 4 characters a token, the
renderer's own budget unit): the first request (system prompt, tools, question), what each search and
each neighbor call adds to the conversation (its observation and the assistant's tool call), and how
long a node line is when its snippet is full width (on STaRK every document is longer than a snippet).

What is taken from elsewhere, each named in the output: split sizes (the paper's appendix table), each
graph's tool shares (the paper's Section 5.2), prices (``ark.cost.prices``), the runner's overhead over
the rate bound (README, Measured: 1.19x at most), the API rate limits (``--tpm``/``--rpm``: your account's
numbers), steps per trajectory (``--steps``; no run of the paper's configuration is measured here, so the
plan prints the paper-derived typical length and T_max side by side), and the GPU throughput of vLLM
(``--prefill-per-s``, ``--decode-per-s``; not measured here: no GPU).

Cost model per agent of s steps (prompt tokens are billed for the whole conversation at every call):
  input  = sum over t = 0..s-1 of (P0 + t * d),   output = s * a
with P0 the first request, d the mean growth per step (observation + assistant call, mixed by the graph's
tool shares) and a the assistant's tokens per call: the forecast's own token model
(`ark.cost.forecast.TokenModel` with system P0, observation d - a, reply a), priced by its ``query``: at
the standard price (every input token at the full rate) and at the expected price with cached input (the
share of each prompt the provider's prompt cache serves, from the prompt's structure:
`TokenModel.cached_tokens`, at the cached-input rate of `ark.cost.prices`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from ark.home import ark_home  # noqa: E402

# paper, appendix table "Number of queries per dataset split" (test-0.1 is STaRK's 10% subset of test)
SPLITS = {"prime": {"train": 6162, "val": 2240, "test": 2016},
          "mag": {"train": 7993, "val": 2664, "test": 2664},
          "amazon": {"train": 5915, "val": 1547, "test": 1638}}
# paper, Section 5.2: share of neighbor calls among tool calls (AMAZON 87.7% search)
NEIGHBOR_SHARE = {"amazon": 1 - 0.877, "mag": 0.653, "prime": 0.523}
# paper, Section 4.4: 94.4M tokens over the collected teacher trajectories (3 per query, up to 6,000 train queries)
PAPER_DISTILL_TOKENS = 94.4e6
RUNNER_OVERHEAD = 1.19   # README Measured, Runner: wall time over the concurrency bound, worst of seven runs
GRAPHS = ("amazon", "mag", "prime")


@dataclass
class Profile:
    p0: float             # first request (system prompt, tool schemas, question), approx tokens
    search_step: float    # what one search_graph step adds to the conversation
    neighbor_step: float  # what one explore_neighbors step adds (demo neighborhoods)
    neighbor_step_full: float  # the same with every node line at full snippet width (STaRK-shaped)
    assistant: float      # the assistant's tokens per call (its tool call)
    line_full: float      # a node line with a full-width snippet


def _policy(steps: int):
    """Search the question, explore the first shown node not yet explored (k=20), alternate, and select
    what was shown at step ``steps`` - 1, then finish."""
    from tests.helpers.scripted_server import first_user_message, tool_reply

    def respond(request: dict):
        msgs = request["messages"]
        t = sum(m["role"] == "assistant" for m in msgs)
        question = first_user_message(request)
        shown = [int(x) for m in msgs if m["role"] == "tool" for x in re.findall(r"^\[(\d+)\]", m["content"], re.M)]
        explored = {json.loads(tc["function"]["arguments"]).get("node_id") for m in msgs if m["role"] == "assistant"
                    for tc in m.get("tool_calls") or [] if tc["function"]["name"] == "explore_neighbors"}
        if t >= steps - 1:
            return tool_reply(("select", {"node_ids": list(dict.fromkeys(shown))[:20]}), ("finish", {}))
        fresh = [i for i in dict.fromkeys(shown) if i not in explored]
        if t % 2 == 1 and fresh:
            return tool_reply(("explore_neighbors", {"node_id": fresh[0], "query": question, "k": 20}))
        words = question.split()
        return tool_reply(("search_graph", {"query": " ".join(words[t % 3:]) or question, "k": 5}))

    return respond


def measure(n_queries: int = 30, steps: int = 12, data_root: Path | None = None) -> Profile:
    from ark.agent import AgentConfig
    from ark.data.sources import DemoSource
    from ark.run.runner import RunSettings, run_queries
    from ark.llm.client import BackboneConfig
    from ark.observation import approx_tokens
    from ark.tools.toolset import ToolConfig
    from ark.config.retrievers import build_ark
    from tests.helpers.scripted_server import ScriptedServer

    data_root = Path(data_root) if data_root is not None else ark_home()
    source = DemoSource(data_root)
    graph = source.graph()
    queries = source.queries().split("test")[:n_queries]
    tok = lambda obj: approx_tokens(json.dumps(obj, ensure_ascii=False))   # noqa: E731
    with ScriptedServer(responder=_policy(steps)) as server:
        backbone = BackboneConfig(name="scripted", model="scripted", provider="vllm", base_url=server.base_url,
                                  max_retries=0)
        retriever = build_ark(graph, backbone, AgentConfig(t_max=steps, n_agents=1), ToolConfig(),
                              index_cache=str(data_root / "cache" / "demo"))
        with tempfile.TemporaryDirectory() as tmp:
            run_queries(retriever, queries, RunSettings(out_dir=Path(tmp), progress=False, n_boot=10))
        requests = list(server.requests)
    p0, growth = [], {"search_graph": [], "explore_neighbors": []}
    assistant, full_lines, line_cost = [], [], []
    for req in requests:
        msgs = req["messages"]
        n_asst = sum(m["role"] == "assistant" for m in msgs)
        if n_asst == 0:
            p0.append(tok(msgs) + tok(req.get("tools") or []))
            continue
        last = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
        call = msgs[last]
        names = [tc["function"]["name"] for tc in call.get("tool_calls") or []]
        if len(names) == 1 and names[0] in growth:
            growth[names[0]].append(tok(msgs[last:]))
            assistant.append(tok(call))
            if names[0] == "explore_neighbors":
                text = msgs[last + 1]["content"]
                lines = [ln for ln in text.splitlines() if ln.startswith("[")]
                full_lines += [len(ln) for ln in lines if ln.rstrip().endswith("…")]
                line_cost.append((tok(msgs[last:]), len(lines)))
    mean = lambda xs: sum(xs) / len(xs)   # noqa: E731
    line_full = math.ceil(mean(full_lines) / 4) if full_lines else 60
    # a STaRK neighborhood: 20 lines at full width, within the 2,000-token observation budget
    per_line = mean([c / n for c, n in line_cost if n]) if line_cost else line_full
    fixed = mean([c - n * per_line for c, n in line_cost]) if line_cost else 0
    neighbor_full = min(2000, 20 * line_full) + max(0.0, fixed)
    return Profile(p0=mean(p0), search_step=mean(growth["search_graph"]), neighbor_step=mean(growth["explore_neighbors"]),
                   neighbor_step_full=neighbor_full, assistant=mean(assistant), line_full=line_full)


def step_growth(prof: Profile, graph: str) -> float:
    """What one step adds to the conversation on ``graph``: its search and neighbor steps (STaRK-shaped
    observations) mixed by the graph's tool shares."""
    share = NEIGHBOR_SHARE[graph]
    return (1 - share) * prof.search_step + share * prof.neighbor_step_full


def token_model(prof: Profile, graph: str, steps: float):
    """The profile as the forecast's token model (`ark.cost.forecast.TokenModel`), so that the plan and a
    run's forecast price a trajectory the same way: the first request, then each step's growth (its
    observation and the assistant's call)."""
    from ark.cost.forecast import TokenModel

    return TokenModel(system_tokens=prof.p0, question_tokens=0.0, steps=steps,
                      observation_tokens=step_growth(prof, graph) - prof.assistant, reply_tokens=prof.assistant)


def agent_tokens(prof: Profile, graph: str, steps: float) -> tuple[float, float, float]:
    """(billed input, new input, output) approx tokens of one agent of ``steps`` steps on ``graph``
    (STaRK-shaped observations). Billed input counts the conversation at every call
    (`ark.cost.forecast.TokenModel.agent`); new input counts each token once, what a server with prefix
    caching (vLLM's) computes."""
    billed, output = token_model(prof, graph, steps).agent()
    return billed, prof.p0 + step_growth(prof, graph) * (steps - 1), output


def paper_tokens_per_trajectory() -> float:
    """The paper's distillation corpus per trajectory: 94.4M tokens over 3 x min(6,000, train) per graph."""
    return PAPER_DISTILL_TOKENS / sum(3 * min(6000, SPLITS[g]["train"]) for g in GRAPHS)


def typical_steps(prof: Profile) -> float:
    """Steps per trajectory that make the paper's corpus, read as each trajectory's steps without the
    system prompt and tools (P0 alone is about as long as the corpus's mean trajectory), this profile's
    mean step growth long."""
    d = sum((1 - NEIGHBOR_SHARE[g]) * prof.search_step + NEIGHBOR_SHARE[g] * prof.neighbor_step_full for g in GRAPHS) / 3
    return max(1.0, paper_tokens_per_trajectory() / d)


@dataclass
class Block:
    name: str        # what it reproduces
    command: str
    runs: list       # (graph, backbone, t_max, n_agents, queries)


def blocks() -> list[Block]:
    t1 = [(g, b, 20, 3, SPLITS[g]["test"]) for g in GRAPHS for b in ("gpt-4.1", "gpt-4o")]
    t2 = [(g, "gpt-4.1", 20, 3, round(SPLITS[g]["test"] / 10)) for g in GRAPHS for _ in range(4)]
    f2 = [(g, "gpt-4.1", t, n, round(SPLITS[g]["test"] / 10)) for g in GRAPHS for t in (5, 10, 20) for n in (1, 2, 3)]
    f4_collect = [(g, "gpt-4.1", 20, 3, min(6000, SPLITS[g]["train"])) for g in GRAPHS] + \
                 [(g, "gpt-4.1", 20, 3, 300) for g in GRAPHS]
    f4_gpu = [(g, m, 20, 3, SPLITS[g]["test"]) for g in GRAPHS
              for m in ("qwen3-4b", "qwen3-8b", "student-4b-600", "student-4b-6000", "student-8b-600", "student-8b-6000")]
    s = "python experiments/run.py -m hydra/launcher=slurm"
    return [
        Block("Table 1 (ARK rows; BM25 is CPU minutes)", f"{s} experiment=table1", t1),
        Block("Table 2 (4 toolsets, test-0.1)", f"{s} experiment=ablation", t2),
        Block("Figure 2 (T_max x n grid, test-0.1)", f"{s} experiment=budget_heatmap", f2),
        Block("Figure 4: GPT-4.1 row", "(the Table 1 GPT-4.1 runs; nothing new)", []),
        Block("Figure 4: teacher trajectories (3 per query, T=0.7; train 6,000 + val 300)",
              "python experiments/collect.py experiment=collect graph=G  (and split=val collect.n_queries=300)",
              f4_collect),
        Block("Figure 4: Qwen3 base and students (vLLM)", f"{s} experiment=backbones 'backbone=qwen3-4b,qwen3-8b,"
              "student-4b-600,student-4b-6000,student-8b-600,student-8b-6000' hydra.launcher.gpus_per_node=1", f4_gpu),
    ]


def plan(prof: Profile, steps_typical: float, steps_max: float, tpm: float, rpm: float,
         prefill_per_s: float, decode_per_s: float) -> str:
    from ark.cost.prices import PRICES

    out = ["| block | command | SLURM jobs | queries x agents | LLM calls | tokens in / out | cost | "
           "cost, cached input | time |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    totals = [0.0, 0.0, 0.0, 0.0]
    for b in blocks():
        if not b.runs:
            out.append(f"| {b.name} | {b.command} | – | – | – | – | – | – | – |")
            continue
        cells = []
        for steps_of in (lambda t: min(t, steps_typical), lambda t: min(t, steps_max)):
            calls = billed = new = outp = cost = cached = 0.0
            for graph, backbone, t_max, n, q in b.runs:
                s = steps_of(t_max)
                i, fresh, o = agent_tokens(prof, graph, s)
                billed, new, outp, calls = billed + q * n * i, new + q * n * fresh, outp + q * n * o, calls + q * n * s
                price = PRICES.get(backbone)
                if price is not None:   # priced as a run's forecast prices a query of n agents
                    cost += q * token_model(prof, graph, s).query(n, price).usd
                    cached += q * token_model(prof, graph, s).query(n, price, cached=True).usd
            gpu = b.runs[0][1].startswith(("qwen", "student"))
            if gpu:
                time = f"{(new / prefill_per_s + outp / decode_per_s) / 3600:,.0f} GPU-h"
                tokens = f"{new / 1e6:,.0f}M new/{outp / 1e6:,.1f}M"
            else:
                time = f"{RUNNER_OVERHEAD * max(billed / tpm, calls / rpm) / 60:,.1f} h"
                tokens = f"{billed / 1e6:,.0f}M/{outp / 1e6:,.1f}M"
            cells.append((f"{calls / 1e3:,.0f}k", tokens, cost, time, cached))
        (c1, k1, d1, t1, e1), (c2, k2, d2, t2, e2) = cells
        for i, d in enumerate((d1, d2, e1, e2)):
            totals[i] += d
        jobs = len(b.runs) + (3 if b.name.startswith("Table 1") else 0)      # + the three BM25 runs
        agents = sum(r[4] * r[3] for r in b.runs)
        money = f"${d1:,.0f} / ${d2:,.0f}" if d2 else "GPU time"
        discounted = f"${e1:,.0f} / ${e2:,.0f}" if d2 else "GPU time"
        out.append(f"| {b.name} | `{b.command}` | {jobs} | {agents:,} | {c1} / {c2} | {k1} / {k2} | {money} | "
                   f"{discounted} | {t1} / {t2} |")
    out.append("| Figure 4: LoRA training, 3 graphs x {4B, 8B} x {600, 6,000} | `python experiments/distill.py "
               "experiment=distill graph=G distill.size=S distill.n_queries=N` | 12 | – | – | – | GPU time | GPU time | "
               "33 GPU-h (paper: 8B on 6,000 about 5 h, on 600 about 0.5 h on one H100; 4B taken as the same) |")
    head = [
        f"Token profile (demo graph, measured): first request P0 = {prof.p0:.0f} tokens (system prompt, tool schemas, "
        f"question); a search step adds {prof.search_step:.0f}, a neighbor step {prof.neighbor_step:.0f} on the demo and "
        f"{prof.neighbor_step_full:.0f} with 20 full-width node lines ({prof.line_full:.0f} tokens a line, as on STaRK, "
        f"whose documents are all longer than a snippet); the assistant writes {prof.assistant:.0f} tokens a call.",
        f"Steps per agent: typical {steps_typical:.1f} = the paper's {paper_tokens_per_trajectory():,.0f} distillation "
        f"tokens per trajectory read as its steps after P0 (P0 alone is {prof.p0:.0f}) / T_max {steps_max:.0f} "
        "(every agent uses its whole budget: an upper bound).",
        f"API: {tpm:,.0f} tokens/min and {rpm:,.0f} requests/min for the key, the runner at {RUNNER_OVERHEAD}x the rate "
        f"bound. vLLM (assumed, not measured here: no GPU): {prefill_per_s:,.0f} prompt tokens/s with prefix caching "
        f"(only new tokens computed) and {decode_per_s:,.0f} completion tokens/s per GPU.",
        "Each cell: typical / T_max.",
        "",
    ]
    listed = ", ".join(f"{k} ${p.input_per_m:g}/${p.cached_rate:g}/${p.output_per_m:g} per 1M"
                       for k, p in PRICES.items() if k in ("gpt-4.1", "gpt-4o"))
    tail = ["", f"API total: ${totals[0]:,.0f} typical, ${totals[1]:,.0f} if every agent used all its steps, at the "
                f"standard price; with cached input ${totals[2]:,.0f} typical, ${totals[3]:,.0f} at T_max (prices "
                f"input/cached input/output: {listed})."]
    return "\n".join(head + out + tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tpm", type=float, default=2_000_000, help="tokens per minute of the API key (OpenAI tier 4 for gpt-4.1: 2M)")
    p.add_argument("--rpm", type=float, default=10_000, help="requests per minute of the API key")
    p.add_argument("--steps", type=float, default=None, help="steps per agent for the typical column (default: from the paper)")
    p.add_argument("--prefill-per-s", type=float, default=10000.0,
                   help="vLLM prompt tokens per second per GPU (new tokens; prefix caching on), for the Qwen rows (assumed)")
    p.add_argument("--decode-per-s", type=float, default=1500.0,
                   help="vLLM completion tokens per second per GPU, batched (assumed)")
    p.add_argument("--profile-steps", type=int, default=12)
    p.add_argument("--profile-queries", type=int, default=30)
    p.add_argument("--data", type=Path, default=ark_home(), help="data root (default: ARK_HOME, ark/home.py)")
    a = p.parse_args(argv)
    prof = measure(a.profile_queries, a.profile_steps, a.data)
    steps = a.steps if a.steps is not None else typical_steps(prof)
    print(plan(prof, steps, 20, a.tpm, a.rpm, a.prefill_per_s, a.decode_per_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
