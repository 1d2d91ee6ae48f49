"""Partitioners: coverage, k^m-anonymity (checked by the independent verifier), Algorithm 1."""

from __future__ import annotations

import random
from itertools import combinations

import pytest

from cocktail.anonymity import METHODS, conflicts, partition
from cocktail.anonymity.basic import greedy_partition
from cocktail.anonymity.concepts import mine_concepts
from cocktail.anonymity.conflicts import bits, find_conflicts
from cocktail.anonymity.improved import dissolve_redundant, grow_concept
from cocktail.audit import km_violations
from cocktail.dataset import Records


def random_cluster(seed: int, n: int = 120, items: int = 25) -> list[frozenset[str]]:
    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(items)]
    return [frozenset(f"t{rng.choices(range(items), weights)[0]}" for _ in range(rng.randint(0, 6)))
            for _ in range(n)]


def supports(records):
    counts = {}
    for r in records:
        for t in r:
            counts[t] = counts.get(t, 0) + 1
    return counts


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("k,m", [(2, 1), (2, 2), (3, 3), (5, 2), (10, 3)])
@pytest.mark.parametrize("seed", range(4))
def test_partition_is_valid(method, k, m, seed):
    records = random_cluster(seed)
    result = partition(method, records, k, m)
    chunks = list(result.public)
    # The chunks and the private set partition the cluster's terms.
    everything = [t for c in chunks for t in c] + list(result.private)
    assert sorted(everything) == sorted(set().union(*records))
    assert all(chunks)
    # Private terms are exactly the terms below k: any term with support >= k can be public.
    assert result.private == {t for t, s in supports(records).items() if s < k}
    for chunk in chunks:
        subrecords = [r & chunk for r in records if r & chunk]
        counted, rare = km_violations(subrecords, k, m, 10**7)
        assert rare == [], f"{method} chunk {sorted(chunk)} is not {k}^{m}-anonymous: {rare[:3]}"
    if method == "basic":
        assert all(len(c) <= m for c in chunks)


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("k,m", [(2, 2), (3, 3)])
def test_a_cluster_given_as_term_ids_is_partitioned_as_its_sets_are(method, k, m):
    """A publish hands each leaf cluster to its partitioner as term ids (:class:`Records`), not
    as sets: the partition is the same, each chunk k^m-anonymous by the independent verifier.
    The most frequent term, t0, is term 0 of the conflict space, and its rare pairs count."""
    records = random_cluster(0)
    result = partition(method, Records.build(records), k, m)
    as_sets = partition(method, records, k, m)
    if method == "optimal":  # CP-SAT's two workers may return another optimum
        assert len(result.public) == len(as_sets.public) and result.private == as_sets.private
    else:
        assert result == as_sets
    assert "t0" in {t for chunk in result.public for t in chunk}
    for chunk in result.public:
        subrecords = [r & chunk for r in records if r & chunk]
        assert km_violations(subrecords, k, m, 10**7)[1] == [], sorted(chunk)


@pytest.mark.parametrize("rule", ["exact", "strict"])
@pytest.mark.parametrize("k,m", [(2, 2), (3, 3), (4, 4)])
@pytest.mark.parametrize("seed", range(6))
def test_conflict_space_matches_the_definition(rule, k, m, seed):
    """A set of frequent terms is valid exactly when the verifier finds it k^m-anonymous
    (exact rule), or when every <= m-subset is frequent (strict rule)."""
    records = random_cluster(seed, n=60, items=10)
    space = find_conflicts(records, k, m, rule)
    frequent = {frozenset(t) for t, _ in mine_concepts(records, k, m)}
    rng = random.Random(seed)
    for _ in range(150):
        group = frozenset(rng.sample(space.terms, rng.randint(1, min(6, len(space.terms)))))
        if rule == "exact":
            subrecords = [r & group for r in records if r & group]
            expected = km_violations(subrecords, k, m, 10**7)[1] == []
        else:
            expected = all(frozenset(c) in frequent for size in range(1, m + 1)
                           for c in combinations(sorted(group), size))
        assert space.valid(space.mask(group)) == expected, sorted(group)


