"""``python -m cocktail.cli``."""

from . import main

main()
