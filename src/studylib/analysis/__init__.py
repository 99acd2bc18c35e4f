"""Analysis the studies attach to their tables: where each call sits against the machine's limits."""