def test_rlf_growth_and_dissolving_keep_chunks_valid():
    records = random_cluster(1, n=200, items=30)
    space = find_conflicts(records, 3, 3)
    remaining, grown = space.all, []
    while remaining:
        concept = grow_concept(space, remaining)
        assert concept and concept & remaining == concept and space.valid(concept)
        grown.append(concept)
        remaining &= ~concept
    dissolved = dissolve_redundant(space, grown)
    assert len(dissolved) <= len(grown)
    assert all(space.valid(c) for c in dissolved)
    assert sum(c.bit_count() for c in dissolved) == len(space.terms)


def rlf_concept(space, remaining):
    """Leighton's RLF rule written plainly over bitsets: start from the term with the most
    conflicts inside ``remaining``; then add the candidate with the most pair conflicts with
    every term shut out so far (ties: the lowest index)."""
    term = max(bits(remaining), key=lambda t: ((space.conflict[t] & remaining).bit_count(), -t))
    group, candidates, shut_out = 0, remaining, 0
    while True:
        still = space.joinable(term, group, candidates)
        shut_out |= candidates & ~still & ~(1 << term)
        group, candidates = group | 1 << term, still
        if not candidates:
            return group
        term = max(bits(candidates), key=lambda t: ((space.conflict[t] & shut_out).bit_count(), -t))


@pytest.mark.parametrize("seed", range(6))
def test_rlf_growth_adds_the_candidate_most_in_conflict_with_the_shut_out_terms(seed):
    """`improved` grows each concept by the RLF rule docs/partitioning.md credits for its fewer
    chunks: checked round by round against the rule written plainly (a growth that scored the
    candidates by anything else, e.g. by the terms already taken, still gives valid chunks)."""
    records = random_cluster(seed, n=200, items=30)
    space = find_conflicts(records, 2, 2)
    remaining, rounds = space.all, 0
    while remaining:
        concept = grow_concept(space, remaining)
        assert concept == rlf_concept(space, remaining), (seed, rounds)
        remaining &= ~concept
        rounds += 1
    assert rounds > 2  # enough conflicts that the candidates' scores decide
    result = partition("improved", records, 2, 2)  # its notes are in the owner's report
    assert result.notes["grown_concepts"] == rounds
    assert result.notes["dissolved"] == rounds - len(result.public)


@pytest.mark.parametrize("seed", range(4))
def test_the_papers_expansion_finds_every_maximal_concept_and_reports_its_caps(seed):
    """`improved-paper`'s Algorithm 2 on clusters small enough to check every set of frequent
    terms with the independent verifier: uncapped, it finds each maximal k^m-anonymous set
    and says it was not capped; cut at 3 steps it says so, and still partitions every
    frequent term."""
    from cocktail.anonymity.improved import partition_improved_paper
    records = random_cluster(seed, n=40, items=9)
    frequent = sorted(t for t, s in supports(records).items() if s >= 2)
    valid = [c for size in range(1, len(frequent) + 1)
             for c in map(frozenset, combinations(frequent, size))
             if km_violations([r & c for r in records if r & c], 2, 2, 10**7)[1] == []]
    maximal = [c for c in valid if not any(c < other for other in valid)]
    assert len(maximal) > 1
    whole = partition_improved_paper(records, 2, 2)
    assert whole.notes["expansion_capped"] == 0
    assert whole.notes["maximal_concepts"] == len(maximal)
    tight = partition_improved_paper(records, 2, 2, max_steps=3)
    assert tight.notes["expansion_capped"] == 1
    assert sorted(t for c in tight.public for t in c) == frequent


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k,m", [(2, 2), (3, 3)])
def test_testing_puts_each_term_in_the_first_chunk_that_stays_anonymous(seed, k, m):
    """`testing` is VERPART's first-fit: terms by support descending (ties by term), each into
    the first chunk that stays k^m-anonymous with it by the independent verifier. A chunk
    passed over must have failed then (its terms so far plus the term): a stricter test than
    k^m's would still give valid chunks, only more of them."""
    records = random_cluster(seed)
    counts = supports(records)
    order = sorted((t for t in counts if counts[t] >= k), key=lambda t: (-counts[t], t))
    result = partition("testing", records, k, m)
    chunks = result.public
    assert sorted(t for c in chunks for t in c) == sorted(order)

    def anonymous(group):
        return km_violations([r & group for r in records if r & group], k, m, 10**7)[1] == []
    passed_over = 0
    for position, term in enumerate(order):
        home = next(i for i, c in enumerate(chunks) if term in c)
        for chunk in chunks[:home]:
            so_far = {t for t in chunk if order.index(t) < position}
            assert not anonymous(so_far | {term}), (term, sorted(so_far))
            passed_over += 1
        assert anonymous({t for t in chunks[home] if order.index(t) <= position})
    assert passed_over
    # the owner's report counts the extension tests: each chunk passed over, and the home
    # chunk unless the term opened it
    opened = len(chunks)
    assert result.notes["extension_tests"] == passed_over + len(order) - opened


