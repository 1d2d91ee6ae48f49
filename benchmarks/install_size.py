"""The size of an install in a fresh venv: the analyst's client (the core), `[owner]`, and
`[owner,serve]`.

    python benchmarks/install_size.py [--python python3.11]

Copies this checkout's files (those git tracks or would track) to a temporary directory and,
for each install, makes a fresh venv there and runs `pip install --no-cache-dir 'SRC[extras]'`
(non-editable, from the index: minutes, network), then measures with `du -sk`: the whole venv,
its site-packages, and apart from them pip and setuptools, which every venv holds. The target
is the client's whole venv at most 60 MB (docs/install.md). On the client it also runs what an
analyst runs, and an owner's command, which must name the `owner` extra.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALLS = {"client (the core)": "", "[owner]": "[owner]", "[owner,serve]": "[owner,serve]"}
TARGET_MB = 60  # the client's whole venv
TOOLS = ("pip", "pip-*.dist-info", "setuptools", "setuptools-*.dist-info", "pkg_resources",
         "_distutils_hack", "distutils-precedence.pth")  # what `python -m venv` puts there


def checkout_copy(to: Path) -> Path:
    """The files of this checkout git tracks or would track (no venv, build or store)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in listed.splitlines():
        if (ROOT / name).is_file():  # a file deleted but not yet committed is listed
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to


def megabytes(*paths: Path) -> float:
    """`du -sk` of the paths together, in MB of 2^20 bytes (du -h's)."""
    if not paths:
        return 0.0
    done = subprocess.run(["du", "-skc", *map(str, paths)], capture_output=True, text=True,
                          check=True)
    return int(done.stdout.splitlines()[-1].split()[0]) / 1024


def install(python: str, venv: Path, source: Path, extras: str) -> dict:
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-cache-dir",
                    f"{source}{extras}"], check=True)
    [site] = venv.glob("lib/python*/site-packages")
    tools = [path for pattern in TOOLS for path in site.glob(pattern)]
    listed = subprocess.run([str(venv / "bin" / "pip"), "list", "--format", "json"],
                            capture_output=True, text=True, check=True).stdout
    return {"distributions": len(json.loads(listed)), "venv": megabytes(venv),
            "site": megabytes(site), "tools": megabytes(*tools)}


def client_runs(venv: Path, tmp: Path) -> str:
    """What an analyst runs on the client, and an owner's command: their exit statuses."""
    cocktail = str(venv / "bin" / "cocktail")
    token = tmp / "token"
    token.write_text("t0k3n\n")
    runs = {"--version": ["--version"],
            "query --url, unreachable": ["query", "count(a)", "--url", "http://127.0.0.1:9",
                                         "--token-file", str(token), "--json"],
            "publish": ["publish", "x.dat", "--json"]}
    shown = []
    for name, args in runs.items():
        done = subprocess.run([cocktail, *args], capture_output=True, text=True)
        shown.append(f"{name}: exit {done.returncode}, {done.stdout.strip()}")
    return "\n".join(shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter each venv is made from (default: this one)")
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="cocktail-size-") as tmp:
        source = checkout_copy(Path(tmp) / "src")
        for name, extras in INSTALLS.items():
            venv = Path(tmp) / f"venv{len(rows)}"
            rows[name] = install(args.python, venv, source, extras)
            if not extras:
                checks = client_runs(venv, Path(tmp))
    print("| install | distributions | whole venv | site-packages | of which pip and "
          "setuptools | the rest |")
    print("|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['distributions']} | {row['venv']:.1f} MB | {row['site']:.1f} MB "
              f"| {row['tools']:.1f} MB | {row['site'] - row['tools']:.1f} MB |")
    client = rows["client (the core)"]["venv"]
    print(f"\nthe client's whole venv: {client:.1f} MB, target {TARGET_MB} MB: "
          f"{'met' if client <= TARGET_MB else 'MISSED'}")
    print(f"on the client:\n{checks}")


if __name__ == "__main__":
    main()
