"""What broker and filter plugins share about filtering (RocketMQ's ``rocketmq-filter`` library): the Bloom filter
whose bits dispatch stores per message and pulls test before reading it."""

from orbitmq.filter.bloom import BloomFilter, BloomFilterData, set_positions

__all__ = ["BloomFilter", "BloomFilterData", "set_positions"]