def test_hand_example():
    records = [frozenset("ab"), frozenset("ab"), frozenset("ac"), frozenset("cd")]
    # supports a3 b2 c2 d1; pairs ab=2, ac=1, bc=0 (k=2, m=2)
    for method in ("basic", "testing", "improved", "improved-paper"):
        result = partition(method, records, 2, 2)
        assert set(result.public) == {frozenset("ab"), frozenset("c")}
        assert result.private == frozenset("d")


def test_support_zero_combinations_are_allowed():
    # a and b never co-occur: {a, b} is 2^2-anonymous by DESIGN.md's definition.
    records = [frozenset("a"), frozenset("a"), frozenset("b"), frozenset("b")]
    assert partition("testing", records, 2, 2).public == (frozenset("ab"),)
    assert partition("improved", records, 2, 2).public == (frozenset("ab"),)
    from cocktail.anonymity.improved import partition_improved
    assert len(partition_improved(records, 2, 2, rule="strict").public) == 2
    assert len(partition("basic", records, 2, 2).public) == 2  # basic chunks are concepts


def test_a_set_of_four_no_record_holds_is_allowed_when_its_triples_are_frequent():
    """Each triple of a, b, c, d in two records, the four together in none: {a, b, c, d} is
    2^4-anonymous by the verifier, so one chunk (a forbidden-set search that leaves out a
    term when intersecting the holders would find the four 'held' and split them)."""
    records = [frozenset(t) for t in ("abc", "abd", "acd", "bcd")] * 2
    assert km_violations(records, 2, 4, 10**7)[1] == []
    space = find_conflicts(records, 2, 4)
    assert space.larger == [] and space.valid(space.all)
    for method in ("testing", "improved", "improved-paper"):
        assert partition(method, records, 2, 4).public == (frozenset("abcd"),), method


def literal_algorithm_1(concepts):
    """Algorithm 1 as printed: take the largest concept, reduce all others by it, re-sort.

    Reduced concepts are concepts of the set (Definition 5 gives them their own extension), so
    they take the support and mining position of the concept with that intension."""
    by_terms = {frozenset(t): (s, i) for i, (t, s) in enumerate(concepts)}
    pool = set(by_terms)
    chunks = []
    while pool:
        top = min(pool, key=lambda c: (-len(c), -by_terms[c][0], by_terms[c][1]))
        chunks.append(top)
        pool = {c - top for c in pool if c - top}
    return chunks


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("k,m", [(2, 2), (3, 3), (4, 2)])
def test_single_pass_greedy_equals_literal_algorithm_1(seed, k, m):
    concepts = mine_concepts(random_cluster(seed, n=80, items=15), k, m)
    assert greedy_partition(concepts) == literal_algorithm_1(concepts)


def test_empty_and_degenerate_clusters():
    for method in METHODS:
        assert partition(method, [], 2, 2).public == ()
        assert partition(method, [frozenset()], 2, 2).private == frozenset()
        lonely = partition(method, [frozenset("xy")], 2, 2)
        assert lonely.public == () and lonely.private == frozenset("xy")


