"""The owner's report: every number of a store (:mod:`.numbers`) and the page that draws them
(:mod:`.page`), for `cocktail report` and the dashboard of `cocktail serve`."""
