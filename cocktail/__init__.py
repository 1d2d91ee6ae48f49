"""Cocktail: k^m-anonymous publishing of set-valued data on a hybrid cloud, and its queries."""
