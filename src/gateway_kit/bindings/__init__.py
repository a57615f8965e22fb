"""Bindings: what serves each stream.

Which goose session a stream's runs talk to and where its goosed lifetime began
(`goose_sessions`); which tmux session drives a stream, so that its active runs are that
session's work (`tmux_sessions`); which user holds each tmux session (`claims`); and what a
tmux session id may be (`names`). Runs, the upstream adapter, the execution state, the hooks
and the app's own runs all read these facts, so they sit below every one of them and import
none of them. Importing this package imports none of its modules.
"""
