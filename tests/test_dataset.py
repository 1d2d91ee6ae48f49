"""The readers: each format on small hand-written files, every error case, the real BMS data."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocktail.dataset import (FORMATS, Dataset, InputError, PackedIds, _fimi_at_once,
                              _fimi_by_line, _Lines, detect_format, line_range, load,
                              key_type, read_fimi_lines, write_fimi)

from .conftest import dataset_path



def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def as_dict(dataset: Dataset) -> dict[str, set[str]]:
    return {i: set(r) for i, r in zip(dataset.ids, dataset.records)}


def error_of(path: Path, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        load(path, **kwargs)
    return str(info.value)


# -- FIMI ------------------------------------------------------------------------------------

def test_fimi_records_comments_blank_lines_and_duplicates(tmp_path):
    path = write(tmp_path, "data.dat", "# a comment\n1 2 3\n\n  % another\n2 2 5 \napple 7\n")
    dataset = load(path)
    assert dataset.format == "fimi"
    assert dataset.source == str(path)
    assert dataset.ids == ("2", "3", "5", "6")
    assert dataset.records == (frozenset({"1", "2", "3"}), frozenset(), frozenset({"2", "5"}),
                               frozenset({"apple", "7"}))
    assert len(dataset) == 4
    assert dataset.empty_records == 1
    assert dataset.duplicate_terms == 1
    assert dataset.skipped_lines == 0
    assert dataset.terms() == {"1", "2", "3", "5", "7", "apple"}


def test_fimi_final_newline_adds_no_record_but_a_blank_last_line_does(tmp_path):
    assert len(load(write(tmp_path, "a.dat", "1 2\n3"))) == 2
    assert len(load(write(tmp_path, "b.dat", "1 2\n3\n"))) == 2
    assert load(write(tmp_path, "c.dat", "1 2\n3\n\n")).records[2] == frozenset()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["1", "22", "ab", "#c", "%", "d#", " ", "  ", "\t", "\x1f",
                                 "\n", "\r", "\r\n", "\n\n", "\x0b", "\u2028", "é",
                                 "\xa0"]), max_size=40))
def test_fimi_read_at_once_reads_what_line_by_line_reads(pieces):
    """The array reader takes the files it can (ASCII, line breaks \\r \\n \\r\\n only)
    and must then give what the line-by-line reader gives: ids, terms, duplicates."""
    data = "".join(pieces).encode()
    with mock.patch("cocktail.dataset.FIMI_BLOCK", 3):  # blocks of whole lines, as in 1M
        fast = _fimi_at_once(data)
    assert fast == _fimi_at_once(data) or fast is None
    slow = _fimi_by_line(_Lines("x.dat", data, skip_bad_lines=False))
    if fast is None:
        assert not data.isascii() or any(c in data for c in b"\x0b\x0c\x1c\x1d\x1e")
        return
    assert (fast[0], list(fast[1]), fast[2]) == (slow[0], list(slow[1]), slow[2])
    assert fast[1].names == slow[1].names


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["1", "22", "ab", "#c", " ", "\n", "\r", "\r\n", "\n\n",
                                 "\x0b", "é", "\udcff"]), max_size=30),
       st.integers(1, 12))
def test_a_fimi_file_read_by_byte_ranges_reads_as_the_loader(tmp_path_factory, pieces, size):
    """Cut at every ``size`` bytes, each range holding the lines that start in it, a file is
    read range by range (line numbers offset by the lines before) as the loader reads it:
    ids, records, bad lines and the first of them, whatever the cuts split (\\r\\n, a
    line, a UTF-8 character)."""
    data = "".join(pieces).encode("utf-8", "surrogateescape")  # \udcff: the byte 0xff
    path = tmp_path_factory.mktemp("ranges") / "r.dat"
    path.write_bytes(data)
    cuts = [*range(0, len(data), size), len(data)]
    with mock.patch("cocktail.dataset.LINE_SEEK", 1):  # a \\r\\n split between two reads
        ranges = [line_range(path, a, b) for a, b in zip(cuts, cuts[1:])]
    assert b"".join(ranges) == data
    ids, records, skipped, first_bad, before = [], [], 0, None, 0
    for piece in ranges:
        read = read_fimi_lines(str(path), piece)
        ids += [str(int(i) + before) for i in read.ids]
        records += list(read.records)
        skipped += read.skipped
        if read.first_bad and not first_bad:
            first_bad = read.first_bad[0] + before
        before += read.lines
    assert before == len(data.splitlines())
    if first_bad:
        assert error_of(path).startswith(f"{path}:{first_bad}: not valid UTF-8")
    if not records:
        return
    loaded = load(path, skip_bad_lines=True)
    assert (ids, records, skipped) == (list(loaded.ids), list(loaded.records),
                                       loaded.skipped_lines)


def test_crlf_and_bom(tmp_path):
    dataset = load(write(tmp_path, "data.txt", b"\xef\xbb\xbf1 2\r\n\r\n3\r\n"))
    assert dataset.records == (frozenset({"1", "2"}), frozenset(), frozenset({"3"}))
    dataset = load(write(tmp_path, "data.csv", b"\xef\xbb\xbfrecord_id,term\r\nu1,a\r\n"))
    assert as_dict(dataset) == {"u1": {"a"}}


def test_fimi_non_utf8_line(tmp_path):
    path = write(tmp_path, "data.dat", b"1 2\n3 \xff 4\n5\n")
    message = error_of(path)
    assert message.startswith(f"{path}:2: not valid UTF-8")
    dataset = load(path, skip_bad_lines=True)
    assert dataset.ids == ("1", "3")
    assert dataset.skipped_lines == 1


# -- SPMF ------------------------------------------------------------------------------------

def test_spmf_union_of_itemsets_and_item_names(tmp_path):
    path = write(tmp_path, "seq.txt", "@CONVERTED_FROM_TEXT\n@ITEM=1=apple\n@ITEM=2=pear\n"
                                      "1 -1 2 3 -1 1 -2\n# comment\n-2\n4 -1 -2\n")
    dataset = load(path)
    assert dataset.format == "spmf"
    assert dataset.ids == ("4", "6", "7")
    assert dataset.records == (frozenset({"apple", "pear", "3"}), frozenset(), frozenset({"4"}))
    assert dataset.duplicate_terms == 1
    assert dataset.empty_records == 1


def test_spmf_names_declared_after_use_apply(tmp_path):
    path = write(tmp_path, "seq.txt", "1 2 -2\n@ITEM=2=pear\n")
    assert load(path).records == (frozenset({"1", "pear"}),)


@pytest.mark.parametrize("line, reason", [
    ("1 2 -1 3", "must end with -2"),
    ("1 -2 3 -2", "after the end-of-sequence marker"),
    ("1 -3 2 -2", "unexpected negative token '-3'"),
    ("@ITEM=5", "expected '@ITEM=<id>=<name>'"),
    ("@ITEM=1=plum", "item '1' already named 'apple' on line 1"),
])
def test_spmf_malformed_lines(tmp_path, line, reason):
    path = write(tmp_path, "seq.txt", f"@ITEM=1=apple\n1 -2\n{line}\n2 -2\n")
    message = error_of(path, format="spmf")
    assert message.startswith(f"{path}:3: ") and reason in message
    dataset = load(path, format="spmf", skip_bad_lines=True)
    assert dataset.skipped_lines == 1
    assert dataset.records == (frozenset({"apple"}), frozenset({"2"}))


# -- CSV -------------------------------------------------------------------------------------

def test_csv_merges_rows_keeps_first_order_and_skips_header(tmp_path):
    path = write(tmp_path, "data.csv", ' Record_ID , TERM \nu2,b\nu1,a\n\n"u2", "c"\nu3,\n'
                                       'u1,a\nu2, b \n"u 4","x, y"\n')
    dataset = load(path)
    assert dataset.format == "csv"
    assert dataset.ids == ("u2", "u1", "u3", "u 4")
    assert as_dict(dataset) == {"u2": {"b", "c"}, "u1": {"a"}, "u3": set(), "u 4": {"x, y"}}
    assert dataset.duplicate_terms == 2
    assert dataset.empty_records == 1


def test_csv_header_only_on_first_row(tmp_path):
    dataset = load(write(tmp_path, "data.csv", "u1,a\nrecord_id,term\n"))
    assert as_dict(dataset) == {"u1": {"a"}, "record_id": {"term"}}


@pytest.mark.parametrize("line, reason", [
    ("u1,a,b", "expected 'record_id,term', got 3 fields"),
    ("u1", "expected 'record_id,term', got 1 field"),
    (" ,a", "empty record id"),
    ('"u1,a', "malformed CSV"),
])
def test_csv_malformed_lines(tmp_path, line, reason):
    path = write(tmp_path, "data.csv", f"record_id,term\nu0,z\n{line}\nu2,b\n")
    message = error_of(path)
    assert message.startswith(f"{path}:3: ") and reason in message
    dataset = load(path, skip_bad_lines=True)
    assert dataset.skipped_lines == 1
    assert as_dict(dataset) == {"u0": {"z"}, "u2": {"b"}}


def test_csv_delimiter_and_columns_named_in_the_header(tmp_path):
    path = write(tmp_path, "orders.csv", "order;product;price\no1;milk;2\no1;bread;3\no2;milk;2\n")
    data = load(path, delimiter=";", id_column="order", terms_column="product")
    assert as_dict(data) == {"o1": {"milk", "bread"}, "o2": {"milk"}}
    assert as_dict(load(write(tmp_path, "t.csv", "1\ta\n1\tb\n"), delimiter="\t")) == \
        {"1": {"a", "b"}}
    wide = write(tmp_path, "w.csv", "o,p,q\n1,a,x\n2,b\n")
    assert error_of(wide, id_column="o", terms_column="p") == \
        f"{wide}:3: expected 'o,p,q', got 2 fields"
    assert error_of(wide, id_column="nope") == f"{wide}:1: no column 'nope' in the header 'o,p,q'"
    assert error_of(wide, header=True) == (
        f"{wide}:1: which columns of the header 'o,p,q' hold the record id and the term? Name "
        "them (--id-column, --terms-column)")
    with pytest.raises(ValueError, match="column names need a header row"):
        load(wide, header=False, id_column="o")
    with pytest.raises(ValueError, match="a CSV delimiter is one character"):
        load(wide, delimiter=";;")


def test_csv_header_given_or_refused_when_it_looks_like_one(tmp_path):
    path = write(tmp_path, "h.csv", "basket,item\n1,7\n2,8\n")
    assert error_of(path) == (
        f"{path}:1: the first row 'basket,item' looks like a header (its id 'basket' is not a "
        "number and every other row's is); say which it is: --header skips it, --no-header "
        "reads it as a record")
    assert error_of(path, skip_bad_lines=True) == error_of(path)  # not a bad line: a question
    assert as_dict(load(path, header=True)) == {"1": {"7"}, "2": {"8"}}
    assert as_dict(load(path, header=False)) == {"basket": {"item"}, "1": {"7"}, "2": {"8"}}
    named = write(tmp_path, "r.csv", "record_id,term\nu,a\n")
    assert as_dict(load(named)) == {"u": {"a"}}
    assert as_dict(load(named, header=False)) == {"record_id": {"term"}, "u": {"a"}}


@pytest.mark.parametrize("text, why", [
    ("user,item\nu1,7\nu2,8\nu3,\n", "its term 'item' is not a number and every other row's is"),
    ("id,terms\nu1,a\n", "it names columns"),
])
def test_a_first_row_that_looks_like_a_header_is_refused(tmp_path, text, why):
    path = write(tmp_path, "h.csv", text)
    assert f"{path}:1: the first row '{text.split(chr(10))[0]}' looks like a header ({why})" \
        in error_of(path)


@pytest.mark.parametrize("text", ["basket,item\nu1,milk\nu2,bread\n", "a,b\n", "x,1\ny,3\n",
                                  "7,\n8,9\n"])
def test_a_first_row_like_the_others_is_a_record(tmp_path, text):
    """Conservative: only a first row that differs from all the others is suspected."""
    first, *_ = text.split("\n")
    assert load(write(tmp_path, "d.csv", text)).ids[0] == first.split(",")[0]


@pytest.mark.parametrize("separator, shown", [(";", ";"), ("\t", "\\t")])
def test_a_csv_separated_otherwise_names_the_delimiter_to_give(tmp_path, separator, shown):
    path = write(tmp_path, "d.csv", f"1{separator}a\n2{separator}b\n")
    assert error_of(path).endswith(f"looks separated by {separator!r}: give --delimiter "
                                   f"'{shown}'")
    assert as_dict(load(path, delimiter=separator)) == {"1": {"a"}, "2": {"b"}}


def test_skipped_lines_are_named_with_why_the_first_few(tmp_path):
    lines = ['{"id": %d, "terms": ["a"]}' % n if n % 3 else "oops" for n in range(1, 31)]
    dataset = load(write(tmp_path, "d.jsonl", "\n".join(lines) + "\n"), skip_bad_lines=True)
    assert dataset.skipped_lines == 10
    assert [n for n, _ in dataset.skipped_examples] == [3, 6, 9, 12, 15]
    assert "invalid JSON" in dataset.skipped_examples[0][1]


def test_encodings(tmp_path):
    latin = write(tmp_path, "l.csv", "record_id,term\n1,café\n".encode("latin-1"))
    assert as_dict(load(latin, encoding="latin-1")) == {"1": {"café"}}
    assert error_of(latin).startswith(f"{latin}:2: not valid UTF-8 (byte 0xe9 at column 6); ")
    for what_to_do in ("--encoding cp1252", "iconv -f cp1252 -t utf-8", "--skip-bad-lines"):
        assert what_to_do in error_of(latin)
    wide = write(tmp_path, "u.dat", "a b\ncafé\n".encode("utf-16"))
    assert list(map(sorted, load(wide, encoding="utf-16").records)) == [["a", "b"], ["café"]]
    cp = write(tmp_path, "c.dat", b"a\n\x81 b\nc\n")
    assert error_of(cp, encoding="cp1252").startswith(
        f"{cp}:2: not valid cp1252 (byte 0x81 at column 1)")
    assert load(cp, encoding="cp1252", skip_bad_lines=True).ids == ("1", "3")
    with pytest.raises(ValueError, match="unknown encoding 'nope'"):
        load(latin, encoding="nope")


def test_options_a_format_has_no_use_for_are_refused(tmp_path):
    fimi = write(tmp_path, "a.dat", "1 2\n")
    assert error_of(fimi, delimiter=";", header=True) == \
        f"{fimi}: fimi input takes no delimiter or header"
    assert error_of(write(tmp_path, "a.jsonl", "{}\n"), id_column="x").endswith(
        "jsonl input takes no column names")


# -- JSON Lines ------------------------------------------------------------------------------

def test_jsonl_records(tmp_path):
    path = write(tmp_path, "data.jsonl",
                 '{"id": "x", "terms": ["a", " b ", 7, "a"], "extra": true}\n\n'
                 '{"id": 12, "terms": []}\n{"terms": [1], "id": "y"}\n')
    dataset = load(path)
    assert dataset.format == "jsonl"
    assert dataset.ids == ("x", "12", "y")
    assert dataset.records == (frozenset({"a", "b", "7"}), frozenset(), frozenset({"1"}))
    assert dataset.duplicate_terms == 1
    assert dataset.empty_records == 1


@pytest.mark.parametrize("line, reason", [
    ('{"id": 1, "terms": oops}', "invalid JSON"),
    ('[1, 2]', "expected a JSON object, got array"),
    ('{"terms": []}', "missing 'id'"),
    ('{"id": 1}', "missing 'terms'"),
    ('{"id": true, "terms": []}', "'id' must be a string or an integer, got boolean"),
    ('{"id": 1.5, "terms": []}', "'id' must be a string or an integer, got number"),
    ('{"id": "", "terms": []}', "empty record id"),
    ('{"id": 1, "terms": "a b"}', "'terms' must be a list, got string"),
    ('{"id": 1, "terms": ["a", false]}', "a term must be a string or an integer, got boolean"),
    ('{"id": 1, "terms": ["a", null]}', "got null"),
    ('{"id": 1, "terms": [""]}', "empty term"),
    ('{"id": "a", "terms": []}', "duplicate record id 'a' (first on line 1)"),
])
def test_jsonl_malformed_lines(tmp_path, line, reason):
    path = write(tmp_path, "data.jsonl", f'{{"id": "a", "terms": ["t"]}}\n\n{line}\n'
                                         '{"id": "b", "terms": ["u"]}\n')
    message = error_of(path)
    assert message.startswith(f"{path}:3: ") and reason in message
    dataset = load(path, skip_bad_lines=True)
    assert dataset.skipped_lines == 1
    assert as_dict(dataset) == {"a": {"t"}, "b": {"u"}}


def test_jsonl_duplicate_id_names_both_lines(tmp_path):
    lines = ['{"id": "%s", "terms": []}' % i for i in "abxcdefg"] + ['{"id": "x", "terms": []}']
    path = write(tmp_path, "data.jsonl", "\n".join(lines) + "\n")
    assert error_of(path) == f"{path}:9: duplicate record id 'x' (first on line 3)"


def test_int_and_string_ids_collide(tmp_path):
    path = write(tmp_path, "data.jsonl", '{"id": 1, "terms": []}\n{"id": "1", "terms": []}\n')
    assert "duplicate record id '1' (first on line 1)" in error_of(path)


# -- all formats -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, content, format", [
    ("empty.dat", "", None), ("bom.dat", "\ufeff", None),
    ("notes.dat", "# nothing\n% here\n", None),
    ("header.csv", "record_id,term\n", None), ("blank.jsonl", "\n\n", None),
    ("meta.txt", "@ITEM=1=a\n\n", "spmf"),
])
def test_no_records(tmp_path, name, content, format):
    path = write(tmp_path, name, content)
    assert error_of(path, format=format) == f"{path}: no records (empty file)"


def test_no_records_when_every_line_was_skipped(tmp_path):
    path = write(tmp_path, "bad.jsonl", "nope\n[]\n")
    assert error_of(path, skip_bad_lines=True).startswith(f"{path}: no records (empty file)")


@pytest.mark.parametrize("name, content", [
    ("data.csv", b"u,a\n\xc3\x28,b\n"),
    ("data.jsonl", b'{"id": 1, "terms": ["a"]}\n{"id": 2, "terms": ["\xe9"]}\n'),
    ("data.txt", b"1 -2\n2 \xe9 -2\n"),
])
def test_non_utf8_line_in_any_format(tmp_path, name, content):
    path = write(tmp_path, name, content)
    assert error_of(path).startswith(f"{path}:2: not valid UTF-8 (byte 0x")
    dataset = load(path, skip_bad_lines=True)
    assert dataset.skipped_lines == 1 and len(dataset) == 1


def test_missing_file(tmp_path):
    path = tmp_path / "absent.dat"
    assert error_of(path) == f"{path}: no such file"
    with pytest.raises(InputError, match="absent.dat"):
        detect_format(path)


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        load(write(tmp_path, "a.dat", "1\n"), "xml")


def test_explicit_format_overrides_the_name(tmp_path):
    dataset = load(write(tmp_path, "data.csv", "1 2 3\n"), "fimi")
    assert dataset.format == "fimi" and dataset.records == (frozenset({"1", "2", "3"}),)


@pytest.mark.parametrize("name, content, expected", [
    ("a.csv", "", "csv"), ("a.CSV", "", "csv"), ("a.jsonl", "", "jsonl"), ("a.ndjson", "", "jsonl"),
    ("a.json", "", "jsonl"), ("a.dat", "1 2 3\n", "fimi"), ("a.txt", "1 -1 2 -2\n", "spmf"),
    ("a.dat", "@CONVERTED_FROM_TEXT\n# x\n\n1 -2\n", "spmf"), ("a", "\n\n5 6\n", "fimi"),
    ("a.dat", "", "fimi"), ("a.txt", "\ufeff@ITEM=1=x\r\n1 -1 -2\r\n", "spmf"),
    ("a.parquet", "", "parquet"), ("a.PQ", "", "parquet"), ("a.dat", "PAR1...", "parquet"),
])
def test_detect_format(tmp_path, name, content, expected):
    assert detect_format(write(tmp_path, name, content)) == expected


def test_formats():
    assert FORMATS == ("fimi", "spmf", "csv", "jsonl", "parquet")


# -- writing ---------------------------------------------------------------------------------

def test_write_fimi_round_trip(tmp_path):
    path = tmp_path / "out.dat"
    write_fimi([{"b", "a", "10", "9"}, set(), ["x"], frozenset({"é"})], path)
    assert path.read_text(encoding="utf-8") == "10 9 a b\n\nx\né\n"
    dataset = load(path)
    assert dataset.records == (frozenset({"a", "b", "9", "10"}), frozenset(), frozenset({"x"}),
                               frozenset({"é"}))


@pytest.mark.parametrize("term", ["air ticket", "tab\there", "", "#tag", "%x"])
def test_write_fimi_refuses_terms_it_cannot_hold(tmp_path, term):
    path = tmp_path / "out.dat"
    with pytest.raises(InputError, match=r"out\.dat: record 2"):
        write_fimi([{"a"}, {"b", term}], path)
    assert not path.exists()


# -- real data -------------------------------------------------------------------------------

def test_bms_webview_1():
    dataset = load(dataset_path("bms-webview-1.dat"))
    assert dataset.format == "fimi"
    assert len(dataset) == 59_602
    assert len(dataset.terms()) == 497
    assert dataset.ids[0] == "1" and dataset.ids[-1] == "59602"
    assert dataset.empty_records == 0 and dataset.skipped_lines == 0


ANY_ID = st.text(st.sampled_from("a1é\n\x00 \ud800\U0001f600"), max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(ANY_ID, max_size=30), st.data())
def test_packed_ids_gather_and_join_as_the_strings_do(ids, data):
    """Any ids (empty, non-ASCII, lone surrogates) pack and unpack as they were, and the
    packed ids gathered at any rows, or joined, are the strings gathered or joined."""
    packed = PackedIds.of(ids)
    assert len(packed) == len(ids) and packed.strings() == ids
    rows = data.draw(st.lists(st.integers(0, len(ids) - 1), max_size=40)) if ids else []
    assert packed.take(np.array(rows, dtype=np.int64)).strings() == [ids[r] for r in rows]
    more = data.draw(st.lists(ANY_ID, max_size=5))
    assert PackedIds.joined([packed, PackedIds.of(more)]).strings() == ids + more
    numbers = data.draw(st.lists(st.integers(0, 10**15), max_size=20))
    assert PackedIds.numbered(np.array(numbers, dtype=np.int64)).strings() == \
        list(map(str, numbers))


def test_a_sort_key_is_32_bits_only_while_every_key_fits():
    # keys run from 0 to limit - 1: int32 holds them up to a limit of 2^31, not one more
    assert np.iinfo(key_type(1 << 31)).max == (1 << 31) - 1
    assert key_type(0) is np.int32
    assert key_type((1 << 31) + 1) is np.int64
