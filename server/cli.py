"""`server` command: `server serve` runs the service, `server predict` is a small client."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from bnserve import argtypes
from bnserve.server.config import DEFAULTS, ENV_PREFIX, ConfigError, ServeConfig
from bnserve.store.errors import BnServeError
from bnserve.store.model import DEFAULT_UNKNOWN, UNKNOWN_POLICIES
from bnserve.store.model.names import shown
from bnserve.store.timeouts import add_timeout_flags
from bnserve.store.version import VersionAction

PROG = "server"  # errors are printed as "server: error: ...", as argparse prints usage errors


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


# Flags read text into values; their bounds are ServeConfig's to check (server.config.BOUNDS),
# so that a flag, a BNSERVE_* variable and a Python caller meet one rule.
_whole = argtypes.whole_number()
_bytes = argtypes.whole_number(unit="whole number of bytes")
_seconds = argtypes.number("number of seconds")


SERVE_ENV_FLAGS = tuple(name for name in DEFAULTS if name != "worker")  # every serve setting; worker is internal
TOKEN_FILE_ENV = "BNSERVE_TOKEN_FILE"  # `server predict --token-file`


def _env_defaults(serve: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    """Each ``serve`` flag in SERVE_ENV_FLAGS may come from ``BNSERVE_<FLAG>`` (e.g.
    BNSERVE_GRACE_SECONDS): a Kubernetes ConfigMap sets them as environment. A flag given on
    the command line wins; a value that does not parse is a usage error naming the variable."""
    actions = {a.dest: a for a in serve._actions}
    for dest in SERVE_ENV_FLAGS:
        name = ENV_PREFIX + dest.upper()
        if name not in environ:
            continue
        convert = actions[dest].type
        try:
            value = convert(environ[name]) if callable(convert) else environ[name]
        except (argparse.ArgumentTypeError, ValueError) as exc:
            serve.error(f"environment variable {name}={environ[name]!r}: {exc}")
        serve.set_defaults(**{dest: value})


class _Parser(argparse.ArgumentParser):
    """The ``server`` parser; ``subcommands`` names each subcommand's parser (for its usage errors)."""

    subcommands: dict[str, argparse.ArgumentParser]


