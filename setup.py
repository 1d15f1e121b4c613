"""Shim for Beam's ``--setup_file=./setup.py`` (docs/scale_out.md).

Everything is configured in pyproject.toml; Beam runs ``python setup.py sdist``
when the ``build`` package is not installed, and ships the result to the workers.
"""

from setuptools import setup

setup()
