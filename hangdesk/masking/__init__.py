"""Masking: the one home of it. Jobs keep tokens in their environments, command lines and
logs; whatever of them reaches a person goes through here, once, where it leaves for them:

- what a node wrote, and what the console derives from it (the diagnosis, a node's failure
  reason, a scheduler's reading), as it is stored by the console (collectors' services), so
  no reader masks it again; `hangdesk diagnose` masks its own output;
- raw evidence, which is kept raw for the responders who download it, as a page shows it
  (`masked_artifact_text`, `mask_environment`, `masked_snapshot`);
- what people write (notes, decisions, post-mortem sections), as it is saved or shared.

`text.py` knows what looks secret and how it is masked (`[REDACTED:1a2b3c4d]`, a keyed
fingerprint); `evidence.py` applies it to each kind of evidence. Pure: no Django.
"""

from .evidence import (
    mask_piece,
    masked_artifact_text,
    masked_diagnosis,
    masked_node,
    masked_snapshot,
)
from .text import (
    console_key,
    fingerprint,
    is_masked,
    is_secret_name,
    looks_secret,
    mask_environment,
    mask_json,
    mask_text,
    mask_value,
    masked,
    set_default_key,
)

__all__ = [
    "console_key",
    "fingerprint",
    "is_masked",
    "is_secret_name",
    "looks_secret",
    "mask_environment",
    "mask_json",
    "mask_piece",
    "mask_text",
    "mask_value",
    "masked",
    "masked_artifact_text",
    "masked_diagnosis",
    "masked_node",
    "masked_snapshot",
    "set_default_key",
]
