"""Integration tier: the local server's RAM prompt cache holds its budget, counted on whole entries (model
state, logits and token ids: `ark.llm.llama_server.counted`), where llama-cpp-python counts the state alone."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ark.llm.client import LLMClient
from ark.llm.llama_server import CACHE_NOTE, counted, entry_bytes
from ark.llm.local_server import LocalServer

pytestmark = pytest.mark.integration
MB = 1 << 20
TOOLS = [{"type": "function", "function": {"name": "search_graph", "description": "Search nodes by words.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}]


def _state(llama_cpp, tokens: list[int]):
    """An entry shaped like a SmolLM2 one, at a small scale: 1 MB of state beside 8 MB of logits."""
    return llama_cpp.LlamaState(input_ids=np.array(tokens, dtype=np.intc), scores=np.zeros((64, 32768), np.single),
                                n_tokens=len(tokens), llama_state=bytes(MB), llama_state_size=MB, seed=0)


def test_the_budget_counts_the_logits_kept_with_each_state():
    import llama_cpp   # the local tier's (make install-local): missing, this fails rather than skips
    library, ours = llama_cpp.LlamaRAMCache(capacity_bytes=20 * MB), counted(llama_cpp.LlamaRAMCache)(20 * MB)
    for i in range(5):
        for cache in (library, ours):
            cache[(1, 2, i)] = _state(llama_cpp, [1, 2, i])
    assert entry_bytes(_state(llama_cpp, [1, 2, 3])) == MB + 64 * 32768 * 4 + 3 * 4
    assert len(library.cache_state) == 5            # 5 MB of state counted; 46 MB held
    assert len(ours.cache_state) == 2 and ours.cache_size <= 20 * MB
    assert list(ours.cache_state) == [(1, 2, 3), (1, 2, 4)]        # the newest kept, as the library evicts
    assert ours[(1, 2, 4, 9)].n_tokens == 3                          # and found by the longest prefix


def test_the_server_runs_the_counted_cache(tmp_path):
    log = tmp_path / "server.log"
    with LocalServer(log_path=str(log)) as server:
        async def ask():
            client = LLMClient(server.backbone())
            try:
                return await client.chat([{"role": "user", "content": "Find nodes about gout."}], TOOLS)
            finally:
                await client.aclose()

        assert asyncio.run(ask()).completion_tokens > 0
    assert CACHE_NOTE in log.read_text(errors="replace")
