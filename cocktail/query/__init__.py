"""Reading a publication and answering exactly: the read view of one version
(:class:`Publication`), the engine that plans, runs and combines (:class:`Engine`), and the
backends it runs on, chosen by name (:data:`BACKENDS`).

They load when first used, so that :mod:`.names` (what the command line offers on an install
without the owner's engine) imports none of them."""

from __future__ import annotations

import importlib

_HOMES = {"BACKENDS": ".backends", "Engine": ".engine", "describe": ".engine",
          "plan_summary": ".engine", "Publication": ".view"}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
