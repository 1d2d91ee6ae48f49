"""The version-diff attacker on erasures (docs/releases.md, "Taking it back").

The public cloud keeps every version it held.  It compares each pair of consecutive versions
chunk by chunk: a chunk present in both whose multiset of subrecords changed shows what left
it (an erasure) or what joined it (an append's residual).  Pseudonyms and line order are ignored (they may be redrawn); only
the terms of the lines count, so a design that renames or reorders lines is attacked as hard as
one that drops them.  Subrecords that left different chunks in the same step are taken to be
parts of the erased records (or, for an append, of the added ones), and paired: the
attacker's guess for a part's partner in another chunk is drawn uniformly from what changed
in that chunk.

Success, for one record: over every two of its public subrecords (in two chunks), the chance
that the guess pairs them, a partner with the same terms counting as right (a record with
fewer than two public subrecords has nothing to pair, and is left out of the mean).  On an append the same attacker pairs the parts of the
records it added (each residual is k^m-anonymous, docs/releases.md): that is its success on a
version pair with no erasure, the baseline an erasure must not beat.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import combinations

from .. import chunkformat as fmt
from ..store import Store

# chunk id -> the multiset of its subrecords (each as its sorted terms)
View = dict[str, Counter]


def public_view(store: Store, version: str) -> View:
    """What the public cloud holds of ``version``: its public chunks' subrecords, read from
    the public zone alone."""
    path = fmt.manifest_path(version)
    manifest = fmt.decode_json(store.read("public", path), f"public/{path}")
    return {c["id"]: Counter(tuple(sorted(terms)) for _, terms in fmt.decode_chunk(
                store.read("public", fmt.chunk_path(c.get("home", version), c["id"]))))
            for c in manifest["chunks"]}


def changed(before: View, after: View) -> View:
    """What left or joined each chunk present in both views (a chunk that vanished, or a new
    one, shows no change of its own)."""
    return {chunk: moved for chunk in before.keys() & after.keys()
            if (moved := (before[chunk] - after[chunk]) + (after[chunk] - before[chunk]))}


def success(moved: View, record: Mapping[str, tuple[str, ...]]) -> float:
    """The attacker's chance of pairing the parts of one ``record`` (chunk -> its subrecord
    there), from what ``moved`` in each chunk."""
    pairs = list(combinations(sorted(record.items()), 2))
    if not pairs:
        return 0.0
    chance = 0.0
    for (chunk, sub), (other, partner) in pairs:
        seen, out = moved.get(chunk, Counter()), moved.get(other, Counter())
        if seen[sub] and out[partner]:  # both parts visible as leaving; the guess in ``other``
            chance += out[partner] / sum(out.values())
    return chance / len(pairs)


def mean_success(steps: Sequence[tuple[View, View, Sequence[Mapping[str, tuple[str, ...]]]]]
                 ) -> float:
    """The mean success over every record of every step (older view, newer view, the records
    that step erased or added) that has two public subrecords or more (the others have no
    parts to pair); 0 when there are none."""
    scores = [success(changed(before, after), record)
              for before, after, records in steps for record in records if len(record) >= 2]
    return sum(scores) / len(scores) if scores else 0.0
