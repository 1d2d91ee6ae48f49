"""Mutation score of the privacy-critical code: do its tests catch realistic bugs?

    PYTHONPATH=. python benchmarks/mutation.py [--mutants N] [--seed S] [--only PREFIX]
        [--timeout SECONDS] [--list]

A small AST mutator (mutmut 3 first runs every test under its trampolines to map tests to
functions, and cosmic-ray runs one test command for a whole session: neither runs a sampled
mutant against only the tests that cover its file).  Every site of these operators in
anonymity/, audit/, dp/, releases/ and publish/promotion.py is listed:

    compare     a comparison flipped (< and >=, <= and >, == and !=, is and is not, in and not in)
    constant    an integer constant off by one (n + 1)
    boolean     and and or swapped
    arithmetic  * and /, + and - swapped (a noise scale of Δ·α instead of Δ/α)
    return      a returned value dropped (return None)
    slice       a slice's end one shorter (a[i:j] is a[i:j - 1], a[i:] is a[i:-1])

``--mutants`` of them are drawn (``--seed``), each applied alone to a copy of the checkout (the
checkout is never touched) and run against its file's covering tests (:data:`COVERING`), with
``pytest -x`` and ``--timeout`` seconds a test (a hang is a kill, as in CI).  Prints the score
and every survivor (file:line, the mutation): a survivor is a bug no test catches, or an
equivalent mutant, which a reader tells apart.  Not in CI: ~30 mutants take 10-30 minutes.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("cocktail/anonymity/", "cocktail/audit/", "cocktail/dp/", "cocktail/releases/",
           "cocktail/publish/promotion.py")
# The tests that cover each target, by the longest prefix of its path; quick files first, so
# that -x ends a killed mutant's run early.
COVERING = {
    "cocktail/anonymity/": ["tests/test_anonymity.py"],
    # verified_view, which a re-share derives from, is tested with the signatures it checks;
    # the owner's checks of the term index with the index
    "cocktail/audit/": ["tests/test_audit.py", "tests/test_releases.py", "tests/test_signing.py",
                         "tests/test_term_index.py"],
    "cocktail/dp/": ["tests/test_dp.py", "tests/test_dp_zcdp.py", "tests/test_dp_marginals.py",
                     "tests/test_dp_strategies.py"],
    "cocktail/dp/ledger/": ["tests/test_ledger.py", "tests/test_dp_spend.py"],
    "cocktail/dp/session.py": [
        "tests/test_ledger.py", "tests/test_dp_spend.py", "tests/test_dp_zcdp.py",
        *(f"tests/test_analyst_attacks.py::test_{name}" for name in (
            "a_request_killed_mid_answer_never_leaves_a_placeholder_for_the_role",
            "a_request_waiting_on_a_live_reserver_stores_nothing_at_its_deadline",
            "counts_that_fail_leave_the_paid_reservation_to_the_retry_at_once",
            "a_reused_answer_leaves_at_its_own_arrival_plus_the_refusal_time"))],
    "cocktail/dp/reshare.py": ["tests/test_reshare.py"],
    # the deadlines' own tests live with the service's; the intervals' with the client's
    "cocktail/dp/deadline.py": [
        "tests/test_dp_marginals.py",
        "tests/test_service.py::test_a_dp_top_k_is_due_when_its_public_size_says",
        "tests/test_service.py::test_limits_and_response_times_are_published"],
    "cocktail/dp/intervals.py": [
        "tests/test_client.py::test_an_exact_interval_covers_at_its_level",
        "tests/test_client.py::test_chebyshevs_interval_covers_at_least_its_level"],
    "cocktail/releases/": ["tests/test_releases.py", "tests/test_signing.py"],
    # the Spark engine alone writes a log entry with chunk_record's defaults
    "cocktail/releases/log.py": [
        "tests/test_releases.py", "tests/test_signing.py",
        "tests/test_spark_publish.py::test_both_engines_publish_the_same[bms-webview-1]"],
    "cocktail/releases/signing.py": ["tests/test_signing.py"],
    "cocktail/publish/promotion.py": ["tests/test_promotion.py"],
}
FLIPS = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
         ast.NotIn: ast.In}
SWAPS = {ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Add: ast.Sub, ast.Sub: ast.Add}


@dataclass(frozen=True)
class Mutant:
    path: str       # relative to the checkout
    line: int
    operator: str
    start: int      # the replaced text's offsets in the file
    end: int
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.operator}] {self.before}  ->  {self.after}"


def offsets(source: str) -> list[int]:
    """The offset of each line's start (ast's columns are UTF-8 bytes: see ``_at``)."""
    starts, total = [0], 0
    for line in source.splitlines(keepends=True):
        total += len(line.encode())
        starts.append(total)
    return starts


def mutants_of(path: str) -> list[Mutant]:
    source = (REPO / path).read_text()
    data, lines = source.encode(), offsets(source)
    tree = ast.parse(source)
    found, skipped = [], set()  # docstrings, annotations (never evaluated), f-strings' parts
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.body and isinstance(node.body[0], ast.Expr):
            skipped.add(id(node.body[0].value))
        for part in (getattr(node, "annotation", None), getattr(node, "returns", None),
                     node if isinstance(node, ast.JoinedStr) else None):
            if part is not None:
                skipped.update(id(inner) for inner in ast.walk(part))

    def add(node: ast.AST, operator: str, after: str) -> None:
        start = lines[node.lineno - 1] + node.col_offset
        end = lines[node.end_lineno - 1] + node.end_col_offset
        before = data[start:end].decode()
        found.append(Mutant(path, node.lineno, operator, start, end, " ".join(before.split()),
                            after))

    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in FLIPS:
                    flipped = ast.Compare(node.left, list(node.ops), node.comparators)
                    flipped.ops[i] = FLIPS[type(op)]()
                    add(node, "compare", f"({ast.unparse(flipped)})")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            add(node, "constant", repr(node.value + 1))
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            add(node, "boolean", f"({ast.unparse(ast.BoolOp(other, node.values))})")
        elif isinstance(node, ast.BinOp) and type(node.op) in SWAPS:
            swapped = ast.BinOp(node.left, SWAPS[type(node.op)](), node.right)
            add(node, "arithmetic", f"({ast.unparse(swapped)})")
        elif isinstance(node, ast.Return) and node.value is not None \
                and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            add(node, "return", "return None")
        elif isinstance(node, ast.Slice) and node.step is None:
            upper = "-1" if node.upper is None else f"({ast.unparse(node.upper)}) - 1"
            lower = "" if node.lower is None else ast.unparse(node.lower)
            add(node, "slice", f"{lower}:{upper}")
    return found


def mutated(mutant: Mutant) -> str:
    data = (REPO / mutant.path).read_bytes()
    return (data[:mutant.start] + mutant.after.encode() + data[mutant.end:]).decode()


def covering(path: str) -> list[str]:
    return COVERING[max((p for p in COVERING if path.startswith(p)), key=len)]


def sources(only: str) -> list[str]:
    paths = []
    for target in TARGETS:
        found = sorted((REPO / target).rglob("*.py")) if target.endswith("/") else \
            [REPO / target]
        paths += [str(p.relative_to(REPO)) for p in found]
    return [p for p in paths if p.startswith(only)]


def copy_checkout(into: Path) -> Path:
    """The checkout's tracked files as they are now (edits included), beside a link to the
    data sets' directory that tests/conftest.py looks for next to the repository."""
    repo = into / "repo"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    shared = REPO.parent / "shared"
    if shared.exists():
        (into / "shared").symlink_to(shared)
    return repo


