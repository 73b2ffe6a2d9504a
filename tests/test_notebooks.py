"""Every notebook in notebooks/ runs clean (nbclient) against synthetic run dirs and writes its outputs.

Needs nbclient, nbformat and ipykernel (requirements.txt); fails without them.
"""
from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat
import pytest

try:
    from tests.helpers.fixtures_runs import budget_grid
except ImportError:
    from fixtures_runs import budget_grid


REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
# what each notebook must leave in ARK_FIGURES_OUT
EXPECTED = {"01_budget_heatmaps": ["fig2_budget_heatmaps.png", "fig2_budget_heatmaps.csv"],
            "02_tool_use": ["fig3_tool_use.png", "fig3_tool_use.pdf"],
            "03_neighbor_calls": ["fig5_neighbor_calls.png", "fig5_neighbor_calls.csv"],
            "04_toolset_ablation": ["table2_ablation.md", "table2_ablation.tex"],
            "05_backbones": ["fig4_backbones.png", "table_backbones.md"],
            "06_attribution": ["fig_attribution.png", "fig_attribution.csv"],
            "07_reachability": ["fig_reachability.png", "fig_reachability.csv"]}


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    budget_grid(root, graphs=("mag",), t_maxes=(5, 10), n_agents=(1, 2), n_queries=4)
    return root


@pytest.fixture(scope="module")
def diagnose_root(tmp_path_factory) -> Path:
    """reach.json folders written by the real reachability pass over the toy graph."""
    from ark.analysis import reachability as R
    from ark.data.stark import Query
    from ark.search.bm25 import BM25Index
    from ark.tools import ToolConfig, ToolSet
    from tests.helpers.toy_graph import toy_graph

    root = tmp_path_factory.mktemp("diagnose")
    graph = toy_graph()
    toolset = ToolSet(graph, BM25Index.build(graph.texts()), ToolConfig(search_k_max=20))
    settings = R.ReachSettings(ks=(1, 3))
    rows, pools = R.reachability(toolset, [Query(1, "hERG", (2, 7, 10, 11)), Query(2, "fibrillin", (3,))], settings)
    R.write(root / "toy" / "test-full", rows, pools, settings, {"graph": "toy", "split": "test", "ablation": "full"})
    return root


def test_every_notebook_is_covered():
    assert {p.stem for p in NOTEBOOKS} == set(EXPECTED)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.commands
def test_notebook_runs_clean(path, runs_root, diagnose_root, tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_RUN_DIRS", str(runs_root))
    monkeypatch.setenv("ARK_DIAGNOSE_DIRS", str(diagnose_root))
    monkeypatch.setenv("ARK_FIGURES_OUT", str(tmp_path / "figs"))
    nb = nbformat.read(path, as_version=4)
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    for name in EXPECTED[path.stem]:
        assert (tmp_path / "figs" / name).stat().st_size > 0, name
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type in ("display_data", "execute_result")]
    wanted = "image/png" if any(n.endswith(".png") for n in EXPECTED[path.stem]) else "text/markdown"
    assert any(wanted in o.get("data", {}) for o in shown), f"the notebook shows its result as {wanted}"