def build_parser(environ: dict[str, str] | None = None) -> _Parser:
    parser = _Parser(prog=PROG, description="Serve Bayesian network classifiers over gRPC.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="load the models in the store and answer gRPC calls")
    serve.add_argument(
        "--store", help="SQLAlchemy URL of the model store (default: $BNSERVE_STORE_URL, else sqlite:///bnserve.db)"
    )
    add_timeout_flags(serve)
    serve.add_argument("--host", default=DEFAULTS["host"], help="address to bind both ports on (default %(default)s)")
    serve.add_argument(
        "--port", type=_whole, default=DEFAULTS["port"], help="gRPC port (default %(default)s; 0 picks a free one)"
    )
    serve.add_argument(
        "--metrics-port",
        type=_whole,
        default=DEFAULTS["metrics_port"],
        help="Prometheus /metrics port (default %(default)s; -1 disables)",
    )
    serve.add_argument(
        "--poll-seconds",
        type=_seconds,
        default=DEFAULTS["poll_seconds"],
        help="how often to look for new versions and alias moves (default %(default)s)",
    )
    serve.add_argument(
        "--poll-stall-seconds",
        type=_seconds,
        default=DEFAULTS["poll_stall_seconds"],
        help="a poll of the store still running after this long is logged and counted as stalled (default %(default)s)",
    )
    serve.add_argument(
        "--compile",
        default=DEFAULTS["compile"],
        metavar="{eager,lazy}",
        help="compile each loaded version at once (eager) or on its first request (lazy: a faster start "
        "and less memory for models seldom asked for) (default %(default)s)",
    )
    serve.add_argument(
        "--grace-seconds",
        type=_seconds,
        default=DEFAULTS["grace_seconds"],
        help="drain time for in-flight calls on SIGTERM (default %(default)s)",
    )
    serve.add_argument(
        "--threads",
        type=_whole,
        default=DEFAULTS["threads"],
        help="work-pool threads, for requests too large for the event loop (over 32 rows, 4,096 values "
        "or 64 KiB) and store reads (default %(default)s; per worker process)",
    )
    serve.add_argument(
        "--workers",
        type=_whole,
        default=DEFAULTS["workers"],
        help="worker processes sharing the port, one core each (default %(default)s: this process serves)",
    )
    serve.add_argument("--worker-of", type=int, metavar="PID", help=argparse.SUPPRESS)  # set by --workers
    serve.add_argument(
        "--log-level", default=DEFAULTS["log_level"], help="DEBUG, INFO, WARNING or ERROR (default %(default)s)"
    )
    serve.add_argument(
        "--max-rows",
        type=_whole,
        default=DEFAULTS["max_rows"],
        help=f"most rows one Predict or ModelInfer may hold; more is RESOURCE_EXHAUSTED "
        f"(default {DEFAULTS['max_rows']:,})",
    )
    serve.add_argument(
        "--max-message-bytes",
        type=_whole,
        default=DEFAULTS["max_message_bytes"],
        help=f"largest request or response message; larger is RESOURCE_EXHAUSTED "
        f"(default {DEFAULTS['max_message_bytes']:,}, 64 MiB)",
    )
    serve.add_argument(
        "--max-metadata-bytes",
        type=_whole,
        default=DEFAULTS["max_metadata_bytes"],
        help=f"largest metadata (headers) of a call; a call with more is refused on its headers "
        f"with RESOURCE_EXHAUSTED (default {DEFAULTS['max_metadata_bytes']:,}, 16 KiB)",
    )
    serve.add_argument(
        "--max-streams-per-connection",
        type=_whole,
        default=DEFAULTS["max_streams_per_connection"],
        help="calls one client connection may have open at once; more wait for one to end (default %(default)s)",
    )
    serve.add_argument(
        "--idle-seconds",
        type=_seconds,
        default=DEFAULTS["idle_seconds"],
        help="close a client connection that has had no call open this long (default %(default)s)",
    )
    serve.add_argument(
        "--plan-cache-bytes",
        type=_bytes,
        default=DEFAULTS["plan_cache_bytes"],
        help=f"bytes of missing-value plans kept for reuse, all models together; a plan that does not fit "
        f"is built for its call alone (default {DEFAULTS['plan_cache_bytes']:,}, 64 MiB; per worker process)",
    )
    serve.add_argument(
        "--tls-cert",
        type=argtypes.file_path,
        metavar="FILE",
        help="PEM certificate chain of the server: the gRPC port speaks TLS only (needs --tls-key)",
    )
    serve.add_argument(
        "--tls-key", type=argtypes.file_path, metavar="FILE", help="PEM private key (unencrypted) of --tls-cert"
    )
    serve.add_argument(
        "--tls-client-ca",
        type=argtypes.file_path,
        metavar="FILE",
        help="PEM CA bundle: clients must present a certificate it signed (mutual TLS; needs --tls-cert)",
    )
    serve.add_argument(
        "--auth-token-file",
        type=argtypes.file_path,
        metavar="FILE",
        help="bearer tokens, one a line: every call but grpc.health.v1.Health must carry "
        "'authorization: Bearer <one of them>' (re-read when the file changes)",
    )
    serve.epilog = (
        "Every flag above but --store may also be set as BNSERVE_<FLAG> in the environment "
        "(e.g. BNSERVE_GRACE_SECONDS=25); the store URL is BNSERVE_STORE_URL. A flag wins."
    )
    environ = dict(os.environ) if environ is None else environ
    _env_defaults(serve, environ)

    predict = sub.add_parser("predict", help="send one Predict call and print the answer as JSON")
    predict.add_argument("--target", default="127.0.0.1:50051", help="server address (default 127.0.0.1:50051)")
    predict.add_argument("--model", required=True, help="model name")
    which = predict.add_mutually_exclusive_group()
    which.add_argument("--version", type=int, help="model version (default: alias production, else latest)")
    which.add_argument("--alias", help="model alias")
    predict.add_argument(
        "--instance",
        type=_parse_instance,
        action="append",
        default=[],
        metavar="F=L,…",
        help="one row as feature=value pairs or a JSON object (a numeric feature takes a number); repeat for more "
        "rows; absent features are missing",
    )
    predict.add_argument(
        "--unknown",
        type=argtypes.choice(UNKNOWN_POLICIES),
        default=DEFAULT_UNKNOWN,
        metavar="{" + ",".join(UNKNOWN_POLICIES) + "}",
        help="a value no training row had: missing (default: read as missing, summed out, and counted) "
        "or error (the call is refused, naming the feature and value); sent as PredictRequest.unknown",
    )
    predict.add_argument(
        "--wait", type=float, default=0.0, help="seconds to wait for the server to report SERVING first"
    )
    predict.add_argument(
        "--tls-ca",
        type=argtypes.file_path,
        metavar="FILE",
        help="PEM CA bundle to trust for the server's certificate: connect with TLS",
    )
    predict.add_argument(
        "--tls-cert",
        type=argtypes.file_path,
        metavar="FILE",
        help="PEM client certificate for mutual TLS (needs --tls-key and --tls-ca)",
    )
    predict.add_argument("--tls-key", type=argtypes.file_path, metavar="FILE", help="PEM private key of --tls-cert")
    predict.add_argument(
        "--tls-server-name",
        metavar="NAME",
        help="name to check the server's certificate against, when --target is not one of its "
        "names (e.g. through a port-forward; needs --tls-ca)",
    )
    predict.add_argument(
        "--token-file",
        type=argtypes.file_path,
        metavar="FILE",
        help=f"send 'authorization: Bearer <the first token in FILE>' (default: ${TOKEN_FILE_ENV})",
    )
    token_file = environ.get(TOKEN_FILE_ENV)
    if token_file:
        predict.set_defaults(token_file=token_file)
    parser.subcommands = {"serve": serve, "predict": predict}
    return parser


def _check_security_flags(args: argparse.Namespace, command: argparse.ArgumentParser) -> None:
    """Flag combinations that cannot work are usage errors (exit 2) naming the flag."""
    if (args.tls_cert is None) != (args.tls_key is None):
        given, missing = ("--tls-cert", "--tls-key") if args.tls_key is None else ("--tls-key", "--tls-cert")
        env = " (BNSERVE_TLS_CERT, BNSERVE_TLS_KEY)" if args.command == "serve" else ""
        command.error(f"{given} needs {missing}: give both or neither{env}")
    if args.command == "serve":
        if args.tls_client_ca is not None and args.tls_cert is None:
            command.error("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)")
    else:
        for flag, value in (("--tls-cert", args.tls_cert), ("--tls-server-name", args.tls_server_name)):
            if value is not None and args.tls_ca is None:
                command.error(f"{flag} needs --tls-ca (the CA that signed the server's certificate)")


def parse_args(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> argparse.Namespace:
    parser = build_parser(environ)
    args = parser.parse_args(argv)
    _check_security_flags(args, parser.subcommands[args.command])
    return args


def _channel(args: argparse.Namespace):
    """The channel ``server predict`` calls on: TLS with --tls-ca (client certificate with
    --tls-cert/--tls-key), else plaintext. SecurityConfigError for a file it cannot use."""
    import grpc

    from bnserve.server.security import check_certificates, check_private_key, read_file

    if args.tls_ca is None:
        return grpc.insecure_channel(args.target)
    ca = check_certificates(read_file(args.tls_ca, "--tls-ca"), args.tls_ca, "--tls-ca")
    cert = key = None
    if args.tls_cert is not None:
        cert = check_certificates(read_file(args.tls_cert, "--tls-cert"), args.tls_cert, "--tls-cert")
        key = check_private_key(read_file(args.tls_key, "--tls-key"), args.tls_key, "--tls-key")
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    options = [("grpc.ssl_target_name_override", args.tls_server_name)] if args.tls_server_name else []
    return grpc.secure_channel(args.target, credentials, options=options)


def _call_metadata(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    if args.token_file is None:
        return ()
    from bnserve.server.security import parse_tokens, read_file

    token = parse_tokens(read_file(args.token_file, "--token-file"), args.token_file, "--token-file")[0]
    return (("authorization", f"Bearer {token.decode('ascii')}"),)


def _predict(args: argparse.Namespace) -> int:
    import grpc
    from google.protobuf import json_format
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from bnserve.server.api import predictor_pb2 as pb
    from bnserve.server.api import predictor_pb2_grpc
    from bnserve.server.security import SecurityConfigError

    try:
        metadata = _call_metadata(args)
        channel = _channel(args)
    except SecurityConfigError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return 1
    with channel:
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
                    print(f"{PROG}: error: {args.target} was not SERVING within {args.wait} s", file=sys.stderr)
                    return 1
                time.sleep(0.2)
        request = pb.PredictRequest(
            model=args.model,
            instances=[pb.Instance(values=i) for i in args.instance or [{}]],
            unknown=args.unknown,
        )
        if args.version is not None:
            request.version = args.version
        elif args.alias:
            request.alias = args.alias
        try:
            reply = predictor_pb2_grpc.PredictorStub(channel).Predict(request, timeout=10.0, metadata=metadata)
        except grpc.RpcError as exc:
            print(f"{PROG}: error: {exc.code().name}: {shown(exc.details() or '')}", file=sys.stderr)
            return 1
    print(json_format.MessageToJson(reply, indent=2, ensure_ascii=True))  # labels escaped: no raw control
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "predict":
        return _predict(args)
    worker = args.worker_of is not None
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s " + ("[worker %(process)d] " if worker else "") + "%(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its per-start migration chatter
    from bnserve.server.app import serve
    from bnserve.store.db import resolve_store_url

    try:
        store_url = resolve_store_url(args.store)
    except BnServeError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return 1
    try:
        config = ServeConfig(
            store_url=store_url, worker=worker, **{name: getattr(args, name) for name in SERVE_ENV_FLAGS}
        )
    except ConfigError as exc:  # a flag or a BNSERVE_* variable out of its bounds: a usage error
        parser = build_parser()
        parser.subcommands["serve"].error(exc.message)
    try:
        if args.workers > 1 and not worker:
            from bnserve.server.workers import serve_workers

            return serve_workers(config)
        return serve(config, parent_pid=args.worker_of)
    except BnServeError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
