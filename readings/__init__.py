"""The readings of a diagnosis for people: the class names and their advice, the guided
questions and their branches, the post-mortem draft's prose and the rank timeline's figure.

Everything here reads the typed `analysis.diagnosis.Diagnosis` (a stored one through
`Diagnosis.from_json`), never the engine's inputs and never a raw dict; like `analysis/`, it
imports no Django and no paramiko.
"""
