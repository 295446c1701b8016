"""What every app builds on: roles, the application-error base and its one API mapping, API
tokens, the worker heartbeat, and the Celery app the task modules run on.

The lowest floor of the house: it imports no other app of the project (see
docs/architecture.md, "Homes").
"""
