"""Rules for free text that people type (names, reasons, descriptions)."""

from __future__ import annotations

import unicodedata

from config.errors import ValidationFailed

# Cc: control characters (NUL, ESC, DEL, ...); Cs: lone surrogates, which PostgreSQL
# cannot store; Cf: invisible format characters (e.g. right-to-left overrides that make
# a name read differently from what it is); Zl/Zp: line and paragraph separators.
# Multi-line text (reasons) keeps newlines, tabs and format characters (emoji joiners).
_REFUSED_IN_NAMES = {"Cc", "Cs", "Cf", "Zl", "Zp"}
_REFUSED_IN_MULTILINE = {"Cc", "Cs"}
_ALLOWED_IN_MULTILINE = {"\n", "\t", "\r"}


def refuse_control_characters(text: str, *, field: str, multiline: bool) -> None:
    """Raise ValidationFailed naming `field` when `text` holds a control or invisible
    character (newlines and tabs are allowed in multi-line text such as reasons)."""
    refused = _REFUSED_IN_MULTILINE if multiline else _REFUSED_IN_NAMES
    for position, char in enumerate(text):
        if multiline and char in _ALLOWED_IN_MULTILINE:
            continue
        if unicodedata.category(char) in refused:
            raise ValidationFailed(
                f"{field} contains the control or invisible character U+{ord(char):04X} at "
                f"position {position + 1}; use printable text"
                + (" (newlines and tabs are fine)." if multiline else "."),
                field=field,
            )


def clean_text(
    value: object, *, field: str, max_length: int, multiline: bool, blank_message: str
) -> str:
    """`value` as text people typed: a string, stripped, 1 to `max_length` characters,
    without control characters (`refuse_control_characters`). Raises ValidationFailed
    naming `field`; `blank_message` when it is blank."""
    if not isinstance(value, str):
        raise ValidationFailed(f"{field} must be text, got {type(value).__name__}.", field=field)
    text = value.strip()
    if not text:
        raise ValidationFailed(blank_message, field=field)
    if len(text) > max_length:
        raise ValidationFailed(
            f"{field} has {len(text)} characters; at most {max_length} are allowed.",
            field=field,
        )
    refuse_control_characters(text, field=field, multiline=multiline)
    return text


def clean_reason(value: object, *, required_message: str, max_length: int = 500) -> str:
    """A reason for the audit trail (`clean_text` on field "reason", newlines and tabs
    allowed); `required_message` when it is missing (None) or blank."""
    return clean_text(
        "" if value is None else value,
        field="reason",
        max_length=max_length,
        multiline=True,
        blank_message=required_message,
    )


def is_id_text(text: str) -> bool:
    """Whether `text` is an id written in ASCII digits. `str.isdigit` alone also takes
    characters such as "²" or "٣" that `int()` refuses (a 500 the fuzzer found)."""
    return text.isascii() and text.isdigit()
