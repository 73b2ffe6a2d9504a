"""Build (or reuse) a graph's node-embedding cache, with the same settings a run would use.

    python -m experiments.embed graph=demo encoder=minilm
    python -m experiments.embed graph=demo encoder=minilm encoder.encoder.max_seq_length=128
    python -m experiments.embed graph=prime encoder=openai-3-small          # needs OPENAI_API_KEY

Takes the overrides of experiments/run.py (``graph=...``, ``encoder=...``, ``paths.data=...``), composes
them (`ark.config.compose.compose`, no Hydra output folder) and writes ``<the graph's cache
folder>/embeddings/<encoder>/`` (``${paths.index_cache}/...`` when that is set; `ark.config.jobs.embed`),
where dense and hybrid runs read it; a run with ``build_embeddings=false`` refuses to start without it.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return
    from ark.config import jobs
    from ark.config.compose import compose

    jobs.embed(compose(args))


if __name__ == "__main__":
    main()
