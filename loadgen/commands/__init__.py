"""The `sojourn` subcommands, one module each; loadgen.cli parses and dispatches."""
