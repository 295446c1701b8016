"""Pure analysis of hung-job evidence: parsers, rank timeline, stack groups, verdicts.

Nothing in this package imports Django or paramiko; it works on plain data.
"""
