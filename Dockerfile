# The portal under gunicorn, as the README's "Run in production" describes. Build: docker build -t flow-portal .
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORTAL_BIND=0.0.0.0:8000

RUN groupadd --system --gid 10001 portal \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home portal

WORKDIR /app
COPY . .
# Editable, so the package finds templates/ and static/ beside it in /app (a wheel does not carry them);
# the translations are compiled here because messages.mo is a build output, not kept in git.
RUN pip install -e . \
    && pybabel compile -d portal/translations \
    && mkdir -p instance \
    && chown 10001:10001 instance

USER 10001:10001
EXPOSE 8000
# /healthz never touches the database: it says the process answers. Port 8000 as in PORTAL_BIND above.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"]
