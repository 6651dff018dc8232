"""`server` command: `server serve` runs the service; `server predict` and `server health` call
one through bnserve's Client."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from bnserve import argtypes
from bnserve.process_exit import exit_with
from bnserve.server.config import DEFAULTS, ENV_PREFIX, ConfigError, ServeConfig, flag_of
from bnserve.server.limits import PARSE_FACTOR
from bnserve.store.errors import BnServeError
from bnserve.store.model import DEFAULT_UNKNOWN, UNKNOWN_POLICIES
from bnserve.store.model.names import shown
from bnserve.store.timeouts import add_timeout_flags
from bnserve.store.version import VersionAction

if TYPE_CHECKING:
    import grpc

    from bnserve.server.client import Client

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


def _add_client_flags(command: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    """The flags of the subcommands that call a server (predict, health): where, and how securely."""
    command.add_argument("--target", default="127.0.0.1:50051", help="server address (default 127.0.0.1:50051)")
    command.add_argument(
        "--tls-ca",
        type=argtypes.file_path,
        metavar="FILE",
        help="PEM CA bundle to trust for the server's certificate: connect with TLS",
    )
    command.add_argument(
        "--tls-cert",
        type=argtypes.file_path,
        metavar="FILE",
        help="PEM client certificate for mutual TLS (needs --tls-key and --tls-ca)",
    )
    command.add_argument("--tls-key", type=argtypes.file_path, metavar="FILE", help="PEM private key of --tls-cert")
    command.add_argument(
        "--tls-server-name",
        metavar="NAME",
        help="name to check the server's certificate against, when --target is not one of its "
        "names (e.g. through a port-forward; needs --tls-ca)",
    )
    command.add_argument(
        "--token-file",
        type=argtypes.file_path,
        metavar="FILE",
        help=f"send 'authorization: Bearer <the first token in FILE>' (default: ${TOKEN_FILE_ENV})",
    )
    command.add_argument(
        "--insecure-token",
        action="store_true",
        help="send the token even in plaintext to an address beyond loopback (without --tls-ca), where "
        "anyone on the path could read it: only where the path is protected otherwise (a service mesh, a VPN)",
    )
    token_file = environ.get(TOKEN_FILE_ENV)
    if token_file:
        command.set_defaults(token_file=token_file)


class _Flag(NamedTuple):
    """One ``server serve`` setting: flag ``flag_of(setting)``, variable ``BNSERVE_<SETTING>``,
    default ``DEFAULTS[setting]``; ``parse`` reads its text."""

    setting: str
    parse: Callable[[str], Any]
    help: str
    metavar: str | None = None


_FILE = argtypes.file_path
SERVE_FLAGS = (
    _Flag("host", str, "address to bind both ports on (default %(default)s)"),
    _Flag("port", _whole, "gRPC port (default %(default)s; 0 picks a free one)"),
    _Flag("metrics_port", _whole, "Prometheus /metrics port (default %(default)s; -1 disables)"),
    _Flag("poll_seconds", _seconds, "how often to look for new versions and alias moves (default %(default)s)"),
    _Flag(
        "poll_stall_seconds",
        _seconds,
        "a poll of the store still running after this long is logged and counted as stalled (default %(default)s)",
    ),
    _Flag(
        "compile",
        str,
        "compile each loaded version at once (eager) or on its first request (lazy: a faster start "
        "and less memory for models seldom asked for) (default %(default)s)",
        "{eager,lazy}",
    ),
    _Flag("grace_seconds", _seconds, "drain time for in-flight calls on SIGTERM (default %(default)s)"),
    _Flag(
        "threads",
        _whole,
        "work-pool threads, for requests too large for the event loop (over 32 rows, 4,096 values "
        "or 64 KiB); store reads have their own, --store-threads (default %(default)s; per worker process)",
    ),
    _Flag(
        "workers",
        _whole,
        "worker processes sharing the port, one core each (default %(default)s: this process serves)",
    ),
    _Flag("log_level", str, "DEBUG, INFO, WARNING or ERROR (default %(default)s)"),
    _Flag(
        "max_rows",
        _whole,
        f"most rows one Predict or ModelInfer may hold; more is RESOURCE_EXHAUSTED (default {DEFAULTS['max_rows']:,})",
    ),
    _Flag(
        "max_message_bytes",
        _whole,
        f"largest request or response message; larger is RESOURCE_EXHAUSTED "
        f"(default {DEFAULTS['max_message_bytes']:,}, 64 MiB)",
    ),
    _Flag(
        "max_metadata_bytes",
        _whole,
        f"largest metadata (headers) of a call; a call with more is refused on its headers "
        f"with RESOURCE_EXHAUSTED (default {DEFAULTS['max_metadata_bytes']:,}, 16 KiB)",
    ),
    _Flag(
        "max_streams_per_connection",
        _whole,
        "calls one client connection may have open at once (HTTP/2 MAX_CONCURRENT_STREAMS); a call past it "
        "is refused with REFUSED_STREAM, which clients see as UNAVAILABLE: retry it, or open another connection "
        "(grpc's own clients hold it back until a call ends, where its deadline may pass) (default %(default)s)",
    ),
    _Flag(
        "idle_seconds", _seconds, "close a client connection that has had no call open this long (default %(default)s)"
    ),
    _Flag(
        "max_inflight_bytes",
        _bytes,
        f"bytes the calls in flight may hold, each charged {PARSE_FACTOR} times its request's size (what "
        f"parsing may take); a call past it is RESOURCE_EXHAUSTED at once "
        f"(default {DEFAULTS['max_inflight_bytes']:,}, 384 MiB; per worker process)",
    ),
    _Flag(
        "max_connection_inflight_bytes",
        _bytes,
        f"the same, for the calls of one client connection "
        f"(default {DEFAULTS['max_connection_inflight_bytes']:,}, 192 MiB)",
    ),
    _Flag(
        "max_connections",
        _whole,
        "client connections that may have calls open at once; a call on another is RESOURCE_EXHAUSTED "
        "at its headers (default %(default)s; per worker process)",
    ),
    _Flag(
        "body_seconds",
        _seconds,
        "a call's request message must arrive within this long of its headers, else the call ends "
        "DEADLINE_EXCEEDED (default %(default)s)",
    ),
    _Flag(
        "plan_cache_bytes",
        _bytes,
        f"bytes of missing-value plans kept for reuse, all models together; a plan that does not fit "
        f"is built for its call alone (default {DEFAULTS['plan_cache_bytes']:,}, 64 MiB; per worker process)",
    ),
    _Flag(
        "store_threads",
        _whole,
        "threads that load versions not in memory from the store, apart from --threads: a store that "
        "hangs holds these only (default %(default)s; per worker process)",
    ),
    _Flag(
        "max_load_waiters",
        _whole,
        "calls that may wait for one version's load from the store; more are refused at once with "
        "UNAVAILABLE (default %(default)s)",
    ),
    _Flag(
        "version_cache_bytes",
        _bytes,
        f"bytes of compiled tables of the versions loaded on demand (neither latest nor aliased) kept "
        f"in memory, least recently used out first (default {DEFAULTS['version_cache_bytes']:,}, 64 MiB; "
        f"per worker process)",
    ),
    _Flag(
        "tls_cert",
        _FILE,
        "PEM certificate chain of the server: the gRPC port speaks TLS only (needs --tls-key)",
        "FILE",
    ),
    _Flag("tls_key", _FILE, "PEM private key (unencrypted) of --tls-cert", "FILE"),
    _Flag(
        "tls_client_ca",
        _FILE,
        "PEM CA bundle: clients must present a certificate it signed (mutual TLS; needs --tls-cert)",
        "FILE",
    ),
    _Flag(
        "auth_token_file",
        _FILE,
        "bearer tokens, one a line: every call but grpc.health.v1.Health must carry "
        "'authorization: Bearer <one of them>' (re-read when the file changes)",
        "FILE",
    ),
    _Flag(
        "verify_key",
        _FILE,
        "PEM Ed25519 public keys (one or more): load only versions signed by one of them (trainer "
        "--signing-key); unsigned, forged or other-key versions are refused at load",
        "FILE",
    ),
)


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
    for flag in SERVE_FLAGS:
        serve.add_argument(
            flag_of(flag.setting),
            type=flag.parse,
            default=DEFAULTS[flag.setting],
            metavar=flag.metavar,
            help=flag.help,
        )
    serve.add_argument("--worker-of", type=int, metavar="PID", help=argparse.SUPPRESS)  # set by --workers
    serve.epilog = (
        "Every flag above but --store may also be set as BNSERVE_<FLAG> in the environment "
        "(e.g. BNSERVE_GRACE_SECONDS=25); the store URL is BNSERVE_STORE_URL. A flag wins."
    )
    environ = dict(os.environ) if environ is None else environ
    _env_defaults(serve, environ)

    predict = sub.add_parser("predict", help="send one Predict call and print the answer as JSON")
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
    health = sub.add_parser(
        "health", help="print the server's grpc.health.v1 status; exit 0 when SERVING (a probe that speaks TLS)"
    )
    health.add_argument(
        "--service",
        default="",
        help="the service to ask about, e.g. bnserve.v1.Predictor (default: the server as a whole); each is "
        "SERVING once the store has been read, and NOT_SERVING from SIGTERM on",
    )
    health.add_argument("--timeout", type=_seconds, default=2.0, help="seconds the call may take (default %(default)s)")
    for command in (predict, health):
        _add_client_flags(command, environ)
    parser.subcommands = {"serve": serve, "predict": predict, "health": health}
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


PREDICT_TIMEOUT = 10.0  # seconds `server predict` gives its Predict call


def _client(args: argparse.Namespace) -> Client:
    """The bnserve Client ``server predict`` calls with: TLS with --tls-ca (a client certificate
    with --tls-cert/--tls-key), the first token of --token-file; one attempt per call (--wait
    is the way to wait for a server). SecurityConfigError for a file it cannot use;
    PlaintextToken for a token that would go in plaintext beyond loopback."""
    from bnserve.server.client import Client
    from bnserve.server.security import check_certificates, check_private_key, parse_tokens, read_file

    ca = cert = key = token = None
    if args.tls_ca is not None:
        ca = check_certificates(read_file(args.tls_ca, "--tls-ca"), args.tls_ca, "--tls-ca")
    if args.tls_cert is not None:
        cert = check_certificates(read_file(args.tls_cert, "--tls-cert"), args.tls_cert, "--tls-cert")
        key = check_private_key(read_file(args.tls_key, "--tls-key"), args.tls_key, "--tls-key")
    if args.token_file is not None:
        token = parse_tokens(read_file(args.token_file, "--token-file"), args.token_file, "--token-file")[0]
    return Client(
        args.target,
        root_certificates=ca,
        certificate_chain=cert,
        private_key=key,
        token=None if token is None else token.decode("ascii"),
        insecure_token=args.insecure_token,
        timeout=PREDICT_TIMEOUT,
        retries=0,
        options=[("grpc.ssl_target_name_override", args.tls_server_name)] if args.tls_server_name else [],
    )


def _wait_serving(client: Client, seconds: float) -> bool:
    """Whether the server reports SERVING within ``seconds`` (asked every 0.2 s)."""
    import grpc

    from bnserve.server.client import InvalidReply

    deadline = time.monotonic() + seconds
    while True:
        try:
            if client.health(timeout=1.0) == "SERVING":
                return True
        except (grpc.RpcError, InvalidReply):
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def _open_client(args: argparse.Namespace, command: argparse.ArgumentParser) -> Client | None:
    """``_client(args)``, or None once a file it cannot use is reported; a token that would go
    in plaintext is a usage error naming the flags."""
    from bnserve.server.client import PlaintextToken
    from bnserve.server.security import SecurityConfigError

    try:
        return _client(args)
    except SecurityConfigError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return None
    except PlaintextToken:
        command.error(
            f"--token-file: refusing to send the token in plaintext to {args.target}, where anyone on the path "
            "could read it: connect with TLS (--tls-ca), or pass --insecure-token if the path is protected "
            "otherwise (a service mesh, a VPN)"
        )


def _rpc_error(exc: grpc.RpcError) -> int:
    import grpc

    code = exc.code().name if isinstance(exc, grpc.Call) else "UNKNOWN"
    details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    print(f"{PROG}: error: {code}: {shown(details or '')}", file=sys.stderr)
    return 1


def _health(args: argparse.Namespace, command: argparse.ArgumentParser) -> int:
    """The status, printed; 0 when SERVING. For a probe where Kubernetes' own gRPC probe cannot
    go: it speaks no TLS (deploy/k8s/deployment.yaml)."""
    import grpc

    from bnserve.server.client import InvalidReply

    client = _open_client(args, command)
    if client is None:
        return 1
    with client:
        try:
            status = client.health(args.service, timeout=args.timeout)
        except grpc.RpcError as exc:
            return _rpc_error(exc)
        except InvalidReply as exc:
            print(f"{PROG}: error: {shown(exc.message)}", file=sys.stderr)
            return 1
    print(status)
    return 0 if status == "SERVING" else 1


def _predict(args: argparse.Namespace, command: argparse.ArgumentParser) -> int:
    """One Predict through bnserve's Client, printed as the PredictResponse's JSON (a row per
    instance, its label and probabilities); the reply is bounded and checked by the Client."""
    import grpc
    from google.protobuf import json_format

    from bnserve.server.api import predictor_pb2 as pb
    from bnserve.server.client import InvalidReply

    client = _open_client(args, command)
    if client is None:
        return 1
    with client:
        if args.wait > 0 and not _wait_serving(client, args.wait):
            print(f"{PROG}: error: {args.target} was not SERVING within {args.wait} s", file=sys.stderr)
            return 1
        try:
            answer = client.predict(
                args.model,
                args.instance or [{}],
                version=args.version,
                alias=args.alias,
                unknown=args.unknown,
                extra_columns="error",  # a feature the model does not know is the server's to refuse
            )
        except grpc.RpcError as exc:
            return _rpc_error(exc)
        except InvalidReply as exc:
            print(f"{PROG}: error: {shown(exc.message)}", file=sys.stderr)
            return 1
    reply = pb.PredictResponse(
        model=answer.model,
        version=answer.version,
        classes=answer.classes,
        predictions=[
            pb.Prediction(label=str(label), probabilities=row.tolist())
            for label, row in zip(answer.labels, answer.probabilities, strict=True)
        ],
    )
    print(json_format.MessageToJson(reply, indent=2, ensure_ascii=True))  # labels escaped: no raw control
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command in ("predict", "health"):
        command = build_parser().subcommands[args.command]
        try:
            return (_predict if args.command == "predict" else _health)(args, command)
        except BrokenPipeError:  # `server predict … | head`: the reader left; not an error (as trainer's)
            sys.stdout = open(os.devnull, "w")  # what Python's flush at exit writes to
            return 0
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


def run() -> NoReturn:
    """The ``server`` console script: ``main``, then the process ends without the garbage
    collector's last passes (``bnserve.process_exit``)."""
    exit_with(main)


if __name__ == "__main__":
    run()
