"""Ranked retrieval over private attributes (the ranked-retrieval paper): a top-k search whose
ranks do not reveal the private values it ranks on."""
