"""The backends' names (:data:`.backends.BACKENDS`), here apart from the engine that runs
them: the command line offers them on an install without it."""

RUNNERS = ("inline", "local", "spark", "hadoop")  # mrjob's: one MapReduce job over the chunks
# fast: in-process over the term index; index-<runner>: a job over the term index's parts
BACKEND_NAMES = ("fast", *RUNNERS, *(f"index-{runner}" for runner in RUNNERS))
