"""The owner's report and dashboard: numbers equal to publish/audit/ledger and to brute force on
the raw data, the page opened in a real headless Chromium (every chart drawn, every table
there, no console error), the dashboard refusing analyst tokens and following CURRENT, and
an analyst's page holding their own budget and answers only."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.dataset import load
from cocktail.dp.ledger import BudgetExhausted, Ledger
from cocktail.private_config import ledger_location
from cocktail.store import LocalStore

from .served import auth, in_process, serve, until

RUN = CliRunner()
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no Chromium: install Debian's chromium and chromium-driver (.ci/run does)")
CHARTS = 14  # coverage, 4 distributions, private per cluster, fan-out, audit, releases, 3 budget,
#              a (k,e) table's releases and its ranges


def cli(*args: str) -> dict:
    result = RUN.invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def owned(tmp_path_factory) -> dict:
    """A published store whose ledger has an analyst with charges and a refusal."""
    root = tmp_path_factory.mktemp("report")
    data, store = root / "d.dat", root / "s"
    RUN.invoke(main, ["generate", str(data), "--records", "4000", "--seed", "3"])
    published = cli("publish", str(data), "--store", str(store), "--k", "5", "--m", "2")
    people = root / "people.csv"
    people.write_text("age,sex,salary\n" + "".join(
        f"{20 + i % 40},{'FM'[i % 2]},{1000 + (i * 37) % 900}\n" for i in range(200)))
    table = cli("table", "publish", str(people), "--qi", "age,sex", "--sensitive", "salary",
                "--distinct", "3", "--range", "100", "--store", str(store))
    audited = cli("audit", "--store", str(store))  # the baskets and the table
    ledger = Ledger(ledger_location(LocalStore(str(store))))
    ledger.add_role("analyst", alpha=0.5, budget=1.0)
    token = ledger.add_user("ann", "analyst")
    ledger.add_role("other", alpha=1.0, budget=1.0)
    other = ledger.add_user("bob", "other")
    user = ledger.authenticate(token)
    for workload in ("count(1)", "count(2)"):
        ledger.fulfil(ledger.reserve(user, published["version"], workload),
                      {"workload": workload, "answers": [1.0]})
    with pytest.raises(BudgetExhausted):
        ledger.reserve(user, published["version"], "count(3)")
    return {"root": root, "data": data, "store": store, "published": published,
            "audited": audited, "table": table, "ledger": ledger, "token": token, "other": other,
            "owner": ledger.new_owner_token()}


def test_the_reports_numbers_are_those_of_publish_audit_the_ledger_and_the_raw_data(owned):
    report = cli("report", "--store", str(owned["store"]), "--out",
                 str(owned["root"] / "r.html"))
    publication, published = report["publication"], owned["published"]
    for key in ("version", "k", "m", "method", "records", "clusters", "aggregated_clusters",
                "public_chunks", "private_chunks", "public_subrecords", "private_subrecords",
                "private_terms", "private_term_share", "private_before_aggregation"):
        assert publication[key] == published[key], key
    assert report["audit"] == owned["audited"]
    [release] = report["releases"]
    assert (release["public_chunks"], release["public_subrecords"],
            release["public_occurrences"]) == (published["public_chunks"],
                                               published["public_subrecords"],
                                               publication["coverage"]["public_occurrences"])
    # coverage against brute force on the raw records
    records = load(owned["data"]).records
    support = Counter(t for r in records for t in r)
    coverage = publication["coverage"]
    assert coverage["occurrences"] == sum(support.values())
    assert coverage["floor_occurrences"] == sum(s for s in support.values() if s < 5)
    assert coverage["terms"] == len(support)
    assert coverage["terms_below_k"] == sum(s < 5 for s in support.values())
    assert coverage["private_occurrences"] >= coverage["floor_occurrences"]
    shape = report["distributions"]
    assert sum(shape["cluster_sizes"]) == published["records"] == len(records)
    assert sum(shape["subrecords_per_chunk"]) == published["public_subrecords"]
    assert sum(r["before"] for r in shape["private_per_cluster"]) == \
        published["private_before_aggregation"]["private_subrecords"]
    assert sum(r["after"] for r in shape["private_per_cluster"]) == \
        published["private_subrecords"]
    ledger = report["ledger"]
    assert [(u["name"], u["spent"], u["remaining"]) for u in ledger["users"]] == \
        [("ann", 1.0, 0.0), ("bob", 0.0, 1.0)]
    assert [c["alpha"] for c in ledger["charges"]] == [0.5, 0.5]
    assert [(r["user"], r["status"]) for r in ledger["refusals"]] == [("ann", 429)]
    assert Path(report["out"]).stat().st_size > 1_000_000  # plotly.js inlined
    [table] = report["tables"]
    assert (table["name"], table["model"], table["level"]) == ("table", "ke", {"k": 3, "e": 100})
    assert len(table["partitions"]) == table["releases"][0]["partitions"] == \
        owned["table"]["partitions"]
    assert sum(p["tuples"] for p in table["partitions"]) == owned["table"]["tuples"]
    assert all(p["max"] - p["min"] >= 100 and p["distinct"] >= 3 for p in table["partitions"])


def browser(tmp_path: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--window-size=1280,2000",
                 f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def drawn(driver, charts: int) -> list:
    """Wait until ``charts`` figures each hold a drawn plot (plotly's SVG) and a data table."""
    from selenium.webdriver.common.by import By

    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + 30
    while True:
        figures = driver.find_elements(By.CSS_SELECTOR, "figure.chart")
        try:
            done = [f for f in figures if f.find_elements(By.CSS_SELECTOR, ".main-svg")
                    and f.find_elements(By.CSS_SELECTOR, "table.data")]
        except StaleElementReferenceException:  # redrawn while read: look again
            done = []
        if len(done) == len(figures) == charts or time.monotonic() > deadline:
            return figures
        time.sleep(0.2)


def text_of(driver, selector: str) -> str:
    """The element's text, or "" if the page replaced it while it was read (a dashboard
    that follows a new release redraws itself)."""
    from selenium.common.exceptions import NoSuchElementException, \
        StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        return driver.find_element(By.CSS_SELECTOR, selector).text
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def errors(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@needs_browser
def test_the_report_opens_in_chromium_with_every_chart_and_table_and_no_error(owned, tmp_path):
    page = owned["root"] / "browser.html"
    cli("report", "--store", str(owned["store"]), "--out", str(page))
    driver = browser(tmp_path)
    try:
        driver.get(page.as_uri())
        figures = drawn(driver, CHARTS)
        assert len(figures) == CHARTS
        ids = {f.get_attribute("id") for f in figures}
        assert {"figure-coverage", "figure-audit", "figure-budget", "figure-refusals",
                "figure-table-table-ranges"} <= ids
        assert errors(driver) == []
        check_what_each_chart_shows(shown(driver), cli("report", "--store", str(owned["store"]),
                                                       "--out", str(tmp_path / "r.html")))
        driver.save_screenshot(str(tmp_path / "report.png"))
    finally:
        driver.quit()


def shown(driver) -> dict:
    """Each chart as Chromium holds it: plotly's traces and axes, the text it drew, and the
    drawn height of each bar (px)."""
    return driver.execute_script("""
        const charts = {};
        for (const gd of document.querySelectorAll('figure.chart .js-plotly-plot')) {
            const layout = gd._fullLayout;
            charts[gd.id] = {
                traces: gd._fullData.map(t => ({type: t.type, name: t.name, yaxis: t.yaxis,
                    x: Array.from(t.x || []), y: Array.from(t.y || []), value: t.value,
                    labelled: Boolean(t.texttemplate || (t.text && t.text.length))})),
                log: Object.keys(layout).filter(k => /^[xy]axis[0-9]*$/.test(k)
                                                     && layout[k].type === 'log'),
                text: Array.from(gd.querySelectorAll('text'), e => e.textContent),
                bars: Array.from(gd.querySelectorAll('.bars .point path'),
                                 p => p.getBoundingClientRect().height)};
        }
        return charts;""")


def check_what_each_chart_shows(charts: dict, report: dict) -> None:
    """No log axis (a zero must show); every bar labelled with its value; the coverage's
    kinds, the audit's counts and the releases' quantities each on an axis (or a number) of
    their own, every private share drawn (a bar of some height) and written."""
    for name, chart in charts.items():
        assert chart["log"] == [], name
        assert all(t["labelled"] for t in chart["traces"] if t["type"] == "bar"), name
    coverage, c = charts["coverage"], report["publication"]["coverage"]
    assert len({t["yaxis"] for t in coverage["traces"]}) == 3  # occurrences, records, terms
    for private, total in (("private_occurrences", "occurrences"),
                           ("records_with_private", "records"), ("terms_with_private", "terms")):
        share = 100 * c[private] / c[total]
        assert 0 < share and f"{share:.2f}%" in coverage["text"], (private, coverage["text"])
    # the private bar is its panel's tallest (private >= floor), never a sliver
    assert len(coverage["bars"]) == 5 and sorted(coverage["bars"])[-3] > 100
    audit, a = charts["audit"], report["audit"]
    assert [t["type"] for t in audit["traces"]] == ["indicator"] * 4
    assert [t["value"] for t in audit["traces"]] == [a["chunks"], a["subrecords"],
                                                       a["itemsets_checked"], 0]
    assert "0" in audit["text"]  # no violations, and it shows
    releases = charts["releases"]
    assert [t["name"] for t in releases["traces"]] == ["records published", "records buffered",
                                                        "public chunks"]
    assert len({t["yaxis"] for t in releases["traces"]}) == 3
    [table] = report["tables"]
    assert len({t["yaxis"] for t in charts[f"table-{table['name']}"]["traces"]}) == 2


def sign_in(client: httpx.Client, path: str, token: str, origin: str | None = None,
            form: str | None = None) -> httpx.Response:
    """Post the sign-in form of ``path`` as a browser would: its token from the page, and the
    page's Origin (unless given others)."""
    shown = client.get(path)
    token_of_form = re.search(r"name='form' value='([0-9a-f]+)'", shown.text).group(1)
    return client.post(path + "/login", data={"token": token, "form": form or token_of_form},
                       headers={"Origin": origin or str(client.base_url).rstrip("/")},
                       follow_redirects=False)


def test_the_dashboard_refuses_analyst_tokens(owned):
    with serve(owned["store"]) as (url, _):
        for token, status in ((None, 401), (owned["token"], 403), (owned["other"], 403),
                              ("nonsense", 403)):
            headers = auth(token) if token else {}
            assert httpx.get(url + "/owner", headers=headers).status_code == status
            assert httpx.get(url + "/owner/state", headers=headers).status_code == status
            with httpx.Client(base_url=url) as browser_like:
                login = sign_in(browser_like, "/owner", token or "")
            assert login.status_code == status and "cocktail_owner" not in login.cookies
        page = httpx.get(url + "/owner", headers=auth(owned["owner"]))
        assert page.status_code == 200 and "figure-coverage" in page.text
        # an analyst's page shows their own budget and answers, never another's
        mine = httpx.get(url + "/analyst", headers=auth(owned["token"])).text
        assert "ann" in mine and "count(1)" in mine and "bob" not in mine
        theirs = httpx.get(url + "/analyst", headers=auth(owned["other"])).text
        assert "count(1)" not in theirs and "ann" not in theirs


def test_the_pages_show_the_last_rows_of_the_ledger_only(owned, monkeypatch):
    """Built on every load, the pages read the whole ledger: a server's memory grew with the
    answers it stored.  They show the last PAGE_ROWS (here 1) charges and answers."""
    from cocktail.report import dashboard
    monkeypatch.setattr(dashboard, "PAGE_ROWS", 1)
    with in_process(owned["store"]) as client:
        mine = client.get("/analyst", headers=auth(owned["token"])).text
        assert "count(2)" in mine and "count(1)" not in mine
        theirs = client.get("/owner", headers=auth(owned["owner"])).text
        assert "The last 1 of 2 charges, cumulated per user" in theirs


def test_a_cross_site_sign_in_is_refused_and_sets_no_cookie(owned):
    """The attacker's page posts the victim's browser to the sign-in form (login CSRF: the
    victim then works under the attacker's account, or the reverse): refused 403 and no session
    cookie, whatever half of the defence it gets past."""
    here = "http://127.0.0.1:8080"
    with in_process(owned["store"]) as client:
        for path, token, cookie in (("/owner", owned["owner"], "cocktail_owner"),
                                    ("/analyst", owned["token"], "cocktail_analyst")):
            other = "/analyst" if path == "/owner" else "/owner"
            stolen = re.search(r"value='([0-9a-f]+)'", client.get(other).text).group(1)
            for attack in ({"origin": "https://evil.example"},  # the form's own token, foreign
                           {"origin": "null"},  # a sandboxed frame
                           {"form": "0" * 64},  # same origin, no valid token
                           {"form": stolen}):  # the token of another form
                client.cookies.clear()
                refused = sign_in(client, path, token, **attack)
                assert refused.status_code == 403, (path, attack)
                assert cookie not in refused.cookies and cookie not in client.cookies
            client.cookies.clear()
            shown = client.get(path).text
            form = re.search(r"value='([0-9a-f]+)'", shown).group(1)
            bare = client.post(path + "/login", data={"token": token, "form": form},
                               follow_redirects=False)
            assert bare.status_code == 403 and cookie not in bare.cookies  # no Origin, no Referer
            client.cookies.clear()
            signed = sign_in(client, path, token, origin=here)
            assert signed.status_code == 303 and cookie in signed.cookies
            client.cookies.clear()
            client.get(path)
            by_referer = client.post(path + "/login", data={"token": token, "form": form},
                                     headers={"Referer": here + path}, follow_redirects=False)
            assert by_referer.status_code == 403  # the form of the page before: a new token now
            form = re.search(r"value='([0-9a-f]+)'", client.get(path).text).group(1)
            by_referer = client.post(path + "/login", data={"token": token, "form": form},
                                     headers={"Referer": here + path}, follow_redirects=False)
            assert by_referer.status_code == 303 and cookie in by_referer.cookies
            client.cookies.clear()


def test_every_inline_script_of_the_pages_carries_the_replys_nonce(owned):
    with in_process(owned["store"]) as client:
        for path, token in (("/owner", owned["owner"]), ("/analyst", owned["token"]),
                            ("/owner", None), ("/docs", None)):
            reply = client.get(path, headers=auth(token) if token else {})
            policy = reply.headers["content-security-policy"]
            [nonce] = re.findall(r"'nonce-([^']+)'", policy)
            scripts = re.findall(r"<script[^>]*>", reply.text)
            assert scripts or path != "/owner" or token is None
            assert all(f'nonce="{nonce}"' in tag for tag in scripts), (path, scripts[:3])
            assert "'unsafe-eval'" not in policy and "frame-ancestors 'none'" in policy
        other = client.get("/owner", headers=auth(owned["owner"])).headers
        assert re.findall(r"'nonce-([^']+)'", other["content-security-policy"]) != [nonce]


def test_the_report_file_is_readable_by_its_owner_only_whatever_the_umask(owned, tmp_path):
    out = tmp_path / "report.html"
    out.write_text("an older report, world-readable")
    out.chmod(0o644)
    fresh = tmp_path / "fresh.html"
    previous = os.umask(0)
    try:
        for path in (out, fresh):
            cli("report", "--store", str(owned["store"]), "--out", str(path))
            assert path.stat().st_mode & 0o777 == 0o600, oct(path.stat().st_mode)
    finally:
        os.umask(previous)


@needs_browser
def test_the_dashboard_signs_the_owner_in_and_follows_a_new_release(owned, tmp_path):
    from selenium.webdriver.common.by import By

    more = owned["root"] / "more.dat"
    RUN.invoke(main, ["generate", str(more), "--records", "300", "--seed", "4"])
    with serve(owned["store"]) as (url, _):
        driver = browser(tmp_path)
        try:
            driver.get(url + "/analyst")
            driver.find_element(By.ID, "token").send_keys(owned["token"])
            driver.find_element(By.ID, "sign-in").click()
            # The sign-in is a form post: under load the next page is not there at once.
            assert until(lambda: driver.find_elements(By.ID, "remaining"))
            assert driver.find_element(By.ID, "remaining").text.startswith("0")
            assert len(driver.find_elements(By.CSS_SELECTOR, "#answers tbody tr")) == 2
            driver.get(url + "/owner")  # the analyst's cookie is not the owner's
            assert not driver.find_elements(By.CSS_SELECTOR, "figure.chart")
            driver.find_element(By.ID, "token").send_keys(owned["token"])
            driver.find_element(By.ID, "sign-in").click()
            assert not driver.find_elements(By.CSS_SELECTOR, "figure.chart")  # refused
            driver.get(url + "/owner")
            driver.find_element(By.ID, "token").send_keys(owned["owner"])
            driver.find_element(By.ID, "sign-in").click()
            assert len(drawn(driver, CHARTS)) == CHARTS
            refused = errors(driver)  # reading the log empties it
            assert {e["message"].split(" - ")[0].rsplit("/", 1)[-1] for e in refused} <= {
                "analyst", "login", "owner"}  # the 401/403 of the refusals above, nothing else
            before = driver.find_element(By.CSS_SELECTOR, ".meta").text
            appended = cli("publish", str(more), "--store", str(owned["store"]), "--append")
            assert until(lambda: appended["version"] in text_of(driver, ".meta")), \
                "the dashboard did not follow CURRENT"
            assert appended["version"] not in before
            assert len(drawn(driver, CHARTS)) == CHARTS
            assert errors(driver) == []
            driver.save_screenshot(str(tmp_path / "dashboard.png"))
        finally:
            driver.quit()


def test_every_release_is_reported_with_what_the_public_cloud_held(tmp_path):
    data, more, store = tmp_path / "d.dat", tmp_path / "m.dat", str(tmp_path / "s")
    RUN.invoke(main, ["generate", str(data), "--records", "2000", "--seed", "5"])
    RUN.invoke(main, ["generate", str(more), "--records", "400", "--seed", "6"])
    first = cli("publish", str(data), "--store", store, "--k", "4", "--m", "2")
    second = cli("publish", str(more), "--store", store, "--append")
    report = cli("report", "--store", store, "--out", str(tmp_path / "r.html"))
    assert [r["version"] for r in report["releases"]] == [first["version"], second["version"]]
    assert [r["kind"] for r in report["releases"]] == ["fresh", "append"]
    assert [r["input"] for r in report["releases"]] == [str(data), str(more)]
    last = report["releases"][-1]
    assert last["records"] == report["publication"]["records"] == 2400
    assert last["appended"] == 400 and 0 <= last["buffered"] <= 400
    assert last["public_chunks"] == report["publication"]["public_chunks"]
    assert last["public_occurrences"] == report["publication"]["coverage"]["public_occurrences"]
    assert report["releases"][0]["public_occurrences"] <= last["public_occurrences"]


def test_a_zcdp_users_rho_is_drawn_on_its_own_axis_and_counted_dataset_wide(tmp_path):
    from cocktail.report.page import _ledger

    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("laplace", alpha=0.5, budget=1.0)
    ledger.add_role("gauss", alpha=0.25, budget=1.0, definition="zcdp")
    for name, role in (("lea", "laplace"), ("gil", "gauss")):
        user = ledger.authenticate(ledger.add_user(name, role))
        ledger.fulfil(ledger.reserve(user, "v1", "count(1)"), {"answers": [1.0]})
    budget, over_time, _ = _ledger(ledger.overview())
    axes = {trace.yaxis: [] for trace in budget.figure.data}
    for trace in budget.figure.data:
        axes[trace.yaxis] += list(trace.x)
    titles = {budget.figure.layout[f"yaxis{a[1:]}"].title.text: users for a, users in axes.items()}
    assert titles == {"α (pure)": ["lea", "lea"], "ρ (zcdp)": ["gil", "gil"]}
    assert "zCDP roles spent ρ 0.25 of no cap" in budget.caption
    assert "in all ρ = 0.375" in budget.caption  # 0.25 + 0.5²/2
    assert ["gil", "gauss", "ρ=0.25"] == budget.rows[0][:3]
    assert {row[2] for row in over_time.rows} == {"α=0.5", "ρ=0.25"}


def test_binned_distributions_have_bins_with_distinct_edges():
    from cocktail.report.page import BINS, _histogram

    values = [v for v in range(3, 250) for _ in range(v % 4)]
    rows = _histogram("x", "x", values, "size", "").rows
    assert len(rows) <= BINS and sum(n for _, n in rows) == len(values)
    ranges = [tuple(int(edge.replace(",", "")) for edge in label.split("–")) for label, _ in rows]
    assert ranges[0][0] == 3 and ranges[-1][1] >= 249
    for (_, last), (first, _) in zip(ranges, ranges[1:]):
        assert first == last + 1  # the next bin starts past the last one's end
    for (first, last), (_, n) in zip(ranges, rows):
        assert n == sum(first <= v <= last for v in values)
