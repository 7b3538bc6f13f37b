"""The RSA private key of self-signed JWT authentication: read and checked once, at start-up and by `keys`."""

from pathlib import Path

from joserfc.jwk import RSAKey

MIN_KEY_BITS = 4096  # DESIGN §3: the service refuses shorter keys


class PrivateKeyError(ValueError):
    """The private key cannot be used: unreadable, not RSA, or too short."""


def load_private_key(path: Path) -> RSAKey:
    try:
        key = RSAKey.import_key(Path(path).read_bytes())
    except OSError as error:
        raise PrivateKeyError(f"cannot read the private key {path}: {error.strerror}") from None
    except Exception:  # joserfc raises several types for a file that is not an RSA PEM
        raise PrivateKeyError(f"{path} is not an RSA private key in PEM form") from None
    if not key.is_private:
        raise PrivateKeyError(f"{path} holds a public key; the private key is needed")
    if key.public_key.key_size < MIN_KEY_BITS:
        bits = key.public_key.key_size
        raise PrivateKeyError(f"{path} is a {bits}-bit key; at least {MIN_KEY_BITS} bits are required")
    return key
