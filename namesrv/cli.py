"""``mqnamesrv``: run one name server until SIGTERM/SIGINT.

Usage: ``mqnamesrv [-c namesrv.conf] [-p PORT] [--host HOST] [--json-log] [--log-level INFO]``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from collections.abc import Sequence
from typing import Any

from namesrv.config import NamesrvConfig
from namesrv.ha_controller import HAController
from namesrv.server import NameServer
from orbitmq.config import ConfigError, build_config, load_properties, startup_error
from orbitmq.ha_state import parse_endpoints
from orbitmq.logging import configure_logging, get_logger


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mqnamesrv", description="OrbitMQ name server (RocketMQ route registry)")
    parser.add_argument("-c", "--config", help="namesrv.conf properties file (RocketMQ keys, e.g. listenPort)")
    parser.add_argument("-p", "--port", type=int, help="listen port (default 9876; 0 = any free port)")
    parser.add_argument("--host", help="bind address (default 0.0.0.0)")
    parser.add_argument("--broker-expired-seconds", type=float, help="drop brokers silent this long (default 120)")
    parser.add_argument("--json-log", action="store_true", help="JSON log lines (production)")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def load_config(args: argparse.Namespace) -> NamesrvConfig:
    values: dict[str, Any] = dict(load_properties(args.config)) if args.config else {}
    if args.port is not None:
        values["listenPort"] = args.port
    if args.host is not None:
        values["host"] = args.host
    if args.broker_expired_seconds is not None:
        values["brokerExpiredSeconds"] = args.broker_expired_seconds
    config = build_config(NamesrvConfig, values)
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(NamesrvConfig)})
    if unknown:
        get_logger("namesrv.cli").warning("config keys OrbitMQ does not know, ignored", keys=", ".join(unknown))
    config.cluster_credentials()  # ACL on without credentials is a configuration error (exit 2)
    config.validate_tls()
    config.validate_metrics()
    return config


async def serve(config: NamesrvConfig) -> None:
    server = NameServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    controller = ha_controller(config)
    if controller is not None:
        controller.start()
    try:
        await stop.wait()
    finally:
        if controller is not None:
            await controller.stop()
        await server.stop()


def ha_controller(config: NamesrvConfig) -> HAController | None:
    if not config.enableControllerInNamesrv:
        return None
    return HAController(
        parse_endpoints(config.controllerAddr),
        max(2, config.controllerLeaseTtlMs // 1000),
        config.controllerPollIntervalMs / 1000,
        config.enableElectUncleanMaster,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(json=args.json_log, level=args.log_level)
    try:
        config = load_config(args)
    except (ConfigError, OSError) as exc:
        print(f"mqnamesrv: {startup_error(exc)}", file=sys.stderr)
        return 2
    try:
        if config.enableControllerInNamesrv:
            parse_endpoints(config.controllerAddr)
    except ValueError as exc:
        print(f"mqnamesrv: controllerAddr: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(config))
    except OSError as exc:  # the port taken: one line naming it
        print(f"mqnamesrv: {startup_error(exc)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
