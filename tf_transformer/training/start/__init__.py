"""Starting a run: the entry point `run`, the batches and tokenizers it prepares, the run
directory's lock, and what a resume may change."""
