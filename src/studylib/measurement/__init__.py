"""Measurement: profiles and their schema, the measurement plan, what each configuration runs (builder, data sets,
Keras twins), groups, rounds and replicate processes, the surprises and the seeds' claims the studies judge."""
