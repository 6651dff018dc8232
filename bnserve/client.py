"""``bnserve.Client`` and what it returns or raises. The code lives in
``bnserve.server.client``, beside the API it calls, so that ``server predict`` is this same
client (the server package may not import the facade); this name stays the public one."""

from bnserve.server.client import Client, InvalidReply, ModelSummary, Predictions

__all__ = ["Client", "InvalidReply", "ModelSummary", "Predictions"]
