"""Optional dependencies: which extra installs each, and one clear error when one is missing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# import name -> the extra of setup.cfg that installs it
EXTRAS = {"pyspark": "spark", "py4j": "spark"}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says what to type."""

    def __init__(self, package: str, extra: str, purpose: str, hint: str = "") -> None:
        self.package, self.extra = package, extra
        # quoted: zsh would expand the brackets
        super().__init__(f"{purpose} needs {package}, which is not installed here: "
                         f"pip install 'cocktail[{extra}]'{hint}")


@contextmanager
def needs_extra(purpose: str, hint: str = "") -> Iterator[None]:
    """Imports inside turn a missing optional package into :class:`MissingExtra`; anything
    else missing (a broken install, a bug) stays the error it is."""
    try:
        yield
    except ModuleNotFoundError as exc:
        package = (exc.name or "").partition(".")[0]
        if package not in EXTRAS:
            raise
        raise MissingExtra(package, EXTRAS[package], purpose, hint) from exc
