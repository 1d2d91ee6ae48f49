# %% [markdown]
# # The analyst's notebook: discover, ask, plot with intervals, budget and history
#
# An analyst holds two things from the data owner: the address of the overlay service
# (`cocktail serve`) and a token, a secret tied to a role with a privacy budget. Never the
# store, never an exact count: every answer is noisy (differentially private) and comes with
# its expected error and a confidence interval. The owner makes them so (docs/analyst-client.md,
# "A service to ask"):
#
# ```sh
# cocktail roles add analyst --alpha 0.1 --budget 2     # the role: what a query costs, in all
# cocktail users add ann --role analyst --out ann.token     # the token, handed to ann in private
# cocktail serve --port 8080                            # the service, at http://HOST:8080
# ```
#
# The analyst puts them in the environment before starting Jupyter, so that no secret is
# written in the notebook:
#
# ```sh
# export COCKTAIL_URL=http://HOST:8080 COCKTAIL_TOKEN=$(cat ann.token)
# ```
#
# `cocktail.Client` needs only the core install and, for DataFrames, the `frames` extra;
# the plot needs plotly (`pip install 'cocktail-privacy[frames]' plotly`).

# %%
import os

import pandas as pd
import plotly.graph_objects as go

import cocktail

client = cocktail.Client(os.environ["COCKTAIL_URL"], os.environ["COCKTAIL_TOKEN"])
budget = client.budget()
print(f"budget {budget['budget']}, spent {budget['spent']}, remaining {budget['remaining']}")

# %% [markdown]
# ## Discover what may be asked
#
# The rankings served, with what is public of each, and the terms that occur in public chunks:
# a query may name these. They are public by construction (the public cloud holds those
# chunks); a term only private chunks hold is never listed, and a query naming an unlisted term
# is refused free of charge (a typo costs nothing).

# %%
rankings = client.rankings().to_pandas()
rankings

# %%
terms = client.terms()
print(len(terms), "public terms, the first:", terms[:10])

# %% [markdown]
# ## Preview: one query
#
# One count, to see what an answer holds: the noisy answer, its expected RMS error, a
# confidence interval (95% unless `level` says otherwise; `ci_method` says how it is computed,
# docs/dp.md), and what it cost.

# %%
client.query(f"count({terms[0]})").to_pandas()

# %% [markdown]
# ## A batch into a DataFrame
#
# A batch is answered together, as one release and one charge: the service picks a strategy
# that spends the budget where the batch needs it.

# %%
a, b, c, d = terms[:4]
batch = [f"count({t})" for t in terms[:6]] + [f"count({a} & {b})", f"count({c} & {d})",
                                              f"count({a}) - count({b})"]
answers = client.batch(batch).to_pandas()
answers[["query", "answer", "rms_error", "ci_low", "ci_high", "ci_method", "spent"]]

# %% [markdown]
# ## The answers with their intervals
#
# The noise is what hides whether any one record is in the data: its scale does not shrink
# with the counts, so rare terms' intervals reach below zero, and a batch that shares one
# charge among more queries gives each a wider interval.

# %%
figure = go.Figure(go.Bar(
    x=answers["query"], y=answers["answer"],
    error_y={"type": "data", "symmetric": False,
             "array": answers["ci_high"] - answers["answer"],
             "arrayminus": answers["answer"] - answers["ci_low"]}))
figure.update_layout(title="Noisy answers, with 95% confidence intervals",
                     yaxis_title="count", xaxis_tickangle=-30)
figure

# %% [markdown]
# ## Asking again is free
#
# The same batch again gets the same answers, reused: nothing is charged, and nothing new is
# revealed.

# %%
again = client.batch(batch).to_pandas()
assert again["reused"].all() and (again["spent"] == 0).all()
assert again["answer"].tolist() == answers["answer"].tolist()

# %% [markdown]
# ## Budget and history
#
# The history is the analyst's own charged answers, from the owner's ledger: a row per query,
# with when and what it was charged (a batch's charge shows on each of its rows). What it
# charged adds up to the budget spent.

# %%
budget = client.budget()
pd.Series(budget)

# %%
history = client.history().to_pandas()
assert round(history.drop_duplicates("at")["spent"].sum(), 9) == budget["spent"]
history[["at", "query", "answer", "ci_low", "ci_high", "spent", "version"]]

# %%
client.close()
