"""Topic commands: ``topicList``, ``updateTopic``, ``deleteTopic``, ``topicRoute``, ``topicStatus``."""
