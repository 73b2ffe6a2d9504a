"""Build (or reuse) a graph's node-embedding cache, with the same settings a run would use.

    python -m experiments.embed graph=demo encoder=minilm
    python -m experiments.embed graph=demo encoder=minilm encoder.encoder.max_seq_length=128
    python -m experiments.embed graph=prime encoder=openai-3-small          # needs OPENAI_API_KEY

Takes the overrides of experiments/run.py (``graph=...``, ``encoder=...``, ``paths.data=...``) and writes
``<the graph's cache folder>/embeddings/<encoder>/`` (``${paths.index_cache}/...`` when that is set;
`ark.search.embeddings.node_embeddings`), where dense and hybrid runs read it; a run with ``build_embeddings=false`` refuses to start without it.
"""

from __future__ import annotations

import sys

from hydra.utils import instantiate


def command(cfg) -> str:
    """The command line that builds the embedding cache ``cfg`` (a composed run config) reads."""
    choices = cfg.get("hydra", {}).get("runtime", {}).get("choices", {}) if "hydra" in cfg else {}
    graph = choices.get("graph") or cfg.graph.name
    encoder = choices.get("encoder") or cfg.encoder.name
    return f"python -m experiments.embed graph={graph} encoder={encoder}"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return
    from ark.search.embeddings import node_embeddings
    from experiments.run import compose

    cfg = compose(args)
    source = instantiate(cfg.graph)
    encoder = instantiate(cfg.encoder.encoder)
    problems = list(source.problems()) + list(encoder.problems())
    if problems:
        raise SystemExit("cannot encode:\n" + "\n".join(f"  - {p}" for p in problems))
    emb = node_embeddings(source.graph(), encoder, cfg.paths.index_cache or source.cache_dir, build=True)
    print(f"{emb.path}: {emb.vectors.shape[0]:,} x {emb.dim} float32")


if __name__ == "__main__":
    main()
