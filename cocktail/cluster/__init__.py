"""The Hadoop cluster Cocktail is deployed on: its description and the files rendered from it."""
