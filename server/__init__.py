"""Serving the store's models over gRPC: bnserve.v1.Predictor, the Open Inference Protocol,
health, reflection and Prometheus metrics. ``repository`` holds the compiled models, over its
rooms (``catalogue``, ``aliases``, ``loading``, ``served``, ``snapshot``, ``on_demand`` for the
versions loaded when asked for, ``poller``); ``dataplane`` answers a prediction request once for
both APIs, ``servicers`` translate, ``interceptors`` check tokens, count and map errors,
``metrics`` declares what they count, ``app`` wires it and ``cli`` runs it."""

if __name__ != "bnserve.server":  # the folder run as a top-level package: two copies of every class
    raise ImportError(f"import bnserve.server, not {__name__} (install the project: pip install -e .)")
