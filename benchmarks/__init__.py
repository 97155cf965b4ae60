"""Repeatable measurements; each prints its figures (see README.md)."""
