"""The gRPC servicers: each only translates between protobuf and the data plane
(``bnserve.server.dataplane``) or the repository; our errors leave as
``bnserve.store.errors`` kinds that the interceptor maps to status codes."""
