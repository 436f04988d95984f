"""Subcommands of the `tf-transformer` CLI, one module each (see `tf_transformer.cli`)."""
