"""Your own knowledge graph as tables: nodes, edges and (optionally) queries, in Parquet, CSV or JSONL.

A graph folder holds ``nodes.<ext>``, ``edges.<ext>`` and optionally ``queries.<ext>`` and ``graph.json``
(``<ext>``: ``parquet``, ``csv`` or ``jsonl``; the three tables may use different formats):

* ``nodes``: ``id`` (string or integer, unique), ``type``, ``name``, ``text`` (may be empty or null: a
  node with a name only). Further columns are appended to the node's document, one ``- <column>:
  <value>`` line each, in the file's column order, skipping null or empty values. The document (what
  BM25 indexes and observations cut snippets from) is::

      - name: <name>
      - type: <type>
      <text>                 (left out when the text is empty)
      - <column>: <value>

  or, when a ``template`` is set, ``template.format(**row)`` over all columns (e.g. ``"{text}"``).
* ``edges``: ``src``, ``dst``, ``relation`` (node ids as in ``nodes``; stored directed, explored in both
  directions; a header without rows is a graph without edges).
* ``queries``: ``id``, ``query``, ``answers`` (a list of node ids; in CSV a JSON list such as
  ``["P1", "P7"]`` or a Python one as pandas' ``to_csv`` writes it, ``['P1', 'P7']``; one id alone is
  a list of one), optional ``split`` (a name, names separated by commas, or a list; default ``test``).
  A split lists its queries in file order. Every answer must be a candidate (see ``candidate_types``):
  an answer the run never ranks is a build error, not a silent 0.
* ``graph.json`` (optional settings; arguments of `TablesSource` win): ``name``, ``candidate_types``
  (the node types ranked and scored, as STaRK ranks only MAG papers; default all nodes), ``candidates``
  (explicit external ids), ``template``, ``node_types`` and ``relations`` (vocabulary order), and
  ``format`` (``"ark-tables/1"``, written by `export`: the mark of a folder it may replace).

Ids keep their type: integer ids stay integers (in CSV, a column whose values are all integers written
as Python writes them is read as integers, so ``007`` and ``7`` are two string ids), everything else is
a string; one graph uses one kind. Internal node ids are 0..N-1 in the order of ``nodes``; the external
ids are kept in the graph (`KnowledgeGraph.external_id`). A CSV field may be larger than pyarrow's
block (it is read again with larger blocks).

Bad input raises `TablesError`, one line naming the file, the row (1 = first data row), the column and
the value as written: missing columns, a table without nodes, duplicate ids, edges to unknown nodes,
answers that are not nodes or not candidates, answers or splits that are no list or name, mixed id
types, unreadable files. `export` writes any graph (and its queries) in this format.
"""
