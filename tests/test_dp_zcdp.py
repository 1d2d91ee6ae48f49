"""Strategies under ρ-zCDP: L2 sensitivities against every record, Gaussian noise from OpenDP
at the scale whose ρ OpenDP's own map confirms, the stated variances against draws, the search
under L2, and the (ε, δ) reported."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cocktail.dp import marginals, noise, sensitivity, strategies
from cocktail.dp.answer import REPORTED_DELTA, prepare
from cocktail.dp.strategies import ZCDP, choose
from cocktail.dp.workload import Matrices
from cocktail.querylang import parse_batch

from .test_dp_marginals import one_way, random_found
from .test_dp_strategies import random_workload


def record_moves(strategy: strategies.Strategy, m: Matrices) -> np.ndarray:
    """How far one record of each pattern moves the measurement (rows: patterns)."""
    patterns = np.arange(1 << len(m.terms))
    if strategy.space == "cells":
        return strategy.A.T  # a record is one cell
    columns = m.masks if strategy.space == "counts" else np.array(strategy.subsets)
    held = (columns[None, :] & ~patterns[:, None]) == 0  # the counts each pattern is in
    return held @ strategy.A.T


@pytest.mark.parametrize("seed", range(8))
def test_every_l2_sensitivity_is_the_largest_move_of_one_record(seed):
    m = Matrices(random_workload(seed))
    candidates = [strategies.noq(m, ZCDP), strategies.noT(m, ZCDP),
                  *strategies.cell_candidates(m, ZCDP),
                  strategies.subsets_strategy(random_found(m, seed), m, ZCDP)]
    for strategy in candidates:
        largest = np.linalg.norm(record_moves(strategy, m), axis=1).max()
        assert strategy.sensitivity == pytest.approx(largest, rel=1e-12), strategy.name


@pytest.mark.parametrize("seed", range(4))
def test_the_l2_bound_past_the_enumeration_holds(monkeypatch, seed):
    m = Matrices(random_workload(seed))
    exact = [strategies.noq(m, ZCDP).sensitivity, strategies.noT(m, ZCDP).sensitivity]
    monkeypatch.setattr(sensitivity, "MAX_EXACT_WORK", 0)
    bounded = [strategies.noq(m, ZCDP), strategies.noT(m, ZCDP)]
    assert all(not s.sensitivity_exact for s in bounded)
    assert all(s.sensitivity >= e * (1 - 1e-12) for s, e in zip(bounded, exact))
    assert strategies.noT(one_way(32), ZCDP).sensitivity == pytest.approx(math.sqrt(32))


def test_the_gaussian_scale_is_what_opendp_calls_rho():
    """OpenDP's own privacy map of the Gaussian at the strategy's scale and L2 sensitivity
    gives back the ρ asked for."""
    import opendp.prelude as dp
    dp.enable_features("contrib")
    strategy = choose(one_way(12), definition=ZCDP).optimized
    for rho in (0.01, 0.5, 2.0):
        measurement = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                                         dp.l2_distance(T=float),
                                         scale=strategy.noise_scale(rho))
        assert measurement.map(strategy.sensitivity) == pytest.approx(rho, rel=1e-9)


def test_the_stated_gaussian_variances_match_6000_draws():
    m = one_way(12)
    strategy = choose(m, definition=ZCDP).optimized
    assert strategy.space == "subsets" and strategy.definition == ZCDP
    exact = np.arange(len(strategy.subsets), dtype=float)
    samples = np.array([strategy.answer(exact, 0.3) for _ in range(6000)])
    assert samples.var(axis=0, ddof=1) == pytest.approx(strategy.variances(0.3), rel=0.1)
    assert samples.mean(axis=0) == pytest.approx(strategy.R @ strategy.A @ exact,
                                                 abs=5 * np.sqrt(strategy.variances(0.3)
                                                                 / 6000).max())


@pytest.mark.parametrize("text", ["\n".join(f"count(t{i})" for i in range(8)),
                                  "\n".join(f"count(t{i})" for i in range(16)),
                                  "count(a) + count(b)\ncount(a & b)\n2*count(b) - count(c)"])
def test_under_zcdp_no_query_is_worse_than_noq_or_not(text):
    m = Matrices(parse_batch(text))
    choice = choose(m, definition=ZCDP)
    v = choice.optimized.variances(1.0)
    assert not strategies.above(v, choice.fixed.variances(1.0)).any()
    assert v.sum() <= min(choice.noq.expected_error(1.0), choice.not_.expected_error(1.0))
    # the 1-way counts: marginals of blocks, about half NOQ's Δ₂²/2 = u/2 a query
    if m.W.shape == (16, 16):
        assert v.sum() <= 0.55 * choice.noq.expected_error(1.0)


def test_the_l2_closed_form_is_the_matrix_and_its_gradient_the_derivative():
    m = Matrices(random_workload(5))
    found = random_found(m, 5)
    characters = marginals.closure(m.masks)
    parts = marginals.coefficients(m, characters) ** 2
    loss = marginals.loss(parts, found.family, characters, l2=True)
    value, grad = loss(found.theta)
    strategy = strategies.subsets_strategy(found, m, ZCDP)
    assert value / 2 == pytest.approx(strategy.expected_error(1.0), rel=1e-8)
    step = 1e-6
    numeric = [(loss(found.theta + step * e)[0] - loss(found.theta - step * e)[0]) / (2 * step)
               for e in np.eye(len(found.theta))]
    assert grad == pytest.approx(numeric, rel=1e-4, abs=1e-6 * value)


def test_a_zcdp_answer_reports_rho_and_its_epsilon_delta():
    prepared = prepare(one_way(12).workload, definition=ZCDP)
    body = prepared.noisy(np.zeros(len(prepared.choice.optimized.subsets)), 0.5).as_dict()
    assert body["definition"] == "zcdp" and body["rho"] == 0.5 and "alpha" not in body
    simple = 0.5 + 2 * math.sqrt(0.5 * math.log(1 / REPORTED_DELTA))
    assert body["delta"] == REPORTED_DELTA and 0.5 < body["epsilon"] <= simple
    assert noise.epsilon(0.5, 1e-6) == pytest.approx(body["epsilon"])
    pure = prepare(one_way(12).workload).noisy(np.zeros(len(
        prepare(one_way(12).workload).choice.optimized.subsets)), 0.5).as_dict()
    assert pure["alpha"] == 0.5 and "rho" not in pure and "definition" not in pure
