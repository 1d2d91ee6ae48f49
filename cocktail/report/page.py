"""The owner's report as one HTML page: a chart (plotly) per question, each with a caption and
the numbers it draws in a table beneath.  ``render`` inlines plotly.js, so the file opens with
no network; the dashboard passes a URL of its own instead."""

from __future__ import annotations

import datetime as dt
import html
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..dp.ledger import dataset_budget_text
from ..dp.noise import PURE, SYMBOL, ZCDP
from ..extras import require

go = require("plotly.graph_objects")  # the [report] extra
pio = require("plotly.io")
get_plotlyjs = require("plotly.offline").get_plotlyjs
make_subplots = require("plotly.subplots").make_subplots

# How the charts draw numbers: each chart (or each panel of one) holds one kind of quantity on
# one linear axis, so that no bar is a sliver beside another of a different magnitude; bars are
# labelled with their values, so that a small or zero one still reads; and no axis is
# logarithmic, since a zero (no violations, nothing buffered) must show.

PLOT_CONFIG = {"displaylogo": False, "responsive": True}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; color: #222; }
h1 { margin-bottom: 0; } .meta { color: #666; margin-top: .2rem; }
.cards { display: flex; flex-wrap: wrap; gap: .8rem; margin: 1rem 0; }
.card { border: 1px solid #ddd; border-radius: .4rem; padding: .6rem 1rem; min-width: 9rem; }
.card b { display: block; font-size: 1.4rem; }
figure.chart { border-top: 1px solid #eee; margin: 1.5rem 0; padding-top: 1rem; }
figure.chart .plot { height: 22rem; } figure.chart .plot.tall { height: 36rem; }
figcaption { color: #444; margin: .4rem 0; }
table.data { border-collapse: collapse; font-size: .85rem; margin-top: .4rem; }
table.data th, table.data td { border: 1px solid #ddd; padding: .15rem .5rem; text-align: right; }
table.data th { background: #f6f6f6; } .ok { color: #176c2a; } .bad { color: #b00020; }
"""


@dataclass
class Chart:
    id: str
    title: str
    caption: str
    figure: go.Figure
    header: Sequence[str]
    rows: Sequence[Sequence]
    tall: bool = False  # panels stacked one above another


def render(report: dict, script: str | None = None, refresh: str | None = None) -> str:
    """The page.  ``script``: where plotly.js comes from (None: inlined); ``refresh``: a URL
    the page polls, reloading itself when the version it names changes (the dashboard)."""
    sections = []
    publication = report.get("publication")
    if publication:
        sections += [_section("Coverage", _coverage(publication)),
                     _section("Shape of the publication", _shapes(report["distributions"])),
                     _section("Audit", [_audit(report["audit"])]),
                     _section("Releases", _releases(report["releases"]))]
    else:
        sections.append("<p>The store holds no publication yet.</p>")
    if report.get("ledger") is not None:
        sections.append(_section("Privacy budget", _ledger(report["ledger"])))
    if report.get("tables"):
        sections.append(_section("Tables", _tables(report["tables"])))
    if report.get("rankings"):
        sections.append(_section("Rankings", [_rankings(report["rankings"])]))
    loader = (f"<script>{get_plotlyjs()}</script>" if script is None
              else f'<script src="{html.escape(script)}"></script>')
    return document(
        f"Cocktail report: {report['store']}",
        f"<h1>Cocktail report</h1><p class='meta'>{html.escape(report['store'])}, version "
        f"{html.escape(str(report.get('version')))}, generated {report['generated']}</p>"
        f"{_cards(report)}{''.join(sections)}{_poller(report, refresh)}", head=loader)


def document(title: str, body: str, head: str = "") -> str:
    """A page in the report's style: ``title`` is text, ``body`` and ``head`` are HTML."""
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<link rel='icon' href='data:,'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style>{head}</head><body>{body}</body></html>")


def _section(title: str, charts: Sequence[Chart | str]) -> str:
    body = "".join(c if isinstance(c, str) else _chart(c) for c in charts)
    return f"<section><h2>{html.escape(title)}</h2>{body}</section>"


def _chart(chart: Chart) -> str:
    chart.figure.update_layout(title=chart.title, template="plotly_white",
                               margin={"l": 50, "r": 20, "t": 50, "b": 40})
    plot = pio.to_html(chart.figure, full_html=False, include_plotlyjs=False,
                       div_id=chart.id, config=PLOT_CONFIG)
    size = "plot tall" if chart.tall else "plot"
    return (f"<figure class='chart' id='figure-{chart.id}'><div class='{size}'>{plot}</div>"
            f"<figcaption>{html.escape(chart.caption)}</figcaption>"
            f"{_table(chart.header, chart.rows)}</figure>")


def _table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table class='data'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return f"{value:,}"
    return "" if value is None else str(value)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.2%}" if whole else "–"


def _cards(report: dict) -> str:
    p = report.get("publication")
    if not p:
        return ""
    c = p["coverage"]
    cards = [("records", f"{p['records']:,}"), ("k, m", f"{p['k']}, {p['m']}"),
             ("public chunks", f"{p['public_chunks']:,}"),
             ("occurrences public", _share(c["public_occurrences"], c["occurrences"])),
             ("occurrences private", _share(c["private_occurrences"], c["occurrences"])),
             (f"the floor (support < {p['k']})", _share(c["floor_occurrences"], c["occurrences"])),
             ("audit", "PASS" if report["audit"]["ok"] else "FAIL")]
    return "<div class='cards'>" + "".join(
        f"<div class='card'><b>{html.escape(v)}</b>{html.escape(k)}</div>" for k, v in cards
    ) + "</div>"


def _bar(x: Sequence, y: Sequence, label: str = "%{y:,}", **style) -> go.Bar:
    """Bars labelled with their values (outside the bar, so a short one still reads)."""
    return go.Bar(x=list(x), y=list(y), texttemplate=label, textposition="outside",
                  cliponaxis=False, **style)


# -- sections ---------------------------------------------------------------------------------

def _coverage(p: dict) -> list[Chart]:
    c = p["coverage"]
    kinds = ["occurrences", "records", "terms"]
    private = [c["private_occurrences"], c["records_with_private"], c["terms_with_private"]]
    total = [c["occurrences"], c["records"], c["terms"]]
    floor = [c["floor_occurrences"], None, c["terms_below_k"]]
    # A panel per kind: 0.4% of occurrences and 49% of terms are not drawn on one axis.
    figure = make_subplots(rows=1, cols=3, horizontal_spacing=0.1)
    for col, (kind, x, t, f) in enumerate(zip(kinds, private, total, floor), start=1):
        bars = [("private", x)] + ([(f"floor (support < {p['k']})", f)] if f is not None else [])
        figure.add_trace(_bar([b for b, _ in bars], [100 * v / t if t else 0 for _, v in bars],
                              "%{y:.2f}%", name=kind,
                              marker_color=["#4c78a8", "#9d9d9d"][:len(bars)]), row=1, col=col)
        figure.update_yaxes(title_text=f"% of {kind}", rangemode="tozero", row=1, col=col)
    figure.update_layout(showlegend=False)
    return [Chart("coverage", "What stayed private, against the floor",
                  "The share of occurrences ((record, term) pairs), of records (with at least "
                  "one private occurrence) and of terms (with at least one) that stayed in the "
                  "private cloud. The floor is what no k^m-anonymous publication can show: the "
                  "occurrences of terms held by fewer than k records.",
                  figure, ["", "total", "private", "private share", "floor", "floor share"],
                  [[kind, t, x, _share(x, t), f if f is not None else "–",
                    _share(f, t) if f is not None else "–"]
                   for kind, t, x, f in zip(kinds, total, private, floor)])]


BINS = 20  # past this many distinct values a distribution is drawn in bins


def _histogram(chart_id: str, title: str, values: Sequence[int], what: str,
               caption: str) -> Chart:
    counts = sorted(Counter(values).items())
    if len(counts) > BINS:
        counts = _binned(counts)
    figure = go.Figure(_bar([str(v) for v, _ in counts], [n for _, n in counts]))
    figure.update_layout(xaxis_title=what, yaxis_title="count", xaxis_type="category")
    return Chart(chart_id, title, caption, figure, [what, "count"], counts)


def _binned(counts: list[tuple[int, int]]) -> list[tuple[str, int]]:
    """Counts of whole numbers in at most BINS bins of equal width, each labelled by the
    first and last number it holds (``5–9``, then ``10–14``): no two bins share an edge."""
    low, high = counts[0][0], counts[-1][0]
    width = -(-(high - low + 1) // BINS)
    binned = Counter()
    for value, n in counts:
        binned[(value - low) // width] += n
    return [(f"{low + b * width:,}–{low + (b + 1) * width - 1:,}", binned[b])
            for b in range(-(-(high - low + 1) // width))]


def _shapes(d: dict) -> list[Chart]:
    charts = [
        _histogram("cluster-sizes", "Cluster sizes", d["cluster_sizes"], "records per cluster",
                   "Leaves of the overlay tree: how many records each cluster holds."),
        _histogram("chunks-per-cluster", "Public chunks per cluster", d["chunks_per_cluster"],
                   "public chunks", "How many public chunks EQI-partitioning cut each cluster "
                   "into (a query reads one map task per chunk it touches)."),
        _histogram("terms-per-chunk", "Terms per public chunk", d["terms_per_chunk"], "terms",
                   "The width of each public chunk."),
        _histogram("subrecords-per-chunk", "Subrecords per public chunk",
                   d["subrecords_per_chunk"], "subrecords",
                   "How many records show a subrecord in each public chunk."),
    ]
    per = d["private_per_cluster"]
    figure = go.Figure([_bar([r["cluster"] for r in per], [r["before"] for r in per],
                             name="before aggregation"),
                        _bar([r["cluster"] for r in per], [r["after"] for r in per],
                             name="after")])
    figure.update_layout(barmode="group", xaxis_title="cluster", yaxis_title="private subrecords")
    charts.append(Chart("private-per-cluster", "Private subrecords per cluster",
                        "Each cluster's leftover private subrecords, before they were pooled "
                        "up the tree into aggregated clusters and re-partitioned, and after.",
                        figure, ["cluster", "before", "after"],
                        [[r["cluster"], r["before"], r["after"]] for r in per]))
    tree = d["tree"]
    fan = _histogram("tree-fan-out", "Overlay tree: fan-out", tree["fan_out"], "children",
                     f"Children of each inner node of the overlay tree ({tree['nodes']:,} "
                     f"nodes, depth {tree['depth']}).")
    fan.rows = [*fan.rows, ["depth", tree["depth"]], ["nodes", tree["nodes"]]]
    charts.append(fan)
    return charts


def _audit(a: dict) -> Chart:
    checked = [("public chunks", a["chunks"]), ("subrecords", a["subrecords"]),
               ("itemsets checked", a["itemsets_checked"]),
               ("violations", len(a["violations"]))]
    # Four kinds of count (chunks, subrecords, itemsets, violations) share no axis: each is a
    # number of its own, and 0 violations shows as 0.
    figure = go.Figure([go.Indicator(mode="number", value=value, title={"text": name},
                                     number={"valueformat": ",d", "font": {"color": "#b00020"}
                                             if name == "violations" and value else {}},
                                     domain={"row": 0, "column": i})
                        for i, (name, value) in enumerate(checked)])
    figure.update_layout(grid={"rows": 1, "columns": len(checked)})
    rows = [*checked, ["result", "PASS" if a["ok"] else "FAIL"],
            ["k, m", f"{a['k']}, {a['m']}"]]
    placement = a.get("placement")
    if placement:
        rows += [[f"placement: {k}", json.dumps(v) if isinstance(v, (dict, list)) else v]
                 for k, v in placement.items()]
    rows += [["violation", v] for v in a["violations"][:20]]
    return Chart("audit", "Independent audit of the public zone",
                 "What `cocktail audit` checked, from the public files alone: every public chunk "
                 "k^m-anonymous, no pseudonym in two chunks, nothing else in the public zone "
                 "(and, on HDFS, every private block on a private datanode).",
                 figure, ["check", "value"], rows)


def _releases(history: list[dict]) -> list[Chart]:
    versions = [r["version"] for r in history]
    # A panel each: 800 chunks, 60,000 records and a few buffered ones share no axis.
    series = (("records published", "records"), ("records buffered", "buffered"),
              ("public chunks", "public_chunks"))
    figure = make_subplots(rows=len(series), cols=1, shared_xaxes=True, vertical_spacing=0.1)
    for row, (name, key) in enumerate(series, start=1):
        figure.add_trace(go.Scatter(name=name, x=versions, y=[r[key] or 0 for r in history],
                                    mode="lines+markers+text", text=[f"{r[key] or 0:,}" for r
                                                                     in history],
                                    textposition="top center", cliponaxis=False),
                         row=row, col=1)
        figure.update_yaxes(title_text=name, rangemode="tozero", row=row, col=1)
    figure.update_layout(showlegend=False)
    figure.update_xaxes(title_text="release", type="category", row=len(series), col=1)
    return [Chart("releases", "Releases", "Every release the public cloud has seen, and the "
                  "input each came from (in the table): the records published so far, those "
                  "held back in the private buffer until they can be placed safely, and the "
                  "public chunks.", figure,
                  ["release", "kind", "input", "created", "records", "appended", "buffered",
                   "public chunks", "public subrecords", "public occurrences"],
                  [[r["version"], r["kind"], r.get("input") or "not logged", r["created"],
                    r["records"], r["appended"], r["buffered"], r["public_chunks"],
                    r["public_subrecords"], r["public_occurrences"]] for r in history],
                  tall=True)]


def utc(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.timezone.utc).isoformat(timespec="seconds")


def _ledger(ledger: dict) -> list[Chart]:
    users = ledger["users"]
    unit = {r["name"]: r["definition"] for r in ledger["roles"]}  # α (pure) or ρ (zCDP)
    # One panel per unit: an α and a ρ are not one quantity, so never on one axis.
    shown_units = [d for d in (PURE, ZCDP) if any(unit[u["role"]] == d for u in users)] or [PURE]
    budget = make_subplots(rows=1, cols=len(shown_units), horizontal_spacing=0.12)
    for col, definition in enumerate(shown_units, start=1):
        theirs = [u for u in users if unit[u["role"]] == definition]
        for key in ("spent", "remaining"):
            budget.add_trace(_bar([u["name"] for u in theirs], [u[key] for u in theirs],
                                  "%{y:.4~g}", name=f"{key} ({SYMBOL[definition]})"),
                             row=1, col=col)
        budget.update_yaxes(title_text=f"{SYMBOL[definition]} ({definition})",
                            rangemode="tozero", row=1, col=col)
    budget.update_layout(barmode="group")
    charts = [Chart("budget", "Privacy budget per user",
                    "What each analyst has spent of their role's budget and what is left, in "
                    f"α for pure-DP roles and ρ for zCDP ones ({dataset_budget_text(ledger)}).",
                    budget, ["user", "role", "per query", "budget", "spent", "remaining",
                             "active"],
                    [[u["name"], u["role"], f"{SYMBOL[unit[u['role']]]}={u['alpha']:g}",
                      u["budget"], u["spent"], u["remaining"], "yes" if u["active"] else "no"]
                     for u in users])]
    spent = [(c["at"], c["user"], c["alpha"], c["spent"], unit.get(c["role"], PURE))
             for c in ledger["charges"]]
    shown = "Every charge" if len(spent) == ledger["charge_count"] else \
        f"The last {len(spent):,} of {ledger['charge_count']:,} charges"
    over_time = go.Figure([go.Scatter(name=name, mode="lines+markers",
                                      x=[utc(c[0]) for c in spent if c[1] == name],
                                      y=[c[3] for c in spent if c[1] == name],
                                      line_shape="hv")
                           for name in dict.fromkeys(c[1] for c in spent)])
    over_time.update_layout(yaxis_title=" or ".join(f"{SYMBOL[d]} spent" for d in
                                                    dict.fromkeys(c[4] for c in spent))
                            or "α spent", xaxis_title="time (UTC)")
    charts.append(Chart("spent-over-time", "Budget spent over time",
                        f"{shown}, cumulated per user (each in their role's unit).", over_time,
                        ["time (UTC)", "user", "charged", "spent so far"],
                        [[utc(at), user, f"{SYMBOL[d]}={alpha:g}", round(total, 12)]
                         for at, user, alpha, total, d in spent]))
    refused = ledger["refusals"]
    by_user = Counter()
    for r in refused:
        by_user[r["user"], r["status"]] += r["count"]
    figure = go.Figure(_bar([f"{u} ({s})" for u, s in by_user], list(by_user.values())))
    figure.update_layout(yaxis_title="refused requests")
    charts.append(Chart("refusals", "Refused requests",
                        "Requests of known analysts that were refused (403: disabled; 429: "
                        "budget spent), per user and status. Unknown tokens name nobody and go "
                        "to the server's log only.", figure,
                        ["first (UTC)", "last (UTC)", "user", "status", "reason", "requests"],
                        [[utc(r["first_at"]), utc(r["last_at"]), r["user"], r["status"],
                          r["reason"], r["count"]] for r in refused]))
    return charts


def _tables(tables: list[dict]) -> list[Chart]:
    charts = []
    for table in tables:
        log, name = table["releases"], table["name"]
        level = ", ".join(f"{k} = {v:g}" for k, v in table["level"].items())
        figure = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
        for col, (key, label) in enumerate((("partitions", "partitions"),
                                            ("buffered", "tuples buffered")), start=1):
            figure.add_trace(_bar([e["version"] for e in log], [e[key] for e in log],
                                  name=label), row=1, col=col)
            figure.update_xaxes(title_text="release", type="category", row=1, col=col)
            figure.update_yaxes(title_text=label, rangemode="tozero", row=1, col=col)
        figure.update_layout(showlegend=False)
        charts.append(Chart(f"table-{name}", f"Table {name} ({table['model']}, {level})",
                            "Each release of the table: its partitions (equivalence classes) "
                            "and the tuples held back in the private zone until they can be "
                            "placed safely.", figure,
                            ["release", "kind", "created", "partitions", "buffered"],
                            [[e["version"], e["kind"], e["created"], e["partitions"],
                              e["buffered"]] for e in log]))
        ranged = [p for p in table["partitions"] if "min" in p]
        if ranged:
            figure = go.Figure(_bar([p["id"] for p in ranged],
                                    [p["max"] - p["min"] for p in ranged], "%{text}",
                                    base=[p["min"] for p in ranged],
                                    text=[f"{p['min']:g}–{p['max']:g}" for p in ranged]))
            figure.update_layout(xaxis_title="partition", yaxis_title="sensitive value range")
            charts.append(Chart(f"table-{name}-ranges", f"Table {name}: ranges of the current "
                                "release", "Each partition's range of sensitive values (a bar "
                                "from its smallest to its largest value), what an attacker who "
                                "finds a person's partition learns.", figure,
                                ["partition", "tuples", "distinct", "min", "max"],
                                [[p["id"], p["tuples"], p["distinct"], p["min"], p["max"]]
                                 for p in ranged]))
    return charts


def _rankings(rankings: list[dict]) -> str:
    columns = ["name", "version", "defense", "tuples", "versions", "audit"]
    return _table(columns, [[r[c] for c in columns] for r in rankings])


def _poller(report: dict, refresh: str | None) -> str:
    if refresh is None:
        return ""
    return ("<script>setInterval(async () => { const r = await fetch("
            f"{json.dumps(refresh)}, {{credentials: 'same-origin'}}); if (r.ok && "
            f"(await r.json()).version !== {json.dumps(report.get('version'))}) "
            "location.reload(); }, 2000);</script>")
