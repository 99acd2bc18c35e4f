"""The vocabulary every layer shares: configurations and shapes, paths, atomic files, the study registry."""
