"""Placeholder: filled in by its owner."""

from flask import Blueprint

blueprint = Blueprint("gmail", __name__)
