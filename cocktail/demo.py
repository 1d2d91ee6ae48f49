"""`cocktail demo`: the whole pipeline on synthetic data that needs no download.

Generate a dataset, publish it to a local store, audit the public zone, answer a few counting
queries and check each against a brute-force count on the raw records, then answer them again
as an analyst would see them: noisy, with their expected error, charged to a budget.  Each step
is shown as it ends (:func:`print_step`), every figure with a line saying what it means.

The demo is a first run, so it stays fast: 5,000 records, and the analyst's strategy is the
best fixed one (no strategy search: the server searches one for each new batch shape, which
costs seconds and needs the [search] extra; docs/dp.md).
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .audit import audit
from .dataset import load, write_fimi
from .dp.ledger import Ledger
from .dp.limits import LIMITS
from .dp.session import Source, ask
from .extras import MissingExtra
from .overlay.layout import PhaseProgress
from .publish import PublishParams, publish
from .query import Engine, Publication
from .querylang import CountQuery, LinearQuery, Workload
from .store import LocalStore
from .synthetic import SyntheticSpec, generate

STEPS = ("dataset", "publish", "audit", "queries", "noisy", "report")
Step = Callable[[str, dict], None]  # called with a step's name and result as the step ends


@dataclass(frozen=True)
class DemoSettings:
    workdir: Path = Path("cocktail-demo")
    records: int = 5_000
    seed: int = 7
    params: PublishParams = PublishParams()


def demo_queries(records: Sequence[frozenset[str]]) -> list[CountQuery]:
    """Queries that exercise the interesting paths: frequent itemsets spread over chunks, a
    term kept private in some cluster, and a term that does not exist."""
    support = Counter(t for r in records for t in r)
    pairs = Counter(p for r in records for p in combinations(sorted(r), 2))
    triples = Counter(t for r in records if len(r) <= 12 for t in combinations(sorted(r), 3))
    top = support.most_common(1)[0][0]
    rare = min((t for t, s in support.items() if s >= 2), key=lambda t: (support[t], t))
    queries = [(top,), pairs.most_common(1)[0][0], triples.most_common(1)[0][0], (rare,),
               (top, rare), ("no-such-term",)]
    return [CountQuery(q) for q in queries]


def run_demo(settings: DemoSettings, step: Step = lambda name, result: None,
             publishing: Callable[[], AbstractContextManager[PhaseProgress | None]] = nullcontext,
             ) -> dict:
    """Every step's result, in one dict; ``step`` sees each as it ends, and ``publishing``
    gives the publish step's progress (a context, so that bars live only while it runs)."""
    settings.workdir.mkdir(parents=True, exist_ok=True)
    result: dict = {"step_seconds": {}}

    def done(name: str, value, started: float) -> None:
        result[name] = value
        result["step_seconds"][name] = time.perf_counter() - started
        step(name, result)

    started = time.perf_counter()
    data_path = settings.workdir / "synthetic.dat"
    write_fimi(generate(SyntheticSpec(records=settings.records, seed=settings.seed)), data_path)
    dataset = load(data_path)
    result["records"] = len(dataset.records)
    done("dataset", str(data_path), started)
    started = time.perf_counter()
    shutil.rmtree(settings.workdir / "store", ignore_errors=True)  # each run its own first release
    store = LocalStore(settings.workdir / "store")
    result["store"] = store.url
    with publishing() as progress:  # closed before the step is shown: bars and text never mix
        published = publish(dataset, store, settings.params, progress=progress)
    done("publish", published.as_dict(), started)
    started = time.perf_counter()
    checked = audit(store)
    done("audit", checked.as_dict(), started)
    started = time.perf_counter()
    engine = Engine(Publication.open(store))
    answers = []
    for query in demo_queries(dataset.records):
        answer = engine.count(query)
        expected = dataset.count_containing(query.terms)
        answers.append({"query": str(query), "answer": answer, "brute_force": expected,
                        "equal": answer == expected})
    done("queries", answers, started)
    started = time.perf_counter()
    ledger_path = settings.workdir / "demo-ledger.sqlite"
    done("noisy", analyst_view(ledger_path, engine, demo_queries(dataset.records)[:3]), started)
    started = time.perf_counter()
    path, result["report_skipped"] = write_report(store, Ledger(ledger_path),
                                                  settings.workdir / "report.html")
    done("report", path, started)
    result["ok"] = checked.ok and all(a["equal"] for a in answers)
    return result


def analyst_view(ledger_path: Path, engine: Engine, queries: list[CountQuery]) -> dict:
    """The queries as one batch from a fresh demo analyst (α = 0.5 of a budget of 1), under
    the best fixed strategy: no search (``search_units`` 0) keeps the demo fast and its output
    the same with or without the [search] extra."""
    ledger_path.unlink(missing_ok=True)
    ledger = Ledger(ledger_path)
    ledger.add_role("demo-analyst", alpha=0.5, budget=1.0)
    token = ledger.add_user("demo", "demo-analyst")
    workload = Workload(tuple(LinearQuery(((1.0, q),)) for q in queries))
    return ask(ledger, Source(engine.version, engine.counts), token, workload,
               limits=replace(LIMITS, search_units=0)).body


