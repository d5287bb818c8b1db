"""``mqdashboard``: serve the dashboard for the name servers of ``-n`` (or ``NAMESRV_ADDR``), login on.

Without ``--users`` an ``admin`` account gets a random password, printed once at start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from dashboard.auth import Users, UsersFileError
from oms.url import NAMESRV_ENV

DEFAULT_PORT = 8082


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mqdashboard", description=__doc__)
    parser.add_argument("-n", "--namesrvAddr", help=f"name server host:port[;host:port] (default: ${NAMESRV_ENV})")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    parser.add_argument("--users", type=Path, help="accounts file: name:password or name:sha256:<hex> per line")
    parser.add_argument("--accessKey", help="ACL account the dashboard uses with brokers that have ACL on (admin)")
    parser.add_argument("--secretKey", help="its secret key")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    namesrv = args.namesrvAddr or os.environ.get(NAMESRV_ENV)
    if not namesrv:
        print(f"mqdashboard: no name server: give -n host:port or set {NAMESRV_ENV}", file=sys.stderr)
        return 2
    try:
        if args.users is not None:
            users = Users.load(args.users)
        else:
            users, password = Users.one_time()
            print(f"mqdashboard: log in as admin with password {password}", file=sys.stderr, flush=True)
    except (OSError, UsersFileError) as exc:
        print(f"mqdashboard: {exc}", file=sys.stderr)
        return 2

    import uvicorn

    from dashboard.app import Backend, create_app

    if bool(args.accessKey) != bool(args.secretKey):
        print("mqdashboard: --accessKey and --secretKey go together", file=sys.stderr)
        return 2
    backend = Backend.open(f"oms:rocketmq://{namesrv}/", args.accessKey, args.secretKey)
    app = create_app(backend, users, secrets.token_bytes(32))

    @contextlib.asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        print(f"mqdashboard: serving http://{args.host}:{args.port}/ for {namesrv}", file=sys.stderr, flush=True)
        yield
        backend.close()

    app.router.lifespan_context = lifespan
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    except OSError as exc:
        print(f"mqdashboard: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
