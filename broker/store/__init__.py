"""RocketMQ's storage design: CommitLog, ConsumeQueue, IndexFile, flush, recovery and retention."""