def test_bad_parameters():
    with pytest.raises(ValueError, match="unknown method"):
        partition("magic", [], 2, 2)
    with pytest.raises(ValueError, match="k must be"):
        partition("basic", [], 0, 2)
    with pytest.raises(ValueError, match="m must be"):
        partition("testing", [], 2, 0)


def set_partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in set_partitions(rest):
        for i in range(len(smaller)):
            yield smaller[:i] + [smaller[i] | {first}] + smaller[i + 1:]
        yield [{first}] + smaller


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("k,m", [(2, 2), (3, 3)])
def test_optimal_is_the_true_minimum(seed, k, m):
    """Against exhaustive search over every partition of the frequent terms (tiny clusters)."""
    records = random_cluster(seed, n=40, items=9)
    frequent = sorted(t for t, s in supports(records).items() if s >= k)
    assert len(frequent) <= 9

    verdicts = {}

    def anonymous(chunk):
        chunk = frozenset(chunk)
        if chunk not in verdicts:
            subrecords = [r & chunk for r in records if r & chunk]
            verdicts[chunk] = km_violations(subrecords, k, m, 10**7)[1] == []
        return verdicts[chunk]

    best = min(len(p) for p in set_partitions(frequent) if all(anonymous(c) for c in p))
    result = partition("optimal", records, k, m)
    assert len(result.public) == best
    assert all(anonymous(c) for c in result.public)
    for method in ("basic", "testing", "improved"):
        assert len(partition(method, records, k, m).public) >= best


def test_optimal_refuses_large_clusters():
    from cocktail.anonymity.optimal import TooLargeForOptimal
    records = random_cluster(0, n=300, items=80)
    with pytest.raises(TooLargeForOptimal, match="frequent terms"):
        partition("optimal", records, 2, 2)


def test_dense_cluster_is_refused_not_mined():
    from cocktail.anonymity.concepts import ClusterTooDense
    crawler = frozenset(f"page{i}" for i in range(40))
    records = [crawler] * 5 + random_cluster(3, n=50, items=20)
    with pytest.raises(ClusterTooDense, match="lower m, raise k"):
        mine_concepts(records, 5, 4, max_concepts=50_000)  # C(40, <=4) = 102,090 concepts


def test_mining_holds_no_more_concepts_than_its_budget_and_refuses_none_that_fit(monkeypatch):
    """The budget bounds what one cluster's mining holds at any step, its singletons counted,
    and a cluster whose concepts fit it is mined: 10 triples of terms, each record twice, have
    30 frequent singletons and 30 frequent pairs (k = m = 2); a budget of 30 refuses them after
    mining no more than the singletons, one of 60 mines them all."""
    from cocktail.anonymity import concepts
    held = []

    def eclat(*args):
        found = real(*args)
        held.append(len(found))
        return found
    real = concepts.eclat
    monkeypatch.setattr(concepts, "eclat", eclat)
    records = [frozenset({f"a{i}", f"b{i}", f"c{i}"}) for i in range(10)] * 2
    with pytest.raises(concepts.ClusterTooDense):
        mine_concepts(records, 2, 2, max_concepts=30)
    assert held and max(held) <= 30
    assert len(mine_concepts(records, 2, 2, max_concepts=60)) == 60


def test_level_wise_mining_finds_the_same_concepts():
    # One long record of unique terms inflates the quick bound (C(30, <=3) / k = 2,247) but adds
    # no concept: a budget of 1,500 then forces the level-by-level path.
    records = random_cluster(5, n=150, items=25) + [frozenset(f"solo{i}" for i in range(30))]
    everything = mine_concepts(records, 2, 3)
    assert len(everything) < 1500
    level_wise = mine_concepts(records, 2, 3, max_concepts=1500)
    assert sorted((tuple(sorted(t)), s) for t, s in level_wise) == \
        sorted((tuple(sorted(t)), s) for t, s in everything)


