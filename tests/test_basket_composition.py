"""The composition attack on Cocktail publications (`cocktail attack composition` on basket
stores): a hand-built fixture with known answers, the attacker checked against brute force,
and the leak measured on overlapping BMS-WebView-2 samples with and without
`--sensitive-terms` (which keeps sensitive terms out of every chunk holding another term)."""

from __future__ import annotations

import json
import random
from collections import Counter
from itertools import chain, combinations
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail.attacks.chunk_composition import BasketRelease, attack_victim, \
    basket_composition
from cocktail.cli import main
from cocktail.dataset import load
from cocktail.query import Publication
from cocktail.store import LocalStore

WV2 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "bms-webview-2.dat"
SENSITIVE = frozenset({"flu", "hiv", "cancer"})
F = frozenset


def hospitals() -> list[BasketRelease]:
    """Nancy (a, flu) is in both: A's candidates for {a} are flu or hiv, B's flu or cancer,
    over the same sensitive domain — only flu fits both.  Pat (c, flu) is given away by A
    alone: both of A's candidates for {c} hold flu."""
    truth = {"nancy": F({"a", "flu"}), "pat": F({"c", "flu"})}
    a = BasketRelease.from_chunks("A", 1, SENSITIVE, [
        (F({"a", "flu", "hiv", "cancer"}), [F({"a", "flu"}), F({"a", "hiv"}), F({"cancer"})]),
        (F({"c", "flu"}), [F({"c", "flu"}), F({"c", "flu"})])],
        {**truth, "p1": F({"a", "hiv"}), "x1": F({"cancer"}), "y1": F({"c", "flu"})})
    b = BasketRelease.from_chunks("B", 1, SENSITIVE, [
        (F({"a", "flu", "hiv", "cancer"}), [F({"a", "flu"}), F({"a", "cancer"}), F({"hiv"})]),
        (F({"c", "flu", "hiv"}), [F({"c", "flu"}), F({"c", "hiv"})])],
        {**truth, "p2": F({"a", "cancer"}), "x2": F({"hiv"}), "y2": F({"c", "hiv"})})
    return [a, b]


def test_hospitals_fixture():
    report = basket_composition(hospitals(), SENSITIVE, 1)
    assert (report.overlapping, report.attacked) == (2, 2)
    assert report.certain_disclosures == 1   # Nancy, by composition only
    assert report.disclosed_alone == 1       # Pat, by A alone
    assert report.misled == 0
    assert (report.candidates_min, report.candidates_median) == (2, 2)
    assert report.attacker_accuracy == 1.0   # flu, for both
    assert report.baseline_accuracy == 1.0   # flu is also the most common term shown


def test_one_release_alone_is_refused():
    with pytest.raises(ValueError, match="two releases"):
        basket_composition(hospitals()[:1], SENSITIVE, 1)


def brute_force_certain(located: list[Counter]) -> frozenset[str] | None:
    """Every sensitive set T that some candidate of every release shows exactly (T ∩ D = c);
    the terms in all of them."""
    domain = sorted(F().union(*(c.domain for cands in located for c in cands)))
    possible = [F(t) for t in chain.from_iterable(combinations(domain, n)
                                                  for n in range(len(domain) + 1))
                if all(any(F(t) & c.domain == c.content for c in cands) for cands in located)]
    return F.intersection(*possible) if possible else None


