"""What looks secret in text, and how it is masked.

Evidence comes from the job's own processes: its environment (`/proc/PID/environ`), its command
lines (`ps`), its logs. Jobs keep tokens there (`HF_TOKEN`, `WANDB_API_KEY`, `HANGDESK_TOKEN`,
`--password=...`), so everything a person or an export sees goes through this module first.

A masked value keeps its identity without its content: `[REDACTED:1a2b3c4d]`, where the
fingerprint is a keyed hash (HMAC-SHA256) of the raw value. Equal raw values mask to the same
token and different ones to different tokens, so an environment diff still shows which ranks
differ. The key is the caller's (the console's is `console_key(SECRET_KEY)`, set by core at
start-up); without one, a random key made once per process.

Secrets are found by name (`*_TOKEN`, `*_SECRET`, `*PASSWORD*`, `*_API_KEY`, `AWS_*`, ...) and
by shape (`hf_...`, `ghp_...`, `AKIA...`, JWTs, private-key blocks, `scheme://user:pass@host`,
`--token X` / `--password=X` arguments, `Bearer X`, long high-entropy words). Matching is linear
in the text: one pass that splits words at delimiters, then `str` checks on each word.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
from collections import Counter

MARK = "REDACTED:"
_FINGERPRINT_HEX = 8

_default_key: bytes = os.urandom(32)


def set_default_key(key: bytes | str) -> None:
    """Use `key` for every fingerprint made without an explicit key (the console calls this)."""
    global _default_key
    _default_key = key.encode() if isinstance(key, str) else bytes(key)


def console_key(secret_key: str) -> bytes:
    """The console's key, derived from its SECRET_KEY: every process of one installation (web,
    workers, commands) derives the same one, so a value masked by the analysis worker and one
    masked by the web process carry the same fingerprint, and another installation's
    fingerprints say nothing about this one's values. (Django's salted_hmac, SHA-1, with the
    salt "hangdesk.masking" and the value "fingerprint": the key every stored mask was made
    with.)"""
    salted = hashlib.sha1(b"hangdesk.masking" + secret_key.encode()).digest()  # noqa: S324
    return hmac.new(salted, b"fingerprint", hashlib.sha1).digest()


def fingerprint(value: str, *, key: bytes | None = None) -> str:
    digest = hmac.new(key or _default_key, value.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return digest.hexdigest()[:_FINGERPRINT_HEX]


def masked(value: str, *, key: bytes | None = None) -> str:
    """The token shown instead of `value`."""
    return f"[{MARK}{fingerprint(value, key=key)}]"


def is_masked(value: str) -> bool:
    return value.startswith("[" + MARK) and value.endswith("]") and len(value) < 40


# --- names -----------------------------------------------------------------------------------

# Whole names that are secrets whatever their words say.
_SECRET_NAMES = frozenset(
    {
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "WANDB_API_KEY",
        "HANGDESK_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "OPENAI_API_KEY",
        "SENTRY_DSN",
        "DATABASE_URL",
        "REDIS_URL",
        "CELERY_BROKER_URL",
        "MLFLOW_TRACKING_PASSWORD",
        "PGPASSWORD",
        "NETRC",
    }
)
# Names with a secret-looking word that hold none: paths, sockets, settings.
_NOT_SECRET_NAMES = frozenset(
    {
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "GPG_AGENT_INFO",
        "KEYTIMEOUT",
        "TOKENIZERS_PARALLELISM",
        "PWD",
        "OLDPWD",
    }
)
# Launcher, library and scheduler variables: configuration, never credentials.
_NOT_SECRET_PREFIXES = (
    "NCCL_",
    "TORCH_",
    "TORCHELASTIC_",
    "PYTORCH_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "GLOO_",
    "UCX_",
    "FI_",
    "NVSHMEM_",
    "OMP_",
    "MKL_",
    "SLURM_",
    "PMI_",
    "PMIX_",
    "OMPI_",
    "LC_",
)
_AWS_NOT_SECRET = frozenset(
    {"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CA_BUNDLE", "AWS_CONFIG_FILE"}
)
# Words (between underscores or dashes) that make a name secret.
_SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "PWD",
        "KEY",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "AUTH",
        "AUTHORIZATION",
        "PRIVATE",
        "COOKIE",
        "DSN",
        "BEARER",
    }
)
# Endings of a glued word (`HFTOKEN`, `MYAPIKEY`, `DBPASSWORD`).
_SECRET_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "ACCESSKEY", "SECRETKEY")
_NAME_MAX = 256


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or field called `name` holds a secret (`--hf-token`, `HF_TOKEN`)."""
    if not name or len(name) > _NAME_MAX:
        return False
    upper = name.strip().lstrip("-").upper().replace("-", "_").replace(".", "_")
    if upper in _SECRET_NAMES:
        return True
    if upper in _NOT_SECRET_NAMES or upper.startswith(_NOT_SECRET_PREFIXES):
        return False
    if upper.startswith("AWS_"):
        return upper not in _AWS_NOT_SECRET
    for word in upper.split("_"):
        if word in _SECRET_WORDS or (len(word) > 5 and word.endswith(_SECRET_ENDINGS)):
            return True
    return False


