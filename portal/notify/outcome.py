"""How one delivery attempt went, in words an admin can act on (never a secret)."""

from dataclasses import dataclass

DETAIL_LENGTH = 255


@dataclass(frozen=True)
class Outcome:
    ok: bool
    give_up: bool
    detail: str

    @classmethod
    def delivered(cls, detail: str) -> "Outcome":
        return cls(True, False, detail[:DETAIL_LENGTH])

    @classmethod
    def retry(cls, detail: str) -> "Outcome":
        return cls(False, False, detail[:DETAIL_LENGTH])

    @classmethod
    def stop(cls, detail: str) -> "Outcome":
        return cls(False, True, detail[:DETAIL_LENGTH])
