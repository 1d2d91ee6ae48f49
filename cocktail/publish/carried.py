"""The manifest lines a version carries from the one before, and how it lays them out.

A version lists its private manifest's entries unit by unit, in unit order (each unit's
sorted by chunk id; the head gives each unit's ``chunk_count``) and its public manifest's
sorted by chunk id, and every entry names its ``home``.  So a later version carries what it
leaves alone as unparsed slices: an untouched unit's lines are one slice, the public lines it
replaces are found by bisection, and the work of an append or an erasure follows the chunks it
changes, not how many the publication has.  A manifest written before this layout is brought
to it once, by the first version that carries it (every line read then)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import chunkformat as fmt

if TYPE_CHECKING:
    from ..query.view import Publication


@dataclass(frozen=True)
class CarriedLines:
    """Unparsed manifest lines of the chunks a version keeps as they were, each naming its
    home: ``by_unit[u]``, unit u's private lines sorted by chunk id; ``public``, the public
    lines sorted by chunk id."""
    by_unit: list[list[bytes]]
    public: list[bytes]


NOTHING = CarriedLines([], [])


def carried_lines(publication: Publication, replaced: set[str]) -> CarriedLines:
    """The lines of ``publication``'s current version but those of the chunks ``replaced``
    (the chunks this version rewrites or drops: their units were read, so each is known)."""
    current = publication.version
    public_path = fmt.manifest_path(current)
    _, public = fmt.split_manifest(publication.store.read("public", public_path),
                                   f"public/{public_path}")
    units = range(len(publication.units))
    if not publication.lines_by_unit:
        return _brought_to_layout(publication, public, replaced, units)
    touched = {publication.chunk_unit(chunk_id) for chunk_id in replaced}
    by_unit = [[line for line in publication.unit_lines(u)
                if fmt.line_chunk_id(line) not in replaced]
               if u in touched else publication.unit_lines(u) for u in units]
    return CarriedLines(by_unit, fmt.spliced(public, replaced, ()))


def _brought_to_layout(publication: Publication, public: list[bytes], replaced: set[str],
                       units: range) -> CarriedLines:
    """A manifest written before the layout: every line read, homed and sorted, once."""
    current = publication.version

    def kept(lines: Iterable[bytes]) -> list[bytes]:
        return sorted((fmt.with_home(line, current) for line in lines
                       if fmt.line_chunk_id(line) not in replaced), key=fmt.line_chunk_id)
    return CarriedLines([kept(publication.unit_lines(u)) for u in units], kept(public))


def private_lines(carried: CarriedLines, chunks: dict[str, dict], units: list[dict]
                  ) -> tuple[Iterator[bytes], list[int]]:
    """The private manifest's entry lines, unit by unit, and each unit's count: the carried
    lines with ``chunks`` (this version's entries, by chunk id) spliced in."""
    if any(unit["id"] != at for at, unit in enumerate(units)):
        raise ValueError("the manifest's units are not listed by id")
    written: dict[int, list[bytes]] = {}
    for chunk_id, entry in chunks.items():
        written.setdefault(entry["unit"], []).append(fmt.chunk_line(entry, chunk_id))
    if max(written, default=-1) >= len(units):
        raise ValueError(f"chunks of unit {max(written)}, which the manifest does not list")
    old = carried.by_unit + [[]] * (len(units) - len(carried.by_unit))
    laid = [fmt.spliced(lines, (), written.get(u, ())) for u, lines in enumerate(old)]
    return (line for lines in laid for line in lines), [len(lines) for lines in laid]
