"""The vocabulary every layer shares: a configuration and its shape, where files go, atomic files and the
registry of studies. Imports nothing of studylib."""
