"""The version-diff attacker on erasures (docs/releases.md, "Taking it back").

The public cloud keeps every version it held.  When records are erased it compares each pair of
consecutive versions chunk by chunk: a chunk present in both whose multiset of subrecords
shrank shows what left it.  Pseudonyms and line order are ignored (they may be redrawn); only
the terms of the lines count, so a design that renames or reorders lines is attacked as hard as
one that drops them.  Subrecords that left different chunks in the same step are taken to be
parts of the erased records, and paired: the attacker's guess for a part's partner in another
chunk is drawn uniformly from what left that chunk.

Success, for one erased record: over every two of its public subrecords (in two chunks of the
older version), the chance that the guess pairs them, a partner with the same terms counting
as right; 0 for a record with fewer than two public subrecords.  A version pair without erasure
(an append) shows nothing leaving any chunk, so the attacker's success there is 0.
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


def removed(before: View, after: View) -> View:
    """What left each chunk present in both views (a chunk that vanished shows no line)."""
    return {chunk: gone for chunk in before.keys() & after.keys()
            if (gone := before[chunk] - after[chunk])}


def success(left: View, record: Mapping[str, tuple[str, ...]]) -> float:
    """The attacker's chance of pairing the parts of one erased ``record`` (chunk -> its
    subrecord there, in the older version), from what ``left`` each chunk."""
    pairs = list(combinations(sorted(record.items()), 2))
    if not pairs:
        return 0.0
    chance = 0.0
    for (chunk, sub), (other, partner) in pairs:
        seen, out = left.get(chunk, Counter()), left.get(other, Counter())
        if seen[sub] and out[partner]:  # both parts visible as leaving; the guess in ``other``
            chance += out[partner] / sum(out.values())
    return chance / len(pairs)


def mean_success(steps: Sequence[tuple[View, View, Sequence[Mapping[str, tuple[str, ...]]]]]
                 ) -> float:
    """The mean success over every erased record of every step (older view, newer view, the
    records that step erased); 0 when nothing was erased."""
    scores = [success(removed(before, after), record)
              for before, after, records in steps for record in records]
    return sum(scores) / len(scores) if scores else 0.0
