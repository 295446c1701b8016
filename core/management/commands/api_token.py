"""API tokens from the command line: list, create, revoke.

manage.py api_token list [USER]
manage.py api_token create USER --name WHAT [--days 90 | --never-expires]
manage.py api_token revoke PREFIX_OR_ID
manage.py api_token USER --name WHAT          (create, as before)
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from core.errors import AppError
from core.models import ApiToken
from core.services import DEFAULT_TOKEN_DAYS, api_token_create, api_token_revoke

ACTIONS = ("list", "create", "revoke")


class Command(BaseCommand):
    help = "List, create (printed once) or revoke API tokens."

    def add_arguments(self, parser):
        parser.add_argument("words", nargs="+", metavar="ACTION ARG", help="list|create|revoke")
        parser.add_argument("--name", default="cli", help="what will use the token")
        parser.add_argument(
            "--days", type=int, default=DEFAULT_TOKEN_DAYS, help="lifetime (default 90)"
        )
        parser.add_argument("--never-expires", action="store_true")

    def handle(self, *args, words: list[str], **options):
        action, rest = (words[0], words[1:]) if words[0] in ACTIONS else ("create", words)
        try:
            if action == "list":
                self._list(rest)
            elif action == "revoke":
                self._revoke(rest)
            else:
                self._create(rest, options)
        except AppError as exc:
            raise CommandError(str(exc)) from exc

    def _create(self, rest: list[str], options) -> None:
        if len(rest) != 1:
            raise CommandError("usage: api_token create USER --name WHAT [--days N]")
        username = rest[0]
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user named {username}")
        days = None if options["never_expires"] else options["days"]
        token, secret = api_token_create(user=user, name=options["name"], days=days, via="command")
        self.stdout.write(secret)
        expiry = f"expires {token.expires_at:%Y-%m-%d}" if token.expires_at else "never expires"
        self.stderr.write(
            f"token {token.prefix}… for {username} ({token.name}), {expiry}; store it now."
        )

    def _list(self, rest: list[str]) -> None:
        tokens = ApiToken.objects.select_related("user").order_by("user__username", "-created_at")
        if rest:
            tokens = tokens.filter(user__username=rest[0])
        now = timezone.now()
        self.stdout.write(
            f"{'id':>5}  {'prefix':<12} {'user':<16} {'state':<8} {'expires':<10} "
            f"{'last used':<16} name"
        )
        for token in tokens:
            last = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
            expires = f"{token.expires_at:%Y-%m-%d}" if token.expires_at else "never"
            self.stdout.write(
                f"{token.pk:>5}  {token.prefix:<12} {token.user.get_username():<16} "
                f"{token.state_at(now):<8} {expires:<10} {last:<16} {token.name}"
            )

    def _revoke(self, rest: list[str]) -> None:
        if len(rest) != 1:
            raise CommandError("usage: api_token revoke PREFIX_OR_ID")
        wanted = rest[0].rstrip("…")
        if wanted.isdigit():
            matches = list(ApiToken.objects.filter(pk=int(wanted)).select_related("user"))
        elif len(wanted) >= 6:
            matches = list(
                ApiToken.objects.filter(prefix__startswith=wanted).select_related("user")
            )
        else:
            raise CommandError("Name the token by its id or at least 6 characters of its prefix.")
        if len(matches) != 1:
            raise CommandError(
                f"{len(matches)} tokens match {wanted!r}: use the id (api_token list)."
            )
        token = api_token_revoke(token=matches[0], via="command")
        self.stdout.write(f"revoked {token.prefix}… ({token.name}) of {token.user.get_username()}")
