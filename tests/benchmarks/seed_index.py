"""Seed the flow index with synthetic flows for benchmarks: valid Nordic national ids, Nordic names.

Run: .venv/bin/python tests/benchmarks/seed_index.py DATABASE_URL COUNT [INDEX_KEY]
The database must be migrated (`flask --app portal db upgrade`). Rows are inserted in bulk (COPY on
PostgreSQL), then the table is vacuumed and analysed so the planner knows its size. Deterministic: the same
count gives the same rows.
"""

import random
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import create_engine, text
from stdnum import luhn
from stdnum.no import fodselsnummer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from portal.flowindex.keys import name_key, read_national_id  # noqa: E402

DEFAULT_KEY = b"benchmark-index-key-0000"
SURNAMES = (  # noqa: SIM905
    "Hansen Johansen Olsen Larsen Andersen Pedersen Nilsen Kristiansen Jensen Karlsen Johnsen Pettersen "
    "Eriksen Berg Haugen Hagen Johannessen Andreassen Jacobsen Dahl Jørgensen Halvorsen Henriksen Lund "
    "Sørensen Jakobsen Moen Gundersen Iversen Strand Solberg Svendsen Eide Knutsen Martinsen Paulsen "
    "Bakken Kristoffersen Mathisen Lie Amundsen Nguyen Rasmussen Ali Lunde Solheim Berge Moe Nygård "
    "Bjørnstad Bjørklund Ødegård Østby Åsheim Ærø Andersson Johansson Karlsson Nilsson Eriksson "
    "Larsson Olsson Persson Svensson Gustafsson Pettersson Jonsson Jansson Hansson Bengtsson Jönsson "
    "Lindberg Lindström Lindqvist Lindgren Berglund Fredriksson Sandberg Henriksson Forsberg Sjöberg "
    "Korhonen Virtanen Mäkinen Nieminen Mäkelä Hämäläinen Laine Heikkinen Koskinen Järvinen Lehtonen "
    "Lehtinen Saarinen Salminen Heinonen Niemi Heikkilä Kinnunen Salonen Turunen Salo Laitinen Tuominen"
).split()
STATUSES = ("Unopened", "Opened", "Accepted", "Rejected")
COLUMNS = (  # noqa: SIM905
    "flow_id reference_id flow_number consent_status lifecycle archived country national_id_hash national_id_masked "
    "last_name last_name_key birth_date created_at updated_at version has_incidents state_at status_at lifecycle_at "
    "status_source lifecycle_source changed_at change_source seen_at listed_at stub"
).split()
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def national_id(chooser: random.Random) -> tuple[str, date]:
    """A valid Norwegian, Swedish or Finnish number and its birth date."""
    born = date(1940, 1, 1) + timedelta(days=chooser.randrange(365 * 65))
    while True:
        country = chooser.choice("nsf")
        # Norway tells the century by the individual number: 000-499 in the 1900s, 500-999 from 2000.
        later = 500 if country == "n" and born.year >= 2000 else 0
        individual = f"{chooser.randrange(100, 500) + later:03d}"
        if country == "s":
            check = luhn.calc_check_digit(born.strftime("%y%m%d") + individual)
            return born.strftime("%Y%m%d") + "-" + individual + check, born
        if country == "f":
            sign = "-" if born.year < 2000 else "A"
            check = "0123456789ABCDEFHJKLMNPRSTUVWXY"[int(born.strftime("%d%m%y") + individual) % 31]
            return born.strftime("%d%m%y") + sign + individual + check, born
        base = born.strftime("%d%m%y") + individual
        first = fodselsnummer.calc_check_digit1(base)
        second = fodselsnummer.calc_check_digit2(base + first)
        if len(first) == 1 and len(second) == 1:  # a check digit of 10: no such number, draw again
            return base + first + second, born


def rows(count: int, index_key: bytes):
    chooser = random.Random(20261123)
    for number in range(count):
        written, _born = national_id(chooser)
        parsed = read_national_id(written)
        surname = chooser.choice(SURNAMES) + ("" if chooser.random() < 0.7 else f"-{chooser.choice(SURNAMES)}")
        status = chooser.choice(STATUSES)
        archived = chooser.random() < 0.2
        lifecycle = "cancelled" if archived else "completed" if status in ("Accepted", "Rejected") else "active"
        created = START + timedelta(seconds=number * 60 + chooser.randrange(60))
        changed = created + timedelta(minutes=chooser.randrange(60 * 24 * 30))
        yield (
            f"bench-{number:08d}",
            f"LA-{10001 + number}",
            10001 + number,
            status,
            lifecycle,
            archived,
            parsed.country,
            parsed.keyed_hash(index_key),
            parsed.masked,
            surname,
            name_key(surname),
            parsed.birth_date,
            created,
            changed,
            chooser.randrange(1, 6),
            chooser.random() < 0.05,
            changed,
            changed,
            changed,
            "sync",
            "sync",
            changed,
            "sync",
            changed,
            changed,
            False,
        )


def seed(url: str, count: int, index_key: bytes = DEFAULT_KEY) -> float:
    """Insert `count` flows; seconds taken."""
    started = time.perf_counter()
    engine = create_engine(url)
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            with connection.connection.cursor().copy(f"COPY flow_index ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                for row in rows(count, index_key):
                    copy.write_row(row)
        else:
            names, values = ", ".join(COLUMNS), ", ".join(f":{column}" for column in COLUMNS)
            insert = text(f"INSERT INTO flow_index ({names}) VALUES ({values})")
            batch = []
            for row in rows(count, index_key):
                batch.append(dict(zip(COLUMNS, row, strict=True)))
                if len(batch) == 10_000:
                    connection.execute(insert, batch)
                    batch = []
            if batch:
                connection.execute(insert, batch)
    # VACUUM too: as autovacuum would have by now, so index-only scans need not visit the table
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE flow_index" if engine.dialect.name == "postgresql" else "ANALYZE"))
    engine.dispose()
    return time.perf_counter() - started


if __name__ == "__main__":
    key = sys.argv[3].encode() if len(sys.argv) > 3 else DEFAULT_KEY
    seconds = seed(sys.argv[1], int(sys.argv[2]), key)
    print(f"seeded {sys.argv[2]} flows in {seconds:.1f} s")
