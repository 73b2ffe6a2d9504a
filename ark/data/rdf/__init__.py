"""Your own knowledge graph as RDF (N-Triples, Turtle, RDF/XML, JSON-LD, N3, N-Quads, TriG), read with rdflib.

`RdfSource` turns one RDF file into a `KnowledgeGraph`; the format comes from the suffix (`FORMATS`,
optionally followed by ``.gz``) or the ``format`` setting. N-Triples is streamed line by line; the other
formats are parsed into an rdflib graph first. The mapping:

* **Nodes** are the IRIs that are described or linked to: every IRI subject, and every IRI object of a
  kept relation. The IRI is the node's external id (`KnowledgeGraph.external_id`, what predictions,
  queries and ``ark neighbors`` use). Internal ids are 0..N-1 in the IRIs' sorted order, so every
  serialisation of the same triples gives the same graph. Never nodes: the RDF, RDFS, OWL and XSD
  vocabularies themselves, properties (IRIs used as predicates or typed as properties), other resources
  typed by those vocabularies (ontology headers), anything in an ``ignore`` namespace (SHACL shapes by
  default) and, unless ``classes`` is true, classes.
* **Classes** are the objects of ``rdf:type``, the subjects typed ``rdfs:Class``/``owl:Class``, and the
  IRIs on either side of ``rdfs:subClassOf``/``owl:equivalentClass``/``owl:disjointWith``. With
  ``classes: false`` (default) they give node types only, and an IRI used both as a class and as an
  instance (typed itself by a non-vocabulary class, linked by or linking a relation, or holding a literal
  that is not an annotation such as a label or comment) is an error. With ``classes: true`` they are nodes
  too (type ``Class`` unless typed otherwise), linked to their instances by ``type`` edges and to each
  other by ``subClassOf`` (and the other class axioms); an OWL restriction ``C subClassOf (p some D)``
  becomes the edge ``C -p-> D``.
* **Node type**: the local name of the node's ``rdf:type`` (``names: prefixed`` for prefixed names; two
  IRIs with one local name are told apart by their prefixed names). A node with several types takes the
  first of ``type_priority`` it has, else the most specific (a type that another of its types is a
  subclass of, by the file's ``rdfs:subClassOf``, is dropped), then the first by name; the others are
  listed in its document as ``- other types:``. A node without a type gets ``default_type``
  (``Resource``) and is counted as ``untyped_nodes`` in the build statistics (`RdfSource.build_stats`);
  ``default_type: null`` makes it an error instead.
* **Name**: the first of ``name_properties`` (``rdfs:label``, then ``skos:prefLabel``) that has a value,
  in the preferred language (``languages``, in order; then untagged; then any other language, so a name
  never vanishes); else the IRI's local name (counted as ``nodes_named_by_iri``).
* **Document** (what BM25 indexes; the tables layout)::

      - name: <name>
      - type: <type>
      - <property>: <value>; <value>

  one line per literal property (``text_properties``: exactly these, in this order; default every
  literal property, descriptions first, then by name), values sorted. Literals tagged with a language not
  in ``languages`` are left out (counted as ``literals_other_language``; ``languages: null`` keeps all);
  typed literals (numbers, dates) keep their lexical form. A literal ``urn:ark:document`` (what `export`
  writes) is the document verbatim.
* **Relations**: every triple ``s p o`` between two nodes is an edge ``s -p-> o`` named by ``p``'s local
  name (stored directed, explored both ways).
* **Blank nodes** are never nodes (their labels are not stable between parses, so nothing could refer
  to them): a blank node object is folded into its subject's document as one line
  (``- address: postalCode: 1071 XX, street: Museumstraat 1``; RDF lists as their items; IRIs by
  name; three levels deep). Blank subjects that no node refers to are dropped
  (``blank_nodes_dropped``).

Other settings: ``format`` (instead of the suffix), ``class_type`` (the type of a class node without
one of its own), ``names`` (``local``/``prefixed`` type and relation names), ``ignore`` (namespaces or
properties whose triples are skipped; default SHACL, ``sh:``), ``candidate_types`` (rank only these
types), ``remote_contexts`` (JSON-LD: fetch an ``@context`` given by URL; off, such a context is refused
and a build never opens a URL). Properties in settings are prefixed names (the file's prefixes and `PREFIXES`) or full IRIs.

Queries are optional, in the tables format (`ark.data.tables`: ``id``, ``query``, ``answers`` as IRIs,
``split``), in ``<file stem>.queries.<ext>`` or ``queries.<ext>`` beside the RDF file, or named by
``queries``. Bad input raises `RdfError`, one line naming the file, before anything is written: broken
syntax (with the line as the parser reports it), an IRI used as class and instance, a type-less node
under ``default_type: null``, an empty graph, unknown settings, and hostile input (`ark.data.rdf.read`:
nested XML entities, a remote JSON-LD context); a long literal is read in linear time.

    python experiments/run.py graph=rdf graph.path=my_kg.ttl graph.name=my_kg
    ark build --graph my_kg.ttl [--set classes=true]    # build and print the statistics
"""
