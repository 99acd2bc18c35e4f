"""The seeds' claims: the registry (claims.yaml), their coverage and verdicts; studies register the evaluators."""
