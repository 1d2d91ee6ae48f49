"""Reading a publication and answering exactly: the read view of one version
(:class:`Publication`), the engine that plans, runs and combines (:class:`Engine`), and the
backends it runs on, chosen by name (:data:`BACKENDS`)."""

from __future__ import annotations

from .backends import BACKENDS
from .engine import Engine, describe, plan_summary
from .view import Publication

__all__ = ["BACKENDS", "Engine", "Publication", "describe", "plan_summary"]
