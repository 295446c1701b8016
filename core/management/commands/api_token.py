from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.services import api_token_create


class Command(BaseCommand):
    help = "Create an API token for a user and print it (it is shown only this once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="what will use the token")

    def handle(self, *args, username: str, name: str, **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user named {username}")
        token, secret = api_token_create(user=user, name=name)
        self.stdout.write(secret)
        self.stderr.write(f"token {token.prefix}… for {username} ({name}); store it now.")
