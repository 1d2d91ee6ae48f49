"""The docs, executed: every shell block of README.md and docs/*.md that a user would type runs
here, so a false doc fails CI.

Conventions (README.md, "Writing docs", says the same for doc writers):

* A fenced block tagged ``sh``, ``bash``, ``shell`` or ``console`` is commands a user types; in a
  ``console`` block only the lines after a ``$ `` prompt are. Output, file layouts and other
  illustrations are ``text`` (or their own language: ``python``, ``yaml``, ...). A fence with no
  tag is refused, and so are commands in an indented block.
* A document is a session. Its blocks run in order in one fresh temporary directory, laid out
  like a checkout (``scripts/``, ``mappers/``, ``reducers/``, ``benchmarks/``, ``hadoop_conf/``,
  ``hdfs_ext/`` and ``docs/`` are linked in), so ``./store`` is a temporary store. A variable a
  block exports, and the directory it ends in, carry into the next block. ``cocktail``,
  ``python`` and ``python3`` on PATH run this checkout with the test's interpreter; every
  ``COCKTAIL_*`` variable of the caller is removed.
* Each block runs under ``bash -e -o pipefail``: every command must exit 0, except one whose
  line ends in the comment ``# exits N`` (anything may follow N), which must exit N.
* A block preceded by ``<!-- not run: REASON -->`` (the last non-blank line before its fence) is
  not run; the test lists it as skipped with REASON. Keep these few: a cluster, a virtual
  machine, root, a long benchmark.
* A block preceded by ``<!-- rehearsal STEP: HOSTS[, online][, given FILES by HOST] -->`` is a
  cluster operator's command: tests/test_testbed.py runs it, as written, on the five-host
  rehearsal (HOSTS is a host name or ``every host``; ``online``: on the machine's network, as
  a VM provisions; ``given``: files handed over from that host's home first); here it is listed
  as skipped.
* The ``python`` blocks of the documents in :data:`PYTHON_DOCS` (the Python API's) run too: in
  order, in one fresh interpreter per document (a name one block makes is there in the next),
  in a directory laid out as the shell blocks' is, with the same environment.
* A line that starts ``cocktail serve`` must give ``--port`` and ``--detach`` (which returns
  once the service answers, so the next line needs no wait: the test adds none); every
  process the session left running is stopped after the document's last block. Port 8080
  anywhere in a document is replaced by a free port, so parallel runs do not collide.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cocktail.jvm import ARCHIVE_DIR

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_TAGS = {"sh", "bash", "shell", "console"}
PYTHON_DOCS = [REPO / "docs" / "python-api.md"]  # their python blocks run (test_python_doc_runs)
LINKED = ("scripts", "mappers", "reducers", "benchmarks", "hadoop_conf", "hdfs_ext", "docs")
BLOCK_TIMEOUT = 600  # seconds; the slowest block (a Spark session) takes 1-2 minutes under load
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*not run\s*:\s*(.*?)\s*-->\s*$")
REHEARSAL = re.compile(r"^\s*<!--\s*rehearsal\s+(?P<step>[\w-]+)\s*:\s*(?P<how>.*?)\s*-->\s*$")
EXITS = re.compile(r"^(?P<cmd>.*?\S)(?P<comment>\s+#\s*exits\s+(?P<n>\d+)\b.*)$")
SERVE = re.compile(r"^\s*(?:[A-Z_][A-Z0-9_]*=\S*\s+)*cocktail\s+serve\b")


@dataclass
class Block:
    doc: Path
    line: int            # the line of the opening fence, 1-based
    tag: str
    text: str            # the block's content as written
    not_run: str | None  # the reason, when marked `not run` (or rehearsed)
    rehearsal: re.Match | None = None  # step and how, when the rehearsal runs it

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[tuple[int, str]]:
        """(line in the doc, text) of every line of the block; in a console block the lines
        that are not typed (output) are empty."""
        lines, typed, continued = self.text.split("\n"), [], False
        for i, line in enumerate(lines):
            if self.tag == "console":
                if continued:
                    pass                      # the rest of a command typed over several lines
                elif line.startswith("$ "):
                    line = line[2:]
                else:
                    line = ""                 # output
                continued = bool(line) and line.endswith("\\")
            typed.append((self.line + 1 + i, line))
        return typed


def fenced_blocks(doc: Path) -> list[Block]:
    lines = doc.read_text().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        fence, tag, start, body = opened.group(2), opened.group(3).lower(), i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        marker, rehearsal = MARKER.match(before), REHEARSAL.match(before)
        reason = marker.group(1) if marker else None
        if rehearsal:
            reason = (f"a cluster operator's command: tests/test_testbed.py runs it on the "
                      f"five-host rehearsal (step {rehearsal['step']})")
        blocks.append(Block(doc, start + 1, tag, "\n".join(body), reason, rehearsal))
    return blocks


def shell_blocks(doc: Path) -> list[Block]:
    return [b for b in fenced_blocks(doc) if b.tag in SHELL_TAGS]


def doc_id(doc: Path) -> str:
    return str(doc.relative_to(REPO))


# ---------------------------------------------------------------------------------------------
# the shape of the docs


def test_every_fence_says_what_it_holds():
    untagged = [b.where for doc in DOCS for b in fenced_blocks(doc) if not b.tag]
    assert not untagged, ("tag these fences: sh/bash/console for commands, text for output or "
                          f"illustration: {untagged}")


COMMAND_WORDS = ("cocktail ", "scripts/", "python ", "python3 ", "curl ", "export ", "hadoop ",
                 "vagrant ")


def test_commands_are_in_fenced_blocks():
    """Indented code blocks escape the test, so commands live in fenced blocks."""
    found = []
    for doc in DOCS:
        lines, inside = doc.read_text().split("\n"), False
        for n, line in enumerate(lines, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            previous = lines[n - 2] if n > 1 else ""
            if (not inside and line.startswith("    ") and line.strip().startswith(COMMAND_WORDS)
                    and (not previous.strip() or previous.startswith("    "))):
                found.append(f"{doc.relative_to(REPO)}:{n}")
    assert not found, f"commands in indented blocks (use ```sh): {found}"


def test_markers_have_reasons():
    for doc in DOCS:
        for block in shell_blocks(doc):
            assert block.not_run is None or len(block.not_run) >= 10, block.where
    # a marker that is not directly before a shell block is a mistake
    for doc in DOCS:
        lines = doc.read_text().split("\n")
        starts = {b.line for b in shell_blocks(doc)}
        for n, line in enumerate(lines, 1):
            if MARKER.match(line) or REHEARSAL.match(line):
                nxt = next((k for k in range(n + 1, len(lines) + 1) if lines[k - 1].strip()), None)
                assert nxt in starts, f"{doc.relative_to(REPO)}:{n}: marker not before a shell block"


OUTSIDE = re.compile(r"\.\./shared|(?<![\w./-])shared/(?:notes|papers|DESIGN|datasets)")
STANDALONE = [REPO / "README.md", REPO / "Vagrantfile", *sorted((REPO / "docs").glob("*.md")),
              *sorted(p for p in (REPO / "scripts").iterdir() if p.is_file()),
              *sorted(p for p in (REPO / "hadoop_conf").rglob("*") if p.is_file())]


def test_nothing_a_user_needs_points_outside_the_repository():
    """A user who clones the project has no ../shared: the design, the readings of the papers
    and every file a doc names are in the repository."""
    found = [f"{p.relative_to(REPO)}:{n}: {line.strip()}"
             for p in STANDALONE for n, line in enumerate(p.read_text(errors="replace")
                                                          .split("\n"), 1)
             if OUTSIDE.search(line)]
    assert not found, "\n".join(found)


def test_docs_named_in_docs_exist():
    """Every docs/*.md a doc names is there."""
    missing = []
    for doc in DOCS:
        for name in set(re.findall(r"docs/[\w.-]+\.md", doc.read_text())):
            if not (REPO / name).exists():
                missing.append(f"{doc.relative_to(REPO)}: {name}")
    assert not missing, missing


# ---------------------------------------------------------------------------------------------
# running them


def skipped_blocks() -> list[Block]:
    return [b for doc in DOCS for b in shell_blocks(doc) if b.not_run is not None]


@pytest.mark.parametrize("block", skipped_blocks(), ids=lambda b: b.where)
def test_block_not_run(block):
    """Listed so that `pytest -ra` shows every block the docs test does not run, and why."""
    pytest.skip(f"{block.where}: not run: {block.not_run}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PROLOGUE = r'''set -eo pipefail
__fail() { echo "docs-test: $__DOC:$(( $1 + __OFFSET )) exited $2: $3" >&2; }
trap '__fail "$LINENO" "$?" "$BASH_COMMAND"' ERR
trap 'export -p > "$__STATE/env"; pwd > "$__STATE/cwd"' EXIT
__expect() { [ "$2" -eq "$1" ] || { echo "docs-test: $__DOC:$3 exited $2; the doc says $1" >&2; exit 97; }; }
[ -f "$__STATE/env" ] && . "$__STATE/env"
cd "$(cat "$__STATE/cwd")"
'''


def script_for(block: Block, port: int) -> str:
    """The block as a bash script: `# exits N` lines checked, every other line as written (but
    for port 8080). Line k of the block stays line k after the prologue (one line per line)."""
    out = []
    for number, line in block.commands():
        line = re.sub(r"\b8080\b", str(port), line)
        if SERVE.match(line):
            command = line.split(" #", 1)[0]
            assert re.search(r"--port[ =]\d+", command) and "--detach" in command.split(), (
                f"{block.doc.name}:{number}: give `cocktail serve` a --port and --detach (a "
                f"service started with `&` does not answer the next line yet)")
        if (expected := EXITS.match(line)) and not line.rstrip().endswith("\\"):
            line = (f"{expected.group('cmd')} && __rc=0 || __rc=$?; "
                    f"__expect {expected.group('n')} \"$__rc\" {number} {expected.group('comment')}")
        out.append(line)
    return "\n".join(out) + "\n"


def session(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A directory laid out like a checkout, and the environment the blocks run in."""
    work, state, bin_dir = tmp / "session", tmp / "state", tmp / "bin"
    for folder in (work, state, bin_dir):
        folder.mkdir()
    for name in LINKED:
        if (REPO / name).exists():
            (work / name).symlink_to(REPO / name)
    launchers = {"cocktail": f'exec "{sys.executable}" -m cocktail.cli "$@"',
                 "python": f'exec "{sys.executable}" "$@"',
                 "python3": f'exec "{sys.executable}" "$@"'}
    for name, body in launchers.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COCKTAIL_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               __STATE=str(state), PYTHONUNBUFFERED="1")
    env[ARCHIVE_DIR] = str(tmp / "jvm-archives")  # a Spark driver's, not in the user's cache
    (state / "cwd").write_text(str(work))
    return work, env


def left_running(state: Path) -> list[int]:
    """The processes a session left running (a `cocktail serve --detach`): those whose
    environment holds the session's ``__STATE``."""
    mark, found = f"__STATE={state}".encode(), []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:  # gone, or not ours to read
            pass
    return found


def stop_services(state: Path) -> None:
    alive = left_running(state)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if Path(f"/proc/{pid}").exists()
                 and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()]
        time.sleep(0.2)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().split("\n")[-lines:])


@pytest.mark.parametrize("doc", [d for d in DOCS if shell_blocks(d)], ids=doc_id)
@pytest.mark.timeout(1800)  # a document's blocks in one session: engines.md starts six Sparks
def test_doc_runs(doc, tmp_path):
    if shutil.which("curl") is None or shutil.which("bash") is None:
        pytest.skip("the docs' sessions need bash and curl")
    work, env = session(tmp_path)
    state = Path(env["__STATE"])
    port = free_port()
    ran, skipped = 0, []
    try:
        for block in shell_blocks(doc):
            if block.not_run is not None:
                skipped.append(f"{block.where}: {block.not_run}")
                continue
            script = PROLOGUE + script_for(block, port)
            offset = block.line - PROLOGUE.count("\n")
            env.update(__DOC=doc_id(doc), __OFFSET=str(offset))
            started, cpu = time.monotonic(), children_cpu()
            try:
                result = subprocess.run(["bash", "-c", script], env=env, capture_output=True,
                                        text=True, timeout=BLOCK_TIMEOUT, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired as exc:
                pytest.fail(f"{block.where}: still running after {BLOCK_TIMEOUT} s\n"
                            f"{block.text}\n--- stderr\n{tail(str(exc.stderr or ''))}")
            seconds, cpu = time.monotonic() - started, children_cpu() - cpu
            print(f"{block.where}: exit {result.returncode} in {seconds:.1f} s ({cpu:.1f} s CPU)")
            if os.environ.get("DOCS_TEST_SHOW"):  # to read what a doc's commands print
                print(f"--- stdout\n{result.stdout}--- stderr\n{result.stderr}")
            assert result.returncode == 0, (
                f"{block.where} failed (exit {result.returncode}):\n{block.text}\n"
                f"--- stdout\n{tail(result.stdout)}\n--- stderr\n{tail(result.stderr)}")
            ran += 1
    finally:
        stop_services(state)
    if doc.name == "README.md":  # a newcomer runs it in the checkout: nothing of theirs lands there
        left = sorted(p.name for p in work.iterdir() if p.name not in LINKED)
        assert not left, f"README.md's commands left {left} in the checkout"
    print(f"{doc_id(doc)}: {ran} block(s) run; not run: {skipped or 'none'}")
    if not ran:
        pytest.skip(f"{doc_id(doc)}: no block could run here: {skipped}")


# Each block compiled as if it stood at its line of the doc: a traceback names the doc's line.
RUN_PYTHON = """
import json, sys
namespace = {"__name__": "__main__"}
for where, line, text in json.load(sys.stdin):
    print(f"--- {where}:{line}", flush=True)
    exec(compile("\\n" * line + text, where, "exec"), namespace)
"""


@pytest.mark.parametrize("doc", PYTHON_DOCS, ids=doc_id)
def test_python_doc_runs(doc, tmp_path):
    blocks = [(doc_id(doc), b.line, b.text) for b in fenced_blocks(doc) if b.tag == "python"]
    assert blocks, f"{doc_id(doc)} holds no python block"
    work, env = session(tmp_path)
    result = subprocess.run([sys.executable, "-c", RUN_PYTHON], input=json.dumps(blocks),
                            cwd=work, env=env, capture_output=True, text=True,
                            timeout=BLOCK_TIMEOUT)
    if os.environ.get("DOCS_TEST_SHOW"):
        print(f"--- stdout\n{result.stdout}--- stderr\n{result.stderr}")
    assert result.returncode == 0, (f"{doc_id(doc)}: a python block failed:\n"
                                    f"{tail(result.stdout)}\n--- stderr\n{tail(result.stderr)}")


# What a command line needs beyond [owner] (setup.cfg's extras), by what the line holds
NEEDS = {r"--runner[ =](?:local|inline|hadoop)\b": "hadoop",
         r"--(?:runner|engine)[ =]spark\b": "spark", r"^\s*cocktail serve\b": "serve",
         r"\.parquet\b": "parquet", r"^\s*cocktail report\b": "report",
         r"^\s*cocktail rank build\b": "rank", r"--method[ =]optimal\b": "solver"}


def test_the_readme_install_brings_what_its_examples_need():
    """Issue 66, item 2: the README's install lacked extras its own examples need. The install
    line of "Using it" names every extra a command the README runs needs."""
    blocks = shell_blocks(REPO / "README.md")
    [install] = [b for b in blocks if "pip install" in b.text and "'.[" in b.text
                 and "test" not in b.text and "demo" not in b.text]
    installed = set(re.search(r"'\.\[([\w,]+)\]'", install.text)[1].split(","))
    needed = {extra: b.where for b in blocks if b.not_run is None
              for _, line in b.commands() for pattern, extra in NEEDS.items()
              if re.search(pattern, line)}
    assert needed and set(needed) <= installed, (needed, installed)


def test_serve_lines_run_as_written():
    """No hidden wait (issue 66, item 1): a `cocktail serve` line runs as a user pastes it, so
    it must return once the service answers (--detach); one started with `&` is refused."""
    def script(line: str) -> str:
        return script_for(Block(REPO / "README.md", 1, "sh", line, None), 9999)

    assert script("cocktail serve --store ./store --port 8080 --detach   # the API") == \
        "cocktail serve --store ./store --port 9999 --detach   # the API\n"
    for line in ("cocktail serve --store ./store --port 8080 &", "cocktail serve --detach"):
        with pytest.raises(AssertionError, match="--detach"):
            script(line)


def test_the_docs_say_what_new_clusters_hold():
    """Issue 66, item 27: records an earlier append buffered (privately) join an append's new
    clusters by design, so "new clusters hold new records only" misled; the docs of the
    release invariant say what holds: records no earlier release made public."""
    for name in ("docs/design.md", "docs/releases.md"):
        text = " ".join((REPO / name).read_text().split())
        assert "new records only" not in text, name
        assert "no earlier release made public" in text, name
