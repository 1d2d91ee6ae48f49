"""Differential privacy for counting, linear and batch linear queries (paper section 4, fixed).

``workload`` turns a batch into matrices over the presence-pattern cells of its terms,
``sensitivity`` computes the L1 sensitivity honestly for set-valued data, ``strategies`` holds
NOQ, NOT and the cell-histogram matrix mechanism with their expected errors, ``noise`` draws
Laplace noise with OpenDP, ``ledger`` keeps roles, users and budgets in SQLite, ``limits`` are
the published bounds of one request, ``deadline`` fixes when a reply leaves, ``session``
runs one request in the order that keeps refusals free, ``intervals`` turns an answer's noise
into confidence intervals, and ``preview`` says what a request would do before it spends.  Nothing here knows how counts are
computed: the caller passes a count function.
"""
