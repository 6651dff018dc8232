if __name__ != "bnserve.trainer":  # the folder run as a top-level package: two copies of every class
    raise ImportError(f"import bnserve.trainer, not {__name__} (install the project: pip install -e .)")
