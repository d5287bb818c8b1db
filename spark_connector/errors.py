"""The connector's errors: one exception type carrying a code, so Spark's wrapped traceback still says what failed."""

from __future__ import annotations

from enum import Enum


class ConnectorErrorCode(Enum):
    """What went wrong; the value is the tag that leads the message (``[ROCKETMQ_INVALID_OPTION] ...``)."""

    UNKNOWN_OPTION = "ROCKETMQ_UNKNOWN_OPTION"
    INVALID_OPTION = "ROCKETMQ_INVALID_OPTION"
    TOPIC_NOT_FOUND = "ROCKETMQ_TOPIC_NOT_FOUND"
    INVALID_COLUMN = "ROCKETMQ_INVALID_COLUMN"
    DATA_LOSS = "ROCKETMQ_DATA_LOSS"
    SEND_FAILED = "ROCKETMQ_SEND_FAILED"


class RocketMQConnectorError(ValueError):
    """Raised on the driver for bad options/columns (at query start) and on executors for data loss/send failures.

    A ``ValueError`` because most codes are bad input; ``option`` names the offending option or column.
    """

    def __init__(self, code: ConnectorErrorCode, message: str, option: str | None = None) -> None:
        super().__init__(f"[{code.value}] {message}")
        self.code = code
        self.option = option

    def __reduce__(self) -> tuple[type, tuple[ConnectorErrorCode, str, str | None]]:
        # raised in Python workers and pickled back: keep the code and option across the trip
        message = str(self)
        prefix = f"[{self.code.value}] "
        return (type(self), (self.code, message.removeprefix(prefix), self.option))


def option_error(option: str, message: str, code: ConnectorErrorCode = ConnectorErrorCode.INVALID_OPTION) -> Exception:
    """A bad option: the message starts with the option's name."""
    return RocketMQConnectorError(code, f"option '{option}': {message}", option)