# --- shapes ----------------------------------------------------------------------------------

# Maximal runs of characters that are neither blank nor quoting/bracketing punctuation. Each
# character is looked at once, so finditer is linear in the text.
_WORD = re.compile(r"[^\s\"'`<>()\[\]{},;|\\]+")
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_UPPER_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_PREFIXED = (
    ("hf_", 30),
    ("ghp_", 30),
    ("gho_", 30),
    ("ghu_", 30),
    ("ghs_", 30),
    ("ghr_", 30),
    ("github_pat_", 30),
    ("glpat-", 20),
    ("xoxb-", 20),
    ("xoxp-", 20),
    ("xoxa-", 20),
    ("sk-", 32),
    ("hd_", 20),
)
_GENERIC_MIN = 32
# No shape above matches fewer characters (AKIA + 16, hd_ + 17).
_SHORTEST_SECRET = 20
_GENERIC_MAX = 4096
_ENTROPY_MIN = 4.2


def _entropy(word: str) -> float:
    counts = Counter(word)
    total = len(word)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _is_aws_key_id(word: str) -> bool:
    return len(word) == 20 and word[:4] in ("AKIA", "ASIA") and set(word) <= _UPPER_ALNUM


def _is_jwt(word: str) -> bool:
    if not word.startswith("eyJ") or word.count(".") != 2:
        return False
    parts = word.split(".")
    return all(len(p) >= 8 and set(p) <= _B64_CHARS for p in parts)


def _is_high_entropy(word: str) -> bool:
    """A long word of base64 characters that mixes cases and digits like a random key does.

    Paths, hex digests (one case), mangled C++ symbols and dotted names do not qualify.
    """
    if not _GENERIC_MIN <= len(word) <= _GENERIC_MAX or word.startswith(("_Z", "/")):
        return False
    if not set(word) <= _B64_CHARS or "__" in word or word.count("/") > 2:
        return False
    if "=" in word.rstrip("="):  # `name=value`, not base64 padding
        return False
    has_upper = any(c.isupper() for c in word)
    has_lower = any(c.islower() for c in word)
    has_other = any(c.isdigit() or c in "+/" for c in word)
    return has_upper and has_lower and has_other and _entropy(word) >= _ENTROPY_MIN


def looks_secret(word: str) -> bool:
    """Whether one word (no blanks) has the shape of a token, key or credential."""
    core = word.rstrip(".:,")
    for prefix, min_length in _PREFIXED:
        if core.startswith(prefix) and len(core) >= min_length:
            tail = core[len(prefix) :].replace("_", "").replace("-", "")
            return bool(tail) and set(tail) <= _ALNUM
    return _is_aws_key_id(core) or _is_jwt(core) or _is_high_entropy(core)


# --- masking ---------------------------------------------------------------------------------


def mask_value(name: str, value: str, *, key: bytes | None = None) -> str:
    """The value of variable `name` as a person may see it."""
    if not value or is_masked(value):
        return value
    if is_secret_name(name):
        return masked(value, key=key)
    return mask_text(value, key=key)


def mask_environment(env: dict[str, str], *, key: bytes | None = None) -> dict[str, str]:
    return {name: mask_value(name, value, key=key) for name, value in env.items()}


def _mask_url_credentials(word: str, key: bytes | None) -> str | None:
    """`scheme://user:pass@host/...` -> `scheme://user:[REDACTED:..]@host/...`."""
    scheme_end = word.find("://")
    if scheme_end < 1:
        return None
    start = scheme_end + 3
    at = word.find("@", start)
    if at < 0:
        return None
    slash = word.find("/", start)
    if 0 <= slash < at:
        return None
    colon = word.find(":", start, at)
    if colon < 0:
        # `https://TOKEN@github.com`: a lone user part is a token when it looks like one.
        user = word[start:at]
        return word[:start] + masked(user, key=key) + word[at:] if looks_secret(user) else None
    password = word[colon + 1 : at]
    if not password or is_masked(password):
        return None
    return word[: colon + 1] + masked(password, key=key) + word[at:]


