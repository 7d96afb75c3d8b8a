"""Shared fixtures of every suite: real gunicorn processes (`start_gunicorn`)."""

pytest_plugins = ["tests.gunicorn_process"]
