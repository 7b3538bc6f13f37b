"""What the portal refuses to run with in production: secrets anyone can know or guess, the sandbox,
sign-in throttling that workers do not share. Each rule answers one line naming the setting."""

import base64
import binascii
import math
import re
import string
import zlib

# Values published in this repository (.env.example, scripts, tests, the sandbox). A portal using one
# can have its session cookies forged or its webhooks faked by anyone who has read the code.
SHIPPED_SECRETS = frozenset(
    {
        "change-me-to-a-long-random-string",
        "change-me-to-another-long-random-string",
        "testing-only-secret-key",
        "testing-only-index-key",
        "test-secret-key-0123456789",
        "test-index-key-0123456789",
        "demo-secret",
        "demo-password",
        # the sandbox's published demo webhook secret (SANDBOX_WEBHOOK_SECRET when unset)
        "whsec_Zmxvdy1zYW5kYm94LWRlbW8td2ViaG9vay1zZWNyZXQ=",
        # the Standard Webhooks specification's own example secret (its test vector)
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    }
)
SANDBOX_CLIENT_ID = "demo-client"
KEY_BITS = 256  # PORTAL_SECRET_KEY and PORTAL_INDEX_KEY: 32 bytes of entropy
# The estimate of a random string's bits wobbles around its true value (zlib squeezes a random hex string by
# a few bytes): a 32-byte secret written as hex or base64 must pass, so the bar sits a little below.
KEY_BITS_ESTIMATED = 240
WEBHOOK_SECRET_BYTES = 24
MIN_DISTINCT = 10  # fewer different characters than this is a pattern, not a random string
ZLIB_OVERHEAD = 8  # bytes of header and checksum around zlib's compressed data
# A random string repeats a few letters by chance, which zlib squeezes: about one token_urlsafe(32) in 100,000
# lost its last bits to that and was refused. Two bytes of slack; a pattern is squeezed by far more.
CHANCE_REPEATS = 2
SEQUENCE_SHARE = 0.5  # a random string steps to a neighbour one time in five at most (hex); a pattern nearly always
KEYBOARD_LINES = (
    *(b"qwertyuiop", b"asdfghjkl", b"zxcvbnm", b"1234567890", b"qwertzuiop", b"azertyuiop", b"yxcvbnm"),  # rows
    *(b"1qaz", b"2wsx", b"3edc", b"4rfv", b"5tgb", b"6yhn", b"7ujm", b"8ik,", b"9ol.", b"0p;/"),  # columns
)
HEX_SQUEEZE = 0.70  # zlib writes random hex in about 0.78 of its length, seldom under 0.72
WORD_GAPS = re.compile(r"[\s,.;:!?'\"()-]+")
BITS_PER_WORD = 11  # as if drawn from 2,048 words: generous to a phrase, hard on a sentence
_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)
GENERATE = "python -c 'import secrets; print(secrets.token_urlsafe(48))'"
GENERATE_WHSEC = "generate one: echo whsec_$(openssl rand -base64 32)"


def estimated_bits(text: str) -> float:
    """An upper estimate of a random string's entropy: the bits of the alphabet it draws from, times its
    length once repetition is squeezed out ("0123456789" eight times is worth one "0123456789").

    Nothing for a pattern: few different characters ("aaaa…", "abab…"), or steps that walk an alphabet, a
    keyboard row or column, or a constant stride. Words count as words: a sentence is worth its word count.
    """
    data = text.encode()
    if len(set(text)) < MIN_DISTINCT or is_sequence(data):
        return 0.0
    squeezed = len(zlib.compress(data, 9)) - ZLIB_OVERHEAD
    if set(text.lower()) <= set(string.hexdigits.lower()):
        # zlib's gain on random hex is its 16-letter alphabet, already counted: only repetition is squeezed out
        return min(len(text), squeezed / HEX_SQUEEZE) * 4
    alphabet = sum(len(chars) for chars in _CLASSES if any(char in chars for char in text))
    if any(not char.isalnum() or not char.isascii() for char in text):
        alphabet += 33  # punctuation and everything else
    bits = min(len(text), squeezed + CHANCE_REPEATS) * math.log2(alphabet)
    words = [word for word in WORD_GAPS.split(text) if word.isalpha()]
    if len(words) >= 4 and " " in text:  # a phrase: each word is one of some thousands, not letters at random
        bits = min(bits, len(words) * BITS_PER_WORD)
    return bits


