"""Execution state per tmux session and heartbeat decisions."""
