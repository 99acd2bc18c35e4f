"""What is run: models built from configs, real text, its tokenization and batching, the work a call does."""