def is_sequence(data: bytes) -> bool:
    """Whether most of `data` walks an alphabet, a keyboard row or column, or keeps one stride (bytes 0, 2, 4…)."""
    steps = [after - before for before, after in zip(data, data[1:], strict=False)]
    walking = sum(
        1
        for index, step in enumerate(steps)
        if abs(step) <= 1 or (index and step == steps[index - 1]) or _on_the_keyboard(data[index], data[index + 1])
    )
    return walking > SEQUENCE_SHARE * max(len(steps), 1)


def _on_the_keyboard(before: int, after: int) -> bool:
    pair = bytes((before, after)).lower()
    return any(pair in line or pair[::-1] in line for line in KEYBOARD_LINES)


def key_problem(name: str, value: str) -> str | None:
    if value in SHIPPED_SECRETS:
        return f"{name} is a value published in the repository; generate one: {GENERATE}"
    if estimated_bits(value) < KEY_BITS_ESTIMATED:
        return f"{name} has less than 32 bytes of entropy; generate one: {GENERATE}"
    return None


def _decoded(secret: str) -> bytes | None:
    """The key bytes of a whsec_ secret, however its base64 is written (padding bits, missing padding)."""
    if not secret.startswith("whsec_"):
        return None
    body = secret.removeprefix("whsec_").rstrip("=")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4))
    except (ValueError, binascii.Error):
        return None


SHIPPED_WEBHOOK_KEYS = frozenset(filter(None, map(_decoded, SHIPPED_SECRETS)))


def webhook_secret_problem(
    secret: str, scheme: str, name: str = "FLOW_WEBHOOK_SECRETS", instead: str = "use the one the Flow Service gave you"
) -> str | None:
    if secret in SHIPPED_SECRETS or _decoded(secret) in SHIPPED_WEBHOOK_KEYS:
        return f"{name} holds a published secret (the sandbox's or an example's); {instead}"
    if scheme == "standard-webhooks":
        try:
            raw = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except (ValueError, binascii.Error):
            return f"{name}: a secret is not whsec_ followed by base64"
        squeezed = len(zlib.compress(raw, 9)) - ZLIB_OVERHEAD
        if min(len(raw), squeezed) < WEBHOOK_SECRET_BYTES or len(set(raw)) < MIN_DISTINCT or is_sequence(raw):
            return f"{name}: a secret is shorter than {WEBHOOK_SECRET_BYTES} random bytes"
    elif estimated_bits(secret) < WEBHOOK_SECRET_BYTES * 8:
        return f"{name}: a secret is shorter than {WEBHOOK_SECRET_BYTES} random bytes"
    return None


def production_problems(settings, workers: int | None) -> list[str]:
    """Every reason `settings` must not run in production, each one line naming its setting.

    `workers` is how many processes serve the portal (PORTAL_WORKERS or WEB_CONCURRENCY), None when nobody said:
    then there may be several, each counting sign-in attempts on its own, so Redis is required.
    """
    problems = [key_problem("PORTAL_SECRET_KEY", settings.secret_key)]
    problems.append(key_problem("PORTAL_INDEX_KEY", settings.index_key.decode()))
    if settings.metrics_token:
        problems.append(key_problem("PORTAL_METRICS_TOKEN", settings.metrics_token))
    problems += [webhook_secret_problem(secret, settings.webhook_scheme) for secret in settings.webhook_secrets]
    if settings.notify_secret:  # receivers of the portal's notices trust it as the portal trusts the service's
        problems.append(
            webhook_secret_problem(settings.notify_secret, "standard-webhooks", "PORTAL_NOTIFY_SECRET", GENERATE_WHSEC)
        )
    if settings.client_id == SANDBOX_CLIENT_ID or (settings.client_secret or "") in SHIPPED_SECRETS:
        problems.append("FLOW_CLIENT_ID/FLOW_CLIENT_SECRET are the sandbox's demo client; production needs your own")
    if settings.client_secret and not settings.client_secret.strip():
        problems.append("FLOW_CLIENT_SECRET is empty")
    if workers is None and not settings.redis_url:
        problems.append(
            "PORTAL_REDIS_URL is required in production unless WEB_CONCURRENCY=1 (or PORTAL_WORKERS=1, which "
            "gunicorn.conf.py sets) says one process serves the portal: sign-in throttling must be shared by every "
            "worker"
        )
    elif workers and workers > 1 and not settings.redis_url:
        problems.append(
            f"PORTAL_REDIS_URL is required with {workers} workers (PORTAL_WORKERS): "
            "sign-in throttling must be shared by every worker"
        )
    return [problem for problem in problems if problem]
