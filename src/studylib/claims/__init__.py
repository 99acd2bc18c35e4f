"""The seeds' claims: the registry (claims.yaml), their conditions and coverage, and the verdict on each; the
studies register the evaluators that measure them."""
