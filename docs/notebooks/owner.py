# %% [markdown]
# # The data owner's notebook: publish, append, audit, report
#
# A data owner holds baskets (a record id and its terms) and publishes them k^m-anonymously
# into a store: the public zone goes to the public cloud, the rest stays private. This
# notebook does it from pandas with `cocktail.OwnerStore` (docs/python-api.md has every
# method): synthetic baskets as a DataFrame, a publish, a later batch appended as a new
# release, the audits, exact counts checked against the DataFrame, the versions and the
# owner's HTML report. It needs the `owner`, `report` and `frames` extras
# (`pip install -e '.[owner,report,frames]'` in a checkout); the store lives in a temporary
# directory, removed when the kernel stops.

# %%
import tempfile
from pathlib import Path

import pandas as pd

import cocktail
from cocktail.synthetic import SyntheticSpec, generate

scratch = tempfile.TemporaryDirectory(prefix="cocktail-owner-")
work = Path(scratch.name)

# %% [markdown]
# ## Baskets as a DataFrame
#
# Cocktail's synthetic generator makes baskets with a realistic skew (a few popular terms, many
# rare ones). Data engineers keep baskets in long form, a row per (record, term): that is the
# shape `publish` takes, as a CSV file `record_id,term` would be.


# %%
def long_form(baskets, first_id: int) -> pd.DataFrame:
    """A row per (record_id, term) of ``baskets``, numbered from ``first_id``."""
    return pd.DataFrame([(f"r{n}", term) for n, basket in enumerate(baskets, first_id)
                         for term in sorted(basket)], columns=["record_id", "term"])


first = long_form(generate(SyntheticSpec(records=3000, seed=1)), first_id=1)
print(len(first), "rows,", first["record_id"].nunique(), "records,",
      first["term"].nunique(), "terms")
first.head()

# %% [markdown]
# ## Publish
#
# Every combination of up to `m` terms that an attacker might know of a record must match at
# least `k` records in the public zone (k^m-anonymity). `publish` partitions the records and
# writes the first release; its report is what `cocktail publish --json` prints.

# %%
store = cocktail.OwnerStore(work / "store", create=True)
published = store.publish(first, k=5, m=3)
print(published.version, published.records, "records:",
      published.public_chunks, "public chunks,", published.private_chunks, "private")

# %% [markdown]
# ## Append a later batch
#
# Records that arrive later are *appended*: they form a new release that cannot be composed
# with the earlier one to single a record out (docs/releases.md). A second fresh publish would
# be refused.

# %%
second = long_form(generate(SyntheticSpec(records=500, seed=2)), first_id=3001)
appended = store.append(second)
print(appended.version, appended.appended_records, "appended,",
      appended.buffered_records, "waiting in the private buffer")

# %% [markdown]
# ## Audit
#
# The audit is the independent verifier: it reads only what the public cloud holds and checks
# k^m-anonymity there. `releases=True` also checks every release against the earlier ones
# (it reads the owner's private release log). Violations come as a table, empty when it passed.

# %%
audit = store.audit()
releases = store.audit(releases=True)
print("store:", "passed" if audit.ok else "FAILED",
      "| releases:", "passed" if releases.ok else "FAILED",
      [release["kind"] for release in releases.releases])
audit.to_pandas()

# %% [markdown]
# ## Exact counts
#
# Exact answers are the owner's only (analysts get noisy ones from `cocktail serve`, see the
# analyst's notebook). They count every record, public and private, so they equal counting the
# DataFrames themselves.

# %%
everything = pd.concat([first, second])
popular = everything["term"].value_counts().index[:3].tolist()
a, b, c = popular
queries = [f"count({a})", f"count({a} & {b})", f"count({a} & {b} & {c})",
           f"count({b}) - count({a} & {b})"]
exact = store.exact_batch(queries).to_pandas()

baskets = everything.groupby("record_id")["term"].agg(set)  # the baskets, from the rows


def count(*terms) -> int:
    return int(baskets.map(set(terms).issubset).sum())


exact["by pandas"] = [count(a), count(a, b), count(a, b, c), count(b) - count(a, b)]
assert (exact["answer"] == exact["by pandas"]).all()
exact

# %% [markdown]
# ## Versions and the report
#
# Each publish or append is a version; the store keeps the recent ones' files. The report is
# the owner's HTML page of coverage, shape, audit, releases and budget: open it in a browser
# (it is the owner's only: it shows private numbers).

# %%
versions = store.versions().to_pandas()
versions[["version", "kind", "records", "appended", "public_chunks", "kept", "current"]]

# %%
report = store.report(work / "report.html")
print(f"wrote {report} ({report.stat().st_size // 1024} KiB)")
