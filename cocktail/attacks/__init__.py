"""Attacks on what Cocktail publishes, as tools: the way the product measures its own risk."""