def write_report(store: LocalStore, ledger: Ledger, path: Path) -> tuple[str | None, str | None]:
    """The owner's report's path, or why there is none (it needs the [report] extra)."""
    try:
        from .report.numbers import gather
        from .report.page import render
    except MissingExtra as missing:
        return None, str(missing)
    path.write_text(render(gather(store, ledger)), encoding="utf-8")
    return str(path), None


# -- the text output: each step as it ends, each figure with what it means ---------------------

STRATEGIES = {  # the fixed strategies an analyst's answer may name, in a line each
    "NOQ": "noise added to each query's answer",
    "NOT": "noise added to each term count, the answers combined from them",
    "cells: histogram": "noise added to the count of each cell (the records holding exactly "
                        "one subset of the batch's terms: each record is in one cell); each "
                        "answer sums its cells",
    "cells: counting queries": "noise added to each counting query, rebuilt over the cells",
    "cells: workload": "noise added to each query's answer, rebuilt over the cells",
    "cells: counting queries + histogram": "noise added to the counting queries and to the "
                                           "cells, each answer the best combination of both",
}


def print_step(console: Console, name: str, result: dict) -> None:
    """One step, printed as soon as it ends (rich flushes each print)."""
    say = console.print
    seconds = f"({result['step_seconds'][name]:.1f}s)"

    def means(text: str) -> None:
        say(Text("   " + text, style="dim"))

    if name == "dataset":
        say(f"[bold]1. data[/]      {result['records']:,} synthetic records -> "
            f"{result['dataset']} {seconds}", highlight=False)
        means("records: sets of terms (e.g. shopping baskets; here numbered items), "
              "synthetic, so nothing to download")
    elif name == "publish":
        p = result["publish"]
        say(f"[bold]2. publish[/]   {p['version']} "
            f"(k={p['k']}, m={p['m']}, {p['method']}): {p['clusters']} clusters, "
            f"{p['public_chunks']:,} public chunks, {p['private_chunks']:,} private, "
            f"{p['private_term_share']:.1%} of term occurrences private {seconds}",
            highlight=False)
        means(f"k^m-anonymous: whoever knows up to m={p['m']} terms of a record finds, in every "
              f"public chunk, either no subrecord with them or at least k={p['k']}")
        means("cluster: records grouped by the terms they share; chunk: one cluster's records "
              "cut down to some of its terms (a subrecord per record)")
        means("public chunks go to the public cloud; what no public chunk can hold safely "
              "stays in private chunks, in the private cloud (the share above)")
    elif name == "audit":
        a = result["audit"]
        verdict = "[green]PASS[/]" if a["ok"] else "[bold red]FAIL[/]"
        say(f"[bold]3. audit[/]     {verdict}: {a['chunks']:,} public chunks, "
            f"{a['itemsets_checked']:,} itemsets checked, {len(a['violations'])} violation(s) "
            f"{seconds}",
            highlight=False)
        means(f"an independent check from the public files alone: every itemset of 1..m terms "
              f"in each public chunk is held by 0 or at least k={a['k']} subrecords")
    elif name == "queries":
        table = Table(title="4. exact counts (the owner's view) against brute force",
                      title_justify="left")
        for column in ("query", "answer", "brute force", ""):
            table.add_column(column)
        for a in result["queries"]:
            table.add_row(a["query"], str(a["answer"]), str(a["brute_force"]),
                          "[green]=[/]" if a["equal"] else "[red]differs[/]")
        say(table)
        means("count(a & b): the records holding both a and b, assembled from public and "
              "private chunks; brute force counts the raw records")
    elif name == "noisy":
        noisy = result["noisy"]
        table = Table(title=f"5. the same as an analyst sees them (α={noisy['alpha']:g} of a "
                            f"budget of {noisy['budget']['budget']:g}; "
                            f"{noisy['budget']['remaining']:g} left)", title_justify="left")
        for column in ("query", "noisy answer", "expected error (RMS)"):
            table.add_column(column)
        for query, answer, error in zip(noisy["workload"].split("; "), noisy["answers"],
                                        noisy["expected_rms_error"]):
            table.add_row(query, f"{answer:.1f}", f"± {error:.1f}")
        say(table)
        means(f"α: the privacy each answer costs (smaller: more noise); the batch spent "
              f"{noisy['charged']:g} of the analyst's budget")
        means(f"strategy {noisy['strategy']}: "
              f"{STRATEGIES.get(noisy['strategy'], 'searched for this batch (docs/dp.md)')}")
        means("expected error: the noise's typical size, known before answering (it depends "
              "on α and the strategy, never on the data)")
    elif name == "report":
        if result["report"]:
            say(f"[bold]6. report[/]    {result['report']}: coverage, the publication's shape, "
                f"the audit, releases and budget as charts; open it with: xdg-open "
                f"{result['report']}", highlight=False)
        else:
            say(Text.assemble(("6. report", "bold"), "    skipped: ", result["report_skipped"]))
