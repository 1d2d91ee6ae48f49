"""The publish pipeline on Spark: ``cocktail publish --engine spark [--master URL]``.

It makes the same publication as the single-machine engine (:func:`cocktail.publish.publish`)
from the same input: the same overlay tree, clusters, chunk term sets and subrecord multisets;
only the random chunk ids and pseudonyms differ.  The pure pieces are shared, not copied: the
tree's split statistics (:mod:`cocktail.overlay.tree`), the partitioners, the chunk codecs and
the chunk builder.  What differs is where they run:

* a local FIMI file is read in byte ranges, a task each, by the loader's own reader (a
  range's lines numbered from its first, the lines before it added once every range is
  counted); any other input (``hdfs://``, the other formats) is read by Spark's text reader
  and parsed by the same parsers, a FIMI partition of ASCII lines at once by the loader's
  block reader and anything else line by line; so bad lines get the loader's messages and
  numbers; a table (a Parquet file or URL, a DataFrame) is read at the driver by the loader's
  own code and handed to the executors in blocks;
* the tree grows level by level: per node, term supports and then split statistics are summed
  over the records' partitions; only those sums and each node's choice reach the driver;
* each leaf cluster is partitioned inside an executor; the private parts pooled up the tree
  (paper 5.2) are re-partitioned level by level, deepest first, in a second round;
* chunk, index and pseudonym-map files are written by the executors straight into the store's
  staging area, after a shuffle that sends every file to a random task and writes each task's
  files in a random order (no file order groups a cluster's chunks); the manifests, the release
  entry and the commit point stay at the driver, so the atomic version switch and the audit are
  the single-machine engine's;
* each task merges its units' term indexes into one piece, and the driver merges the pieces,
  one at a time, into the version's term index (it holds the index, a few bytes a record, and
  one piece), which the version writer cuts into parts (:mod:`cocktail.query.termindex`).

Chunk ids are drawn from a keyed hash of a fresh per-publish secret, the unit and the chunk's
rank, so that a task Spark re-runs writes the same files under the same names.

The driver holds the tree, the per-cluster summaries and the manifests; what grows with the
records there is the release log's member names (8 bytes a record, kept as arrays) and, for
the aggregation round, the pools pickled (the private parts passed up: a small share of the
subrecords), which it hands on to the one task that pools them without reading them.

Appends (``cocktail publish --append --engine spark``, :func:`append_spark`) make the same
release as the single-machine append from the same batch and store.  Spark reads the batch (the
same parsers and messages) and the driver collects it: a batch fits one machine.  The driver
then runs the append itself (:func:`cocktail.publish.append.append`): routing the new records
into old clusters under the residual rule, the buffer, the promotion, the manifests, the release
log and the commit; all of it in proportion to the batch and the clusters it touches.  The
clusters the append's pool forms are :class:`SparkClusters`'s, through the same pipeline as a
first publish (:meth:`.run._Run.lay_out`: the tree level by level, leaves partitioned in executors,
the aggregation round, files written by executors into the staging area in a random order),
with three differences, as on the single machine: the records are the pool's (numbered from 0
in pool order; positions, unit and node ids placed in the publication by the append's
:class:`~cocktail.publish.writer.Placement`), the terms the promotion holds back are kept
private in the leaf clusters, and the root does not partition its pool but hands it back to
the promotion.  The driver holds the pool's records (the batch and the buffer) besides what the append holds.

The package follows the engine's phases, as the single-machine engine keeps them apart:

* :mod:`.context`: the Spark context and its settings (the single machine has none);
* :mod:`.reading`: the input, read into :mod:`.blocks` of records (:mod:`cocktail.dataset`);
* :mod:`.tree`: the overlay tree grown level by level (:mod:`cocktail.overlay.tree`);
* :mod:`.layout`: the leaf clusters and the aggregation round (:mod:`cocktail.overlay.layout`);
* :mod:`.writer`: a unit's files and their write job (:mod:`cocktail.publish.writer`);
* :mod:`.run`: the driver that runs them inside a release (:mod:`cocktail.publish`).
"""

from ...extras import require

require("pyspark")  # this package loads only with --engine spark: a missing extra is one line

from .context import SparkSettings, spark_context  # noqa: E402
from .run import SparkClusters, append_spark, publish_spark  # noqa: E402

__all__ = ["SparkClusters", "SparkSettings", "append_spark", "publish_spark", "spark_context"]
