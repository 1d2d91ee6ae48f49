"""The bodies the HTTP API reads and writes (pydantic models): what the OpenAPI document shows."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from ..dp.limits import LIMITS
from ..dp.intervals import DEFAULT_LEVEL
from ..dp.objectives import DEFAULT_OBJECTIVE, OBJECTIVES
from ..rank.model import MAX_K


_TEXT = Field(min_length=1, max_length=LIMITS.text_bytes,
              description="The query language: docs/dp.md (at most text_bytes UTF-8 bytes).")


def _not_text(value):
    if isinstance(value, (str, bool)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


# JSON Schema's integer: 10.0 is one (pydantic's strict mode refuses it, and Schemathesis sends
# it), "10" and true are not (its lax mode takes them).
_JsonInt = Annotated[int, Field(strict=False), BeforeValidator(_not_text)]


# Strict: a number is one in the JSON ("0.05" is 422, as the schema says), not whatever
# pydantic's lax mode can coerce; a JSON int is still a float.
class _Asked(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    objective: Literal[OBJECTIVES] = Field(  # type: ignore[valid-type]
        DEFAULT_OBJECTIVE, description="total (the default): the lowest total error; "
                                       "per-query: no query worse than the best fixed "
                                       "strategy.")
    alpha: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="The α to spend (the privacy parameter of this release), from alpha_floor "
                    "times the role's α per query up to it; by default the role's.  A smaller "
                    "α costs less budget and adds more noise.  Another α is another release, "
                    "charged anew.")
    rho: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="For a role under zCDP (its budget in ρ): the ρ to spend, as alpha is "
                    "for a role under pure DP; each role takes only its own.")
    allow_unlisted: bool = Field(
        False, description="Answer, and charge, a query naming a term that occurs in no "
                           "public chunk (GET /v1/terms); without it such a query is refused "
                           "(400, limit public_terms), free.")
    level: float = Field(
        DEFAULT_LEVEL, gt=0, lt=1, allow_inf_nan=False,
        description="The confidence level of the answer's intervals (docs/dp.md, \"Confidence "
                    "intervals\"): post-processing, so any level is free and reuses the "
                    "same answer.")


class OneQuery(_Asked):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"query": "2*count(a) - count(b & c)"}]})
    query: str = _TEXT

    @property
    def text(self) -> str:
        return self.query


class Batch(_Asked):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"batch": ["count(a)", "count(a & b)"], "objective": "per-query"}]})
    batch: list[Annotated[str, Field(min_length=1)]] = Field(
        min_length=1, max_length=LIMITS.queries,
        description="Linear queries answered together (one charge).")

    @property
    def text(self) -> str:
        return "\n".join(self.batch)


class RankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"query": "city=a,religion=x", "k": 10, "name": "ranking"}]})
    query: str = Field(min_length=1, max_length=LIMITS.text_bytes,
                       description="column=value pairs, comma-separated: docs/ranked-retrieval.md")
    k: _JsonInt = Field(10, ge=1, le=MAX_K)
    name: str = Field("ranking", min_length=1, max_length=LIMITS.term_bytes)


class Budget(BaseModel):
    """A user's budget, in α (pure DP) or in ρ (a role under zCDP: ``definition``)."""
    user: str
    role: str
    alpha_per_query: float | None = None
    rho_per_query: float | None = Field(None, description="A role under zCDP.")
    definition: Literal["zcdp"] | None = Field(None, description="Absent under pure DP.")
    budget: float
    spent: float
    remaining: float
    dataset_budget: float | None
    dataset_spent: float
    dataset_rho_budget: float | None = None
    dataset_rho_spent: float = 0.0
    dataset_rho_total: float = Field(0.0, description="The dataset's whole loss in ρ: the zCDP "
                                     "charges, and α²/2 for each pure one.")


class Intervals(BaseModel):
    """Each answer's confidence interval at ``level``, the level the request named; ``method``
    says how: exact (``gaussian``, ``laplace``, ``laplace-sum`` on the ladder, ``exact`` for
    no noise) or never too narrow (``laplace-sum`` between the ladder's levels, ``chebyshev``)."""
    level: float
    low: list[float]
    high: list[float]
    method: list[str]


class Answer(BaseModel):
    """A noisy answer (docs/dp.md: every field)."""
    model_config = ConfigDict(extra="allow")
    workload: str
    answers: list[float]
    expected_squared_error: list[float]
    expected_rms_error: list[float]
    noise_draws: list[int] | None = Field(
        None, description="How many noise draws each answer adds up: 1 is exactly Laplace "
                          "(Gaussian under zCDP), what its confidence interval rests on "
                          "(docs/dp.md, \"Confidence intervals\"); absent from answers stored "
                          "before.")
    noise_quantiles: list[list[float] | None] | None = Field(
        None, description="Each answer whose noise is a sum of several Laplace draws: the "
                          "noise's exact half-widths at the levels of intervals_ladder in "
                          "GET /v1/limits (null for the others).")
    intervals: Intervals
    alpha: float | None = Field(None, description="What the release spent under pure DP.")
    rho: float | None = Field(None, description="What it spent under zCDP (with the "
                              "(epsilon, delta) it implies).")
    epsilon: float | None = None
    delta: float | None = None
    strategy: str
    answer_id: str
    reused: bool
    charged: float
    budget: Budget
    version: str


class Preview(BaseModel):
    """What answering a workload would do (docs/dp.md, "Previews"): nothing is charged."""
    model_config = ConfigDict(extra="allow")
    workload: str
    objective: str
    definition: str
    charge: float = Field(description="What answering it would charge (α, or ρ under "
                                      "zCDP), unless an earlier answer is reused.")
    strategy: str
    expected_squared_error: list[float]
    expected_rms_error: list[float]
    intervals: dict = Field(description="level, and each answer's interval half_width and "
                                        "method at it.")
    budget: Budget


class TopK(BaseModel):
    """A ranking's top k: ids and public attributes only (docs/ranked-retrieval.md)."""
    model_config = ConfigDict(extra="allow")
    name: str
    version: str
    defense: str
    query: str
    k: int
    results: list[dict[str, str]]
    alpha: float | None = Field(None, description="dp rankings: the α charged for it.")


class Charge(BaseModel):
    """One charged answer of the caller's (GET /v1/history)."""
    at: float = Field(description="When it was charged (seconds since the epoch).")
    charged: float = Field(description="α, or ρ for a role under zCDP.")
    version: str = Field(description="The store's identity and the version it was asked of "
                                     "(a ranking's: rank:NAME:VERSION).")
    answer: dict | None = Field(description="The answer as stored (a ranking's: its results); "
                                            "null until it is.")


class History(BaseModel):
    user: str
    answers: list[Charge] = Field(description="Oldest first.")


class Ranking(BaseModel):
    """A ranking served: all of it public (its public manifest and size)."""
    name: str
    version: str
    defense: str
    tuples: int
    public: list[str] = Field(description="The public columns a result shows.")


class RankingList(BaseModel):
    rankings: list[Ranking]


class Terms(BaseModel):
    """A page of the terms that occur in public chunks (public by construction)."""
    version: str
    terms: list[str]
    next: str | None = Field(description="Pass as ``after`` for the next page; null on the "
                                         "last one.")
    total: int = Field(description="Public terms in the version, whatever the prefix.")


class Published(BaseModel):
    limits: dict[str, float]
    deadlines: dict[str, float | dict[str, float]]
    intervals_ladder: list[float] = Field(description="The levels at which an answer's "
                                          "noise_quantiles are given.")


class Health(BaseModel):
    status: Literal["ok"]
    version: str = Field(description="The publication served.")