def run_tests(repo: Path, tests: list[str], timeout: float) -> tuple[str, float]:
    """killed, survived or error (pytest could not run), and the seconds it took."""
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider",
               "--timeout", str(timeout)]
    done = subprocess.run(command, cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    # 2: a collection error, the mutant broke an import; 3-5: pytest itself could not run
    outcome = {0: "survived", 1: "killed", 2: "killed"}.get(done.returncode, "error")
    return outcome, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", default="", help="only files whose path starts so")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a test")
    parser.add_argument("--list", action="store_true", help="print the sample, run nothing")
    args = parser.parse_args()
    everything = [m for path in sources(args.only) for m in mutants_of(path)]
    sample = random.Random(args.seed).sample(everything, min(args.mutants, len(everything)))
    print(f"{len(everything)} mutants in {len(sources(args.only))} files; {len(sample)} drawn "
          f"(seed {args.seed})")
    if args.list:
        print("\n".join(map(str, sample)))
        return
    outcomes: dict[str, list[Mutant]] = {"killed": [], "survived": [], "error": []}
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        repo = copy_checkout(Path(tmp))
        baseline: dict[tuple[str, ...], str] = {}
        for number, mutant in enumerate(sample, 1):
            tests = covering(mutant.path)
            if tuple(tests) not in baseline:  # the unmutated code must pass them
                baseline[tuple(tests)], _ = run_tests(repo, tests, args.timeout)
                if baseline[tuple(tests)] != "survived":
                    sys.exit(f"the covering tests {tests} fail without a mutant")
            target = repo / mutant.path
            original = target.read_text()
            try:
                text = mutated(mutant)
                compile(text, mutant.path, "exec")
                target.write_text(text)
                outcome, seconds = run_tests(repo, tests, args.timeout)
            except SyntaxError:
                outcome, seconds = "error", 0.0
            finally:
                target.write_text(original)
            outcomes[outcome].append(mutant)
            print(f"[{number}/{len(sample)}] {outcome:8} {seconds:6.1f} s  {mutant}", flush=True)
    scored = len(outcomes["killed"]) + len(outcomes["survived"])
    print(f"\nscore: {len(outcomes['killed'])}/{scored} killed"
          f" ({100 * len(outcomes['killed']) / max(scored, 1):.0f}%); "
          f"{len(outcomes['error'])} not scored (pytest could not run)")
    for kind in ("survived", "error"):
        if outcomes[kind]:
            print(f"\n{kind}:")
            print("\n".join(f"  {m}" for m in outcomes[kind]))


if __name__ == "__main__":
    main()
