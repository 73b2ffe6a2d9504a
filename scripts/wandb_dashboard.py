"""Build a saved W&B workspace that compares ARK runs side by side (for users who are online).

    pip install -e ".[wandb]"                 # wandb-workspaces (make install: requirements.txt has it)
    wandb login
    python scripts/wandb_dashboard.py --entity ME --project ark --experiment table1
    python scripts/wandb_dashboard.py ... --dry-run   # print the view, save nothing

The view filters to one experiment (the runs' W&B group, set by logger=wandb), groups runs by
graph, and has one section per concern: final metrics (bar charts of <split>/hit@1, hit@5,
recall@20, mrr), tool use (search vs. neighborhood shares), failure attribution (ark.analysis.attribution's
classes), cost and latency (each run's spend against its <split>/hit@1 in a scatter plot, so a sweep's
cheaper-and-better runs stand out; US$ per run beside its forecast and cap, tokens per run), and a run
comparer of the configs. Runs
are tagged graph:/backbone:/budget:/ablation: by ark.run.logger, so the runs table can be filtered
further in the UI. Runs logged online (ark.run.logger: a key from `wandb login` is enough) are the
ones this view shows; offline ones appear after `wandb sync <dir>`.

tests/test_wandb_dashboard.py checks, offline, that every panel plots a key a real run logs (runner +
ark.run.logger into an offline W&B run) and that the view selects runs the way the logger groups them;
saving the view needs W&B's servers and is the one step only a user online can run.
"""

from __future__ import annotations

import argparse
import sys

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")
# pyproject.toml's `wandb` extra (and `dev`) and requirements.txt pin the same
REQUIREMENT = "wandb-workspaces==0.4.13"
INSTALL = (f"pip install -e '.[wandb]' in the checkout (make install has it already, from requirements.txt), "
           f"or pip install {REQUIREMENT}")


def tool_share_metrics() -> list[str]:
    """The logged tool-share keys (ark.run.logger: tool_share/<tool>) that every run logs: one per graph
    tool of the default toolset (an opt-in tool such as find_paths is logged only by the runs that call it)."""
    from ark.tools import default_graph_tool_names

    return [f"tool_share/{name}" for name in default_graph_tool_names()]


def cost_vs_quality(split: str = "test", metric: str = "hit@1"):
    """A scatter plot of every run of the view: what it spent (US$, ark.run.logger's ``cost_usd``)
    against ``<split>/<metric>``, the cheaper-and-better runs up and to the left."""
    import wandb_workspaces.reports.v2 as wr

    return wr.ScatterPlot(title=f"cost (US$) vs {split}/{metric}", x="cost_usd", y=f"{split}/{metric}")


def build_workspace(entity: str, project: str, experiment: str, split: str = "test"):
    """The wandb-workspaces Workspace object (not saved)."""
    try:
        import wandb_workspaces.reports.v2 as wr
        import wandb_workspaces.workspaces as ws
    except ImportError as e:
        raise SystemExit(f"this script needs wandb-workspaces: {INSTALL}") from e

    from ark.run.logger import COST_KEYS

    metric_panels = [wr.BarPlot(title=f"{split}/{m}", metrics=[f"{split}/{m}"], orientation="h") for m in METRICS]
    tool_panels = [wr.BarPlot(title="tool-call share", metrics=tool_share_metrics()),
                   wr.ScalarChart(title="complete", metric="complete")]
    cost_panels = [cost_vs_quality(split),
                   wr.BarPlot(title="cost, forecast and cap (US$)", metrics=["cost_usd", *COST_KEYS]),
                   wr.BarPlot(title="tokens", metrics=["tokens/prompt", "tokens/completion"]),
                   wr.BarPlot(title="latency (s, slowest agent)", metrics=["latency_s/mean", "latency_s/p90"])]
    from ark.analysis.attribution import CLASSES

    attribution_panels = [wr.BarPlot(title="where gold nodes were found or lost (share of gold)",
                                     metrics=[f"attribution/{c}" for c in CLASSES]),
                          wr.BarPlot(title="steps to the first gold", metrics=["attribution/steps_to_first_gold_mean"])]
    running = [wr.LinePlot(title=f"running {m}", y=[f"{split}/running/{m}"]) for m in ("hit@1", "mrr")]
    return ws.Workspace(
        entity=entity, project=project, name=f"ARK {experiment}: side by side",
        sections=[
            ws.Section(name="Final metrics", panels=metric_panels, is_open=True),
            ws.Section(name="Tool use", panels=tool_panels, is_open=True),
            ws.Section(name="Failure attribution", panels=attribution_panels, is_open=True),
            ws.Section(name="Cost and latency", panels=cost_panels, is_open=True),
            ws.Section(name="While running", panels=running, is_open=False),
            ws.Section(name="Configs", panels=[wr.RunComparer(diff_only="split")], is_open=False),
        ],
        runset_settings=ws.RunsetSettings(
            filters=[ws.Metric("Group") == experiment],
            groupby=[ws.Config("graph.name")],
        ),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entity", required=True)
    p.add_argument("--project", default="ark")
    p.add_argument("--experiment", default="table1", help="the W&B group (experiment_name)")
    p.add_argument("--split", default="test")
    p.add_argument("--dry-run", action="store_true", help="print the workspace instead of saving it")
    a = p.parse_args(argv)
    workspace = build_workspace(a.entity, a.project, a.experiment, a.split)
    if a.dry_run:
        print(workspace)
        return 0
    saved = workspace.save()
    print(f"saved workspace view: {saved.url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
