"""Measuring, from a profile to rows: the profile, the plan, timing and memory, what each configuration runs,
groups, the sweep and its replicate processes, surprises, warm compiles and each call's roofline regime."""