def test_the_attacker_agrees_with_brute_force():
    rng = random.Random(7)
    terms = ["s1", "s2", "s3", "s4"]
    for _ in range(300):
        releases = []
        for label in ("A", "B", "C")[:rng.choice((2, 3))]:
            chunks = []
            for _ in range(rng.randint(1, 3)):
                domain = F(rng.sample(terms, rng.randint(1, 4)))
                subs = [F({"q"} | set(rng.sample(sorted(domain), rng.randint(0, len(domain)))))
                        for _ in range(rng.randint(1, 4))]
                chunks.append((domain | {"q"}, subs))
            releases.append(BasketRelease.from_chunks(label, 1, F(terms), chunks, {}))
        located = [r.candidates(F({"q"})) for r in releases]
        outcome = attack_victim(located)
        expected = brute_force_certain(located)
        assert (outcome.certain_joint if outcome else None) == expected


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """Two publishers of BMS-WebView-2: disjoint bases of 6,000 and a shared pool of 4,000,
    ids kept so that the tool matches people; the 20 most frequent terms are sensitive."""
    if not WV2.exists():
        pytest.skip(f"{WV2} is missing (the shared datasets are not mounted)")
    records = list(load(WV2).records)
    order = list(range(len(records)))
    random.Random(1).shuffle(order)
    base, pool = order[:12_000], order[12_000:16_000]
    root = tmp_path_factory.mktemp("samples")
    paths = []
    for n, own in enumerate((base[:6_000], base[6_000:])):
        path = root / f"publisher{n}.jsonl"
        path.write_text("".join(json.dumps({"id": str(i), "terms": sorted(records[i])}) + "\n"
                                for i in sorted(own + pool)))
        paths.append(path)
    support = Counter(t for i in order[:16_000] for t in records[i])
    sensitive = sorted(support, key=lambda t: (-support[t], t))[:20]
    terms_file = root / "sensitive.txt"
    terms_file.write_text("\n".join(sensitive) + "\n")
    return paths, terms_file, F(sensitive)


def publish(path: Path, store: Path, *extra: str) -> dict:
    result = CliRunner().invoke(main, ["publish", str(path), "--store", str(store), "--k", "5",
                                       "--m", "2", "--json", *extra])
    assert result.exit_code == 0, result.output
    audited = CliRunner().invoke(main, ["audit", "--store", str(store), "--json"])
    assert audited.exit_code == 0 and json.loads(audited.output)["ok"], audited.output
    return json.loads(result.output)


def attack(stores: list[Path], *extra: str) -> dict:
    args = ["attack", "composition", "--json", *extra]
    for store in stores:
        args += ["--release", str(store)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_overlapping_publishers_leak_and_sensitive_terms_stop_it(samples, tmp_path):
    paths, terms_file, sensitive = samples
    plain = [tmp_path / f"plain{n}" for n in range(2)]
    for path, store in zip(paths, plain):
        publish(path, store)
    leaked = attack(plain, "--sensitive-terms", str(terms_file))
    assert leaked["overlapping"] == 4_000 and leaked["known_terms"] == 2
    assert leaked["candidates_min"] >= 5                       # each release is 5^2-anonymous
    assert leaked["certain_disclosures"] > 0                   # ... and yet, composed
    assert leaked["attacker_accuracy"] > leaked["baseline_accuracy"]

    cloned = [tmp_path / f"cloned{n}" for n in range(2)]
    for path, store in zip(paths, cloned):
        assert publish(path, store, "--sensitive-terms", str(terms_file))["rho"] < 0.05
    for store in cloned:  # the precondition: no public subrecord ties a sensitive term to Q
        publication = Publication.open(LocalStore(store))
        for chunk in publication.chunks.values():
            assert chunk.private or chunk.terms <= sensitive or not chunk.terms & sensitive
    safe = attack(cloned)  # the terms the stores were published with
    assert safe["overlapping"] == 4_000 and safe["attacked"] > 0
    assert safe["certain_disclosures"] == 0 and safe["disclosed_alone"] == 0
    assert safe["attacker_accuracy"] == safe["baseline_accuracy"]


def test_bad_invocations(samples, tmp_path):
    paths, terms_file, _ = samples
    store = tmp_path / "plain"
    publish(paths[0], store)
    runner = CliRunner()
    alone = runner.invoke(main, ["attack", "composition", "--release", str(store)])
    assert alone.exit_code == 2 and "two releases or more" in alone.output
    unnamed = runner.invoke(main, ["attack", "composition", "--release", str(store),
                                   "--release", str(store), "--json"])
    assert unnamed.exit_code != 0 and "--sensitive-terms" in json.loads(unnamed.output)["error"]
    table = tmp_path / "tables"
    mixed = runner.invoke(main, ["attack", "composition", "--release", str(store),
                                 "--release", f"{table}#t"])
    assert mixed.exit_code == 2 and "mix" in mixed.output
