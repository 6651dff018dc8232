"""``trainer keygen``: a key pair for signed versions, so nobody needs openssl for it."""

from __future__ import annotations

import argparse


def add_keygen(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("keygen", help="make an Ed25519 key pair for signing versions (--signing-key, --verify-key)")
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="write signing-key.pem (private, mode 600) and verify-key.pem (public) here; an existing key is "
        "never overwritten",
    )
    p.set_defaults(run=_keygen)


def _keygen(args: argparse.Namespace) -> int:
    from bnserve.store.signing import generate

    private, public, key_id = generate(args.out)
    print(f"key {key_id}")
    print(f"  {private}: the private key; keep it secret, for `trainer fit|import --signing-key`")
    print(f"  {public}: the public key, for `server serve --verify-key`")
    return 0
