"""Build script; the metadata lives in setup.cfg."""

from setuptools import setup

setup()
