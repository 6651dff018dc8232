"""Built-in data sets, read with ``--data builtin:NAME``."""