def _mask_assignment(word: str, key: bytes | None) -> tuple[str | None, bool]:
    """`NAME=VALUE` / `--flag=VALUE` / `name:VALUE`: the masked word, and whether the next
    word is the value (`--token=` followed by nothing, `password:` then the value)."""
    for separator in ("=", ":"):
        index = word.find(separator)
        if index <= 0:
            continue
        name, value = word[:index], word[index + 1 :]
        if separator == ":" and value.startswith("//"):
            return None, False  # a URL, not a field
        if not is_secret_name(name):
            return None, False
        if not value.strip("=:"):
            return None, True
        if is_masked(value) or value.startswith(MARK):
            return word, False
        return word[: index + 1] + masked(value, key=key), False
    return None, False


def _takes_value(word: str, text: str, end: int) -> bool:
    """A secret flag (`--token`), `Bearer`, or a secret field name followed by `:` or `=`."""
    if word.startswith("--"):
        return is_secret_name(word[2:])
    if word in ("Bearer", "bearer", "BEARER"):
        return True
    if is_secret_name(word):
        following = text[end : end + 4].lstrip(" \"'")
        return following[:1] in (":", "=")
    return False


def _mask_word(word: str, key: bytes | None) -> tuple[str, bool]:
    """A word masked on its own, and whether the word after it is a secret value."""
    if word.startswith(MARK):
        return word, False
    if "://" in word and "@" in word:
        replaced = _mask_url_credentials(word, key)
        if replaced is not None:
            return replaced, False
    if "=" in word or ":" in word:
        replaced, next_is_value = _mask_assignment(word, key)
        if replaced is not None or next_is_value:
            return replaced or word, next_is_value
    if looks_secret(word):
        return masked(word.rstrip(".:,"), key=key) + word[len(word.rstrip(".:,")) :], False
    return word, False


_PEM_BEGIN = "-----BEGIN "
_PEM_END = "-----END "
_PEM_TAIL = "-----"


def _mask_pem_blocks(text: str, key: bytes | None) -> str:
    """Every `-----BEGIN ... PRIVATE KEY-----` block, up to its END line, replaced whole."""
    out: list[str] = []
    position = 0
    while True:
        begin = text.find(_PEM_BEGIN, position)
        if begin < 0:
            break
        label_end = text.find(_PEM_TAIL, begin + len(_PEM_BEGIN))
        if label_end < 0:
            break
        label = text[begin + len(_PEM_BEGIN) : label_end]
        if "PRIVATE KEY" not in label or len(label) > 64:
            out.append(text[position : label_end + len(_PEM_TAIL)])
            position = label_end + len(_PEM_TAIL)
            continue
        end = text.find(_PEM_END + label + _PEM_TAIL, label_end)
        stop = len(text) if end < 0 else end + len(_PEM_END + label + _PEM_TAIL)
        out.append(text[position:begin])
        out.append(
            f"-----BEGIN {label}----- {masked(text[begin:stop], key=key)} -----END {label}-----"
        )
        position = stop
    out.append(text[position:])
    return "".join(out)


def _mask_words(text: str, key: bytes | None) -> str:
    out: list[str] = []
    position = 0
    value_next = False
    for match in _WORD.finditer(text):
        word = match.group()
        if value_next:
            if word in _VALUE_LEADS:
                continue
            value_next = False
            if word.startswith(MARK):
                continue
            replaced = masked(word, key=key)
        else:
            # A short word without a trigger is neither a secret's shape nor its name.
            if len(word) < _SHORTEST_SECRET and not _has_trigger(word):
                continue
            replaced, value_next = _mask_word(word, key)
            if not value_next:
                value_next = _takes_value(word, text, match.end())
            if replaced == word:
                continue
        out.append(text[position : match.start()])
        out.append(replaced)
        position = match.end()
    if not out:
        return text
    out.append(text[position:])
    return "".join(out)


# Words between a secret's name and its value: `Authorization: Bearer X`, `password = X`.
_VALUE_LEADS = frozenset({":", "=", "Bearer", "Basic"})


