"""Placeholder: filled in by its owner."""

from flask import Blueprint

blueprint = Blueprint("google_oauth", __name__)