def test_a_term_in_every_record_is_still_a_concept():
    """pyfim drops such an item; overlay clusters split on a term are exactly this case."""
    records = [frozenset("ab"), frozenset("ac"), frozenset("a"), frozenset("ab")]
    concepts = dict((tuple(sorted(t)), s) for t, s in mine_concepts(records, 2, 2))
    assert concepts == {("a",): 4, ("b",): 2, ("a", "b"): 2}
    for method in METHODS:
        assert "a" in {t for chunk in partition(method, records, 2, 2).public for t in chunk}


def test_terms_kept_apart_share_no_chunk_with_others():
    """`apart` (sensitive terms): partitioned on their own, and still a partition of the
    cluster's terms with every public chunk k^m-anonymous (the independent verifier)."""
    records = [frozenset({"a", "b", "flu"}), frozenset({"a", "b", "flu"}),
               frozenset({"a", "b", "hiv"}), frozenset({"a", "flu", "hiv"}),
               frozenset({"b", "flu"}), frozenset({"a", "b"})]
    apart = frozenset({"flu", "hiv"})
    together = partition("improved", records, 2, 2)
    assert any(chunk & apart and chunk - apart for chunk in together.public)
    split = partition("improved", records, 2, 2, apart)
    assert all(chunk <= apart or not chunk & apart for chunk in split.public)
    terms = [t for chunk in split.public for t in chunk] + sorted(split.private)
    assert sorted(terms) == ["a", "b", "flu", "hiv"]
    for chunk in split.public:
        subrecords = [sorted(r & chunk) for r in records if r & chunk]
        assert km_violations(subrecords, 2, 2, 10**7)[1] == []


def minimal_forbidden_by_enumeration(records, k, m, rule):
    """Every itemset of 2..m frequent terms that is forbidden while all its subsets are not."""
    frequent = sorted(t for t, s in supports(records).items() if s >= k)

    def forbidden(itemset):
        support = sum(1 for r in records if r >= itemset)
        return support < k and (support > 0 or rule == "strict")

    found = set()
    for size in range(2, m + 1):
        for itemset in map(frozenset, combinations(frequent, size)):
            if forbidden(itemset) and not any(
                    frozenset(s) in found for low in range(2, size)
                    for s in combinations(sorted(itemset), low)):
                found.add(itemset)
    return found


# The exact rule's triples are counted from the records, or from a Gram matrix per term for long
# records: the threshold set to either extreme makes every cluster take one way.
@pytest.mark.parametrize("rule,counted_per_term", [("exact", 10**9), ("exact", 0), ("strict", 0)])
@pytest.mark.parametrize("k,m", [(2, 3), (3, 3), (3, 4), (4, 2)])
@pytest.mark.parametrize("seed", range(6))
def test_forbidden_itemsets_match_enumeration(rule, counted_per_term, k, m, seed, monkeypatch):
    """The conflict space holds exactly the minimal forbidden itemsets, and ``joinable`` keeps
    exactly the candidates (terms that may join the group) that may join group + term."""
    monkeypatch.setattr(conflicts, "COUNTED_TRIPLES_PER_TERM", counted_per_term)
    rng = random.Random(seed)
    records = [frozenset(rng.sample("abcdefghij", rng.randint(1, 7))) for _ in range(30)]
    space = find_conflicts(records, k, m, rule)
    pairs = {space.names(1 << a | 1 << b) for a in range(len(space.terms))
             for b in bits(space.conflict[a]) if a < b}
    larger = [space.names(f) for f in space.forbidden()]
    expected = minimal_forbidden_by_enumeration(records, k, m, rule)
    assert len(larger) == len(set(larger)) == space.count_forbidden()
    assert pairs | set(larger) == expected
    if m >= 3:
        assert any(len(f) == 3 for f in expected)  # the cluster does exercise triples
    for _ in range(100):
        group = space.mask(rng.sample(space.terms, rng.randint(0, 4)))
        term = rng.randrange(len(space.terms))
        if group >> term & 1 or not space.valid(group | 1 << term):
            continue
        candidates = sum(1 << c for c in bits(space.all & ~group & ~(1 << term))
                         if space.valid(group | 1 << c))
        assert space.joinable(term, group, candidates) == sum(
            1 << c for c in bits(candidates) if space.valid(group | 1 << term | 1 << c))
