"""Cocktail: k^m-anonymous publishing of set-valued data on a hybrid cloud, and its queries.

Where to start (docs/python-api.md has an executed example of everything below):

* The data owner opens or creates a store and publishes to it::

      import cocktail
      store = cocktail.OwnerStore("./store", create=True)  # or local:PATH, webhdfs://...
      store.publish("baskets.dat", k=5, m=3)   # a path, records in memory, a DataFrame
      store.append([["bread", "milk"], ...])   # later records: a new release
      store.audit().ok                         # the independent verifier
      store.exact("count(bread & milk)")       # exact answers, the owner's only
      store.versions().to_pandas()             # the releases, as a table
      store.report("report.html")              # the owner's HTML report

* An analyst asks the overlay service (``cocktail serve``) for noisy answers:
  ``cocktail.Client(url, token)``.
* Failures are typed exceptions (:class:`StoreError`, :class:`NoPublication`,
  :class:`Refused`, :class:`InputError`, :class:`QuerySyntaxError`, :class:`MissingExtra`);
  ``cocktail.exit_status(exc)`` gives the exit status the ``cocktail`` command ends with for
  the same failure (:class:`ExitCode`, docs/cli.md).
* Results are dataclasses; those that are tables have ``to_pandas()`` (the ``frames`` extra).
* The command line, ``cocktail --help``, does the same from a shell (README.md).

The names above are imported when first used, so ``import cocktail`` stays cheap.
"""

import importlib as _importlib

# public name -> "module:attribute", imported on first use (PEP 562)
_LAZY = {
    "OwnerStore": "cocktail.owner:OwnerStore",
    "Client": "cocktail.client:Client",
    "exit_status": "cocktail.errors:exit_status",
    "ExitCode": "cocktail.errors:ExitCode",
    "StoreError": "cocktail.store.base:StoreError",
    "NoPublication": "cocktail.private_config:NoPublication",
    "Refused": "cocktail.releases.layout:Refused",
    "InputError": "cocktail.dataset:InputError",
    "QuerySyntaxError": "cocktail.querylang:QuerySyntaxError",
    "MissingExtra": "cocktail.extras:MissingExtra",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = _LAZY[name].partition(":")
    value = getattr(_importlib.import_module(module), attribute)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(name for name in set(globals()) | set(__all__) if not name.startswith("_")
                  or name.startswith("__"))
