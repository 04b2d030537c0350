"""gflkit: graph-based federated learning, five papers reproduced on one engine (see README.md)."""
from gflkit.lifeline import watch_parent

watch_parent()  # a kernel that `gflkit notebook` started ends with it