def _mask_environ_blob(text: str, key: bytes | None) -> str:
    """`/proc/PID/environ`: NUL-separated `NAME=VALUE` entries, each value masked by its name."""
    entries = []
    for entry in text.split("\0"):
        name, sep, value = entry.partition("=")
        if sep and is_secret_name(name) and value:
            entries.append(f"{name}={mask_value(name, value, key=key)}")
        else:
            entries.append(_mask_words(entry, key))
    return "\0".join(entries)


def mask_text(text: str, *, key: bytes | None = None) -> str:
    """Free text (ps lines, log lines, stacks, an environ blob) with every secret masked."""
    if len(text) < _SHORTEST_SECRET and not any(c in text for c in "=: \0"):
        return text  # one short word: a secret only by its name (mask_value)
    if _PEM_BEGIN in text:
        text = _mask_pem_blocks(text, key)
    if "\0" in text:
        return _mask_environ_blob(text, key)
    if len(text) > _LINEWISE_FROM:
        if "\n" not in text:
            return _mask_line(text, key)  # one long line (a rank list at fleet scale): as one
        return "".join(_mask_line(line, key) for line in text.splitlines(keepends=True))
    return _mask_words(text, key)


# Every substring that any rule above needs (lower case): secret-name words, the named secrets
# without one (`*_URL`, `NETRC`), `AWS_`, `--flags`, URLs and the prefixes of token shapes. A
# line with none of them and no word of 32 characters or more holds nothing to mask.
_TRIGGERS = (
    "token", "secret", "pass", "pwd", "key", "cred", "auth", "private", "cookie", "dsn",
    "bearer", "_url", "netrc", "aws_", "://", "hf_", "gh", "glpat-", "xox", "sk-", "hd_",
    "akia", "asia", "eyj",
)  # fmt: skip
_LINEWISE_FROM = 4096


def _has_trigger(text: str) -> bool:
    lowered = text.lower()
    return any(t in lowered for t in _TRIGGERS)


def _mask_line(line: str, key: bytes | None) -> str:
    # Substring checks and a split, all in C; a base64 run of 32 lies inside a chunk of 32+.
    if _has_trigger(line) or any(len(chunk) >= _GENERIC_MIN for chunk in line.split()):
        return _mask_words(line, key)
    return line


_JSON_DEPTH = 64


def mask_json(data, *, key: bytes | None = None):
    """A JSON-like value with every string masked; a `value` under a dict with a `name` is
    masked as that variable's value (environment diffs, shell start-up findings).

    Strings repeat a lot in a diagnosis (frames, node names in a 4,096-rank table): each
    distinct one is masked once per call."""
    return _JsonMasker(key).walk(data, "", 0)


_PLAIN = frozenset({int, float, bool, type(None)})  # what a walk returns as it is


class _JsonMasker:
    def __init__(self, key: bytes | None) -> None:
        self.key = key
        self.texts: dict[str, str] = {}

    def text(self, value: str) -> str:
        shown = self.texts.get(value)
        if shown is None:
            shown = self.texts[value] = mask_text(value, key=self.key)
        return shown

    def walk(self, data, name: str, depth: int):
        if depth > _JSON_DEPTH:
            return data
        if isinstance(data, str):
            return mask_value(name, data, key=self.key) if name else self.text(data)
        if isinstance(data, list | tuple):
            if _PLAIN.issuperset(map(type, data)):
                return list(data)  # numbers only (a group's ranks: 32,000 of them), in C
            if name or depth + 1 > _JSON_DEPTH:
                return [self.walk(item, name, depth + 1) for item in data]
            return [self._item(item, depth + 1) for item in data]
        if not isinstance(data, dict):
            return data
        own = data.get("name")
        own = own if isinstance(own, str) else name
        if depth + 1 > _JSON_DEPTH:
            return dict(data)
        return {
            field: self.walk(item, own, depth + 1)
            if own and field in ("value", "values")
            else self._item(item, depth + 1)
            for field, item in data.items()
        }

    def _item(self, item, depth: int):
        """walk(item, "", depth) with the common cases (a number, a known string) inline: a
        32,000-rank diagnosis holds a million of them."""
        kind = type(item)
        if kind is str:
            shown = self.texts.get(item)
            return shown if shown is not None else self.text(item)
        if kind is int or kind is float or kind is bool or item is None:
            return item
        return self.walk(item, "", depth)
