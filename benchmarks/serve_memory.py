"""Server memory over a long hostile run: `cocktail serve`'s app in this process, sent the
fuzzer's malformed requests and valid ones that each ask something new.

    python benchmarks/serve_memory.py [--requests 20000] [--warm-up 1000] [--json]

Builds tests/test_fuzz.py's store (1,500 generated records, an estt and a dp ranking) in a
temporary directory and runs its memory_run: after the warm-up, the process's resident memory
every 500 requests, and whether it stayed within 10% of its median.  tests/test_fuzz.py runs
3,000 of them and asserts that bound; this is the long run.  Nothing leaves the process.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests' fuzzer, shared rather than copied
from tests.test_fuzz import flat, fuzz_store, memory_run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--warm-up", type=int, default=1_000)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        samples = memory_run(*fuzz_store(Path(tmp)), args.requests, args.warm_up)
        seconds = time.monotonic() - started
    mbs = [mb for _, mb in samples]
    middle = sorted(mbs)[len(mbs) // 2]
    result = {"requests": args.requests, "warm_up": args.warm_up, "seconds": round(seconds, 1),
              "rss_mb": {"after_warm_up": round(mbs[0], 1), "median": round(middle, 1),
                         "min": round(min(mbs), 1), "max": round(max(mbs), 1),
                         "last": round(mbs[-1], 1)},
              "largest_change": round(max(abs(mb - middle) for mb in mbs) / middle, 3),
              "flat_within_10_percent": flat(samples),
              "samples": [(n, round(mb, 1)) for n, mb in samples]}
    if args.json:
        print(json.dumps(result))
    else:
        rss = result["rss_mb"]
        print(f"{args.requests:,} requests after {args.warm_up:,} of warm-up in "
              f"{seconds:.0f} s: resident MB {rss['after_warm_up']:.0f} after the warm-up, "
              f"median {middle:.0f}, {rss['min']:.0f}–{rss['max']:.0f}, last {rss['last']:.0f} "
              f"(at most {100 * result['largest_change']:.1f}% from the median)")
        print(" ".join(f"{n}:{mb:.0f}" for n, mb in samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
