"""Celery settings of the example project: the only line that names OrbitMQ is ``broker_url``."""

import os

broker_url = os.environ.get("CELERY_BROKER_URL", "rocketmq://127.0.0.1:8081")
result_backend = "rpc://"
task_acks_late = True  # a task whose worker dies is run again by another worker
task_reject_on_worker_lost = True
broker_transport_options = {"invisible_time": 30}  # renewed while a worker holds the task
