from django.apps import AppConfig


class WatchConfig(AppConfig):
    name = "watch"
    verbose_name = "Watch"
    default_auto_field = "django.db.models.BigAutoField"
