#!/usr/bin/env python3
"""Hadoop Streaming mapper: pseudonyms of an inverted index that match the query's map tasks.

    match_index.py TASKS.json  < index lines  > task TAB pseudonym TAB term

Input lines are index lines of any mix of chunks, ``<chunk id>\\t<JSON term>\\t<pseudonyms>``.
TASKS.json is a list of ``{"chunk": id, "terms": [...]}``; a task's number is its position.  For
every task over the line's chunk that asks for the line's term, one output line per pseudonym.
Standard library only: it runs on bare cluster nodes.
"""

import json
import sys


def load_tasks(path):
    """chunk id -> [(task number, set of terms)]."""
    with open(path, encoding="utf-8") as handle:
        tasks = json.load(handle)
    by_chunk = {}
    for number, task in enumerate(tasks):
        by_chunk.setdefault(task["chunk"], []).append((number, set(task["terms"])))
    return by_chunk


def match(line, by_chunk):
    """(task number, pseudonym, term) for one index line."""
    chunk, term_json, pseudonyms = line.rstrip("\n").split("\t")
    term = json.loads(term_json)
    wanted = [number for number, terms in by_chunk.get(chunk, ()) if term in terms]
    for number in wanted:
        for pseudonym in pseudonyms.split():
            yield number, pseudonym, term_json


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: match_index.py TASKS.json < index lines")
    by_chunk = load_tasks(argv[1])
    for line in sys.stdin:
        for number, pseudonym, term_json in match(line, by_chunk):
            sys.stdout.write(f"{number}\t{pseudonym}\t{term_json}\n")


if __name__ == "__main__":
    main(sys.argv)
