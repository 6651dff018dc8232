if __name__ != "bnserve.server":  # the folder run as a top-level package: two copies of every class
    raise ImportError(f"import bnserve.server, not {__name__} (install the project: pip install -e .)")
