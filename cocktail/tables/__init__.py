"""Tables beside baskets: tabular releases on the same hybrid-cloud stores (``cocktail table``).

``ke`` holds the (k,e)-anonymous model and its safe incremental releases; ``attack`` the
multi-release differential attacker that audits them.
"""
