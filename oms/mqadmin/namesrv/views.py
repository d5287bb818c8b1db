"""What the name-server and broker config commands share: a ``{server: {key: value}}`` listing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO


def print_configs(configs: Mapping[str, Mapping[str, str]], out: TextIO) -> None:
    """RocketMQ's ``============addr============`` block per server, then ``key = value`` lines."""
    for addr, config in configs.items():
        out.write(f"============{addr}============\n")
        for key in sorted(config):
            out.write(f"{key:<50}=  {config[key]}\n")
