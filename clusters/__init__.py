"""Clusters and their nodes, and the rules an SSH spec must pass before anyone connects."""
