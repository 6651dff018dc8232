"""Generated gRPC modules of the bnserve.v1 and Open Inference Protocol APIs (see proto/)."""
