"""The tests' own PostgreSQL databases: a copy a test is done with comes to the next test as the template left it."""

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError
from support import PostgresDatabases, service_missing

USER = (
    "INSERT INTO users (username, password_hash, role, disabled, created_at)"
    " VALUES (gen_random_uuid()::text, 'x', 'viewer', false, now())"
)


@pytest.fixture
def databases(postgres_run_url):
    if not postgres_run_url:
        service_missing("PostgreSQL is not configured", "PORTAL_TEST_POSTGRES_URL")
    made = PostgresDatabases(postgres_run_url)
    yield made
    made.drop_all()


def run(url: str, *statements: str) -> list:
    engine = create_engine(url)
    with engine.begin() as connection:
        answers = [connection.execute(text(statement)) for statement in statements]
        rows = [answer.all() if answer.returns_rows else None for answer in answers]
    engine.dispose()
    return rows


def test_a_copy_given_back_is_emptied_its_sessions_ended_and_its_ids_counted_from_one_again(databases):
    first = databases.take()
    run(first, USER, USER)
    left_open = create_engine(first).connect()
    left_open.execute(text("SELECT count(*) FROM users"))  # a session in a transaction, as a leaked one would be
    databases.give_back(first)

    again = databases.take()
    assert again == first and databases.made == [first]
    assert run(again, USER, "SELECT id FROM users") == [None, [(1,)]]
    with pytest.raises(OperationalError, match="terminat"):
        left_open.execute(text("SELECT 1"))
    left_open.close()


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TRIGGER refuse BEFORE INSERT ON users EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()",
        "ALTER TABLE users ADD COLUMN extra integer",
        "UPDATE alembic_version SET version_num = '0001_initial'",
        "DROP TABLE alembic_version",
    ],
)
def test_a_copy_whose_schema_a_test_changed_is_replaced_by_a_fresh_one(databases, change):
    first = databases.take()
    run(first, change)
    databases.give_back(first)

    fresh = databases.take()
    assert fresh != first and databases.made == [fresh]
    assert run(fresh, "SELECT count(*) FROM users", "SELECT version_num FROM alembic_version")[0] == [(0,)]
