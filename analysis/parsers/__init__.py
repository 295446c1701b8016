"""Parsers for raw evidence text. Each returns what it understood plus a list of problems.

A parser never raises on bad input: garbage becomes a problem string, not an exception.
"""
