"""Message commands: ``queryMsgById``, ``queryMsgByKey``, ``queryMsgByOffset``, ``resendDeadLetter``,
``sendMessage``, ``consumeMessage``."""
