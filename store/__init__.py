"""The model contract, the compiled predictor and the SQL model store: what the trainer
and the server share. Imported as ``bnserve.store``; it imports neither of them."""

if __name__ != "bnserve.store":  # the folder run as a top-level package: two copies of every class
    raise ImportError(f"import bnserve.store, not {__name__} (install the project: pip install -e .)")
