"""Where map tasks run.  The fast path runs them in-process over the store; the mrjob runners
(inline, local, spark, hadoop) will run the same mappers/ and reducers/ scripts."""
