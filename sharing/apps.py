from django.apps import AppConfig


class SharingConfig(AppConfig):
    name = "sharing"
    verbose_name = "What leaves the console: post-mortem documents, exports, share links"
