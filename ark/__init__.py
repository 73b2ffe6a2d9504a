"""ARK — Adaptive Retriever of Knowledge.

An LLM agent that retrieves nodes of a text-rich knowledge graph with two tools (global BM25 search and
typed, query-ranked one-hop neighborhood exploration), run as n parallel agents whose selections are fused
by vote count, then earliest position (arXiv:2601.13969).
"""

__version__ = "0.1.0"
