"""``mqdashboard``: RocketMQ Dashboard's pages (cluster, topics, consumer groups, messages, dead letters) as a small
Starlette app over the ``oms`` resource manager; it never imports the broker."""
