"""Generated gRPC modules of the bnserve.v1 API (see proto/)."""
