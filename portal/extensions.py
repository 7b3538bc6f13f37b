"""Unbound extension singletons; `create_app` binds them to an app."""

from typing import TYPE_CHECKING, ClassVar

from flask_babel import Babel
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from sqlalchemy import Table
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    if TYPE_CHECKING:
        # Every model here is mapped to a Table (SQLAlchemy types it as any FromClause, which has no insert/update).
        __table__: ClassVar[Table]


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
csrf = CSRFProtect()
login_manager = LoginManager()
babel = Babel()
