"""Loki, shared by the kernel and job-log signals: the selector templates (LogQL), and running queries side by side."""
