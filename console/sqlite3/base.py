"""Django's SQLite backend, plus one thing: the folder of the database file is made when the
first connection opens it (`make run`, `manage.py migrate`, the SQLite test fallback), so the
settings never make directories when they are imported.
"""

from pathlib import Path

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        database = str(conn_params["database"])
        if not self.creation.is_in_memory_db(database) and not database.startswith("file:"):
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        return super().get_new_connection(conn_params)
