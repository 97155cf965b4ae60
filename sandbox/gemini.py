"""Placeholder: filled in by its owner."""

from flask import Blueprint

blueprint = Blueprint("gemini", __name__)
