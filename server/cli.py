"""`server` command: `server serve` runs the service, `server predict` is a small client."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from server.limits import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_ROWS
from store.errors import BnServeError
from store.sql import resolve_store_url


def _parse_instance(text: str) -> dict[str, str]:
    """'a=x,b=y' or a JSON object -> {feature: label}."""
    text = text.strip()
    if text.startswith("{"):
        value = json.loads(text)
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError("a JSON instance must be an object")
        return {str(k): str(v) for k, v in value.items()}
    pairs = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, label = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected feature=label, got {item!r}")
        pairs[name.strip()] = label.strip()
    return pairs


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


SERVE_ENV_PREFIX = "BNSERVE_"
SERVE_ENV_FLAGS = ("host", "port", "metrics_port", "poll_seconds", "grace_seconds", "threads", "workers", "log_level",
                   "max_rows", "max_message_bytes")


def _env_defaults(serve: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    """Each ``serve`` flag in SERVE_ENV_FLAGS may come from ``BNSERVE_<FLAG>`` (e.g.
    BNSERVE_GRACE_SECONDS): a Kubernetes ConfigMap sets them as environment. A flag given on
    the command line wins; a value that does not parse is a usage error naming the variable."""
    actions = {a.dest: a for a in serve._actions}
    for dest in SERVE_ENV_FLAGS:
        name = SERVE_ENV_PREFIX + dest.upper()
        if name not in environ:
            continue
        action = actions[dest]
        try:
            value = action.type(environ[name]) if action.type else environ[name]
        except (argparse.ArgumentTypeError, ValueError) as exc:
            serve.error(f"environment variable {name}={environ[name]!r}: {exc}")
        serve.set_defaults(**{dest: value})


def build_parser(environ: dict[str, str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="server", description="Serve Bayesian network classifiers over gRPC.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="load the models in the store and answer gRPC calls")
    serve.add_argument("--store", help="SQLAlchemy URL of the model store (default: $BNSERVE_STORE_URL, else sqlite:///bnserve.db)")
    serve.add_argument("--host", default="0.0.0.0", help="address to bind both ports on (default 0.0.0.0)")
    serve.add_argument("--port", type=int, default=50051, help="gRPC port (default 50051; 0 picks a free one)")
    serve.add_argument("--metrics-port", type=int, default=9464, help="Prometheus /metrics port (default 9464; -1 disables)")
    serve.add_argument("--poll-seconds", type=float, default=10.0, help="how often to look for new versions and alias moves (default 10)")
    serve.add_argument("--grace-seconds", type=float, default=5.0, help="drain time for in-flight calls on SIGTERM (default 5)")
    serve.add_argument("--threads", type=int, default=16, help="RPC worker threads (default 16; per worker process)")
    serve.add_argument("--workers", type=_positive_int, default=1,
                       help="worker processes sharing the port, one core each (default 1: this process serves)")
    serve.add_argument("--worker-of", type=int, metavar="PID", help=argparse.SUPPRESS)  # set by --workers
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    serve.add_argument("--max-rows", type=_positive_int, default=DEFAULT_MAX_ROWS,
                       help=f"most rows one Predict or ModelInfer may hold; more is RESOURCE_EXHAUSTED "
                            f"(default {DEFAULT_MAX_ROWS:,})")
    serve.add_argument("--max-message-bytes", type=_positive_int, default=DEFAULT_MAX_MESSAGE_BYTES,
                       help=f"largest request or response message; larger is RESOURCE_EXHAUSTED "
                            f"(default {DEFAULT_MAX_MESSAGE_BYTES:,}, 64 MiB)")
    serve.epilog = ("Every flag above but --store may also be set as BNSERVE_<FLAG> in the environment "
                    "(e.g. BNSERVE_GRACE_SECONDS=25); the store URL is BNSERVE_STORE_URL. A flag wins.")
    _env_defaults(serve, dict(os.environ) if environ is None else environ)

    predict = sub.add_parser("predict", help="send one Predict call and print the answer as JSON")
    predict.add_argument("--target", default="127.0.0.1:50051", help="server address (default 127.0.0.1:50051)")
    predict.add_argument("--model", required=True, help="model name")
    which = predict.add_mutually_exclusive_group()
    which.add_argument("--version", type=int, help="model version (default: alias production, else latest)")
    which.add_argument("--alias", help="model alias")
    predict.add_argument(
        "--instance", type=_parse_instance, action="append", default=[], metavar="F=L,…",
        help="one row as feature=value pairs or a JSON object (a numeric feature takes a number); repeat for more "
             "rows; absent features are missing",
    )
    predict.add_argument("--unseen-as-missing", action="store_true",
                         help="treat a label a nominal feature does not have as missing instead of an error")
    predict.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the server to report SERVING first")
    return parser


def _predict(args: argparse.Namespace) -> int:
    import grpc
    from google.protobuf import json_format
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from server.api import predictor_pb2 as pb
    from server.api import predictor_pb2_grpc

    with grpc.insecure_channel(args.target) as channel:
        if args.wait > 0:
            deadline = time.monotonic() + args.wait
            health_stub = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    status = health_stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0).status
                    if status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    print(f"error: {args.target} was not SERVING within {args.wait} s", file=sys.stderr)
                    return 1
                time.sleep(0.2)
        request = pb.PredictRequest(model=args.model, instances=[pb.Instance(values=i) for i in args.instance or [{}]],
                                    unseen_as_missing=args.unseen_as_missing)
        if args.version is not None:
            request.version = args.version
        elif args.alias:
            request.alias = args.alias
        try:
            reply = predictor_pb2_grpc.PredictorStub(channel).Predict(request, timeout=10.0)
        except grpc.RpcError as exc:
            print(f"error: {exc.code().name}: {exc.details()}", file=sys.stderr)
            return 1
    print(json_format.MessageToJson(reply, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "predict":
        return _predict(args)
    worker = args.worker_of is not None
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s " + ("[worker %(process)d] " if worker else "") + "%(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its per-start migration chatter
    from server.app import ServeConfig, serve

    config = ServeConfig(
        store_url=resolve_store_url(args.store),
        host=args.host,
        port=args.port,
        metrics_port=args.metrics_port,
        poll_seconds=args.poll_seconds,
        grace_seconds=args.grace_seconds,
        threads=args.threads,
        max_rows=args.max_rows,
        max_message_bytes=args.max_message_bytes,
        worker=worker,
    )
    try:
        if args.workers > 1 and not worker:
            from server.workers import serve_workers

            return serve_workers(config, args.workers, args.log_level)
        return serve(config, parent_pid=args.worker_of)
    except BnServeError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
