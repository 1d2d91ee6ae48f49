"""`cocktail demo`: the whole pipeline on synthetic data that needs no download.

Generate a dataset, publish it to a local store, audit the public zone, answer a few counting
queries and check each against a brute-force count on the raw records, then answer them again
as an analyst would see them: noisy, with their expected error, charged to a budget.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from .audit import audit
from .dataset import load, write_fimi
from .dp.ledger import Ledger
from .dp.session import Source, ask
from .extras import MissingExtra
from .publish import PublishParams, publish
from .query import Engine, Publication
from .querylang import CountQuery, LinearQuery, Workload
from .store import LocalStore
from .synthetic import SyntheticSpec, generate


@dataclass(frozen=True)
class DemoSettings:
    workdir: Path = Path("cocktail-demo")
    records: int = 20_000
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


def run_demo(settings: DemoSettings, progress=None) -> dict:
    settings.workdir.mkdir(parents=True, exist_ok=True)
    data_path = settings.workdir / "synthetic.dat"
    write_fimi(generate(SyntheticSpec(records=settings.records, seed=settings.seed)), data_path)
    dataset = load(data_path)
    shutil.rmtree(settings.workdir / "store", ignore_errors=True)  # each run its own first release
    store = LocalStore(settings.workdir / "store")
    published = publish(dataset, store, settings.params, progress=progress)
    checked = audit(store)
    engine = Engine(Publication.open(store))
    answers = []
    for query in demo_queries(dataset.records):
        answer = engine.count(query)
        expected = dataset.count_containing(query.terms)
        answers.append({"query": str(query), "answer": answer, "brute_force": expected,
                        "equal": answer == expected})
    ledger_path = settings.workdir / "demo-ledger.sqlite"
    noisy = analyst_view(ledger_path, engine, demo_queries(dataset.records)[:3])
    report = write_report(store, Ledger(ledger_path), settings.workdir / "report.html")
    return {"dataset": str(data_path), "store": store.url, "publish": published.as_dict(),
            "audit": checked.as_dict(), "queries": answers, "noisy": noisy,
            "report": report, "ok": checked.ok and all(a["equal"] for a in answers)}


def analyst_view(ledger_path: Path, engine: Engine, queries: list[CountQuery]) -> dict:
    """The queries as one batch from a fresh demo analyst (α = 0.5 of a budget of 1)."""
    ledger_path.unlink(missing_ok=True)
    ledger = Ledger(ledger_path)
    ledger.add_role("demo-analyst", alpha=0.5, budget=1.0)
    token = ledger.add_user("demo", "demo-analyst")
    workload = Workload(tuple(LinearQuery(((1.0, q),)) for q in queries))
    return ask(ledger, Source(engine.version, engine.counts), token, workload).body


def write_report(store: LocalStore, ledger: Ledger, path: Path) -> str:
    """The owner's report's path, or why there is none (it needs the [report] extra)."""
    try:
        from .report.numbers import gather
        from .report.page import render
    except MissingExtra as missing:
        return f"skipped: {missing}"
    path.write_text(render(gather(store, ledger)), encoding="utf-8")
    return str(path)
