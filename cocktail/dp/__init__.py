"""Differential privacy for counting, linear and batch linear queries (paper section 4, fixed).

``workload`` turns a batch into matrices over the presence-pattern cells of its terms,
``sensitivity`` computes the L1 sensitivity honestly for set-valued data, ``strategies`` holds
NOQ, NOT and the cell-histogram matrix mechanism with their expected errors, ``noise`` draws
Laplace noise with OpenDP, and ``ledger`` keeps roles, users and budgets in SQLite.
"""
