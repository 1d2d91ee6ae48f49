#!/usr/bin/env python3
"""Hadoop Streaming reducer: keep the pseudonyms that matched every term of their task.

    complete_matches.py TASKS.json  < task TAB pseudonym TAB term (sorted by task, pseudonym)
                                    > task TAB pseudonym

Hadoop must group on the first two fields (``-D stream.num.map.output.key.fields=2``).  A
subrecord matches a task when all of the task's terms were emitted for its pseudonym.
Standard library only: it runs on bare cluster nodes.
"""

import itertools
import json
import sys


def load_sizes(path):
    """task number -> how many distinct terms it needs."""
    with open(path, encoding="utf-8") as handle:
        return [len(set(task["terms"])) for task in json.load(handle)]


def complete(rows, sizes):
    """(task number, pseudonym) whose group of (task, pseudonym, term) rows holds all terms."""
    for (number, pseudonym), group in itertools.groupby(rows, key=lambda r: (r[0], r[1])):
        if len({term for _, _, term in group}) == sizes[int(number)]:
            yield int(number), pseudonym


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: complete_matches.py TASKS.json < sorted mapper output")
    sizes = load_sizes(argv[1])
    rows = (line.rstrip("\n").split("\t") for line in sys.stdin)
    for number, pseudonym in complete(rows, sizes):
        sys.stdout.write(f"{number}\t{pseudonym}\n")


if __name__ == "__main__":
    main(sys.argv)
