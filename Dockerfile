# The portal under gunicorn, as the README's "Run in production" describes. Build: docker build -t flow-portal .

# First the wheel: it carries the templates, the static files and the compiled translations (setup.py).
FROM python:3.12-slim AS wheel
WORKDIR /src
COPY . .
RUN pip wheel --no-deps --no-cache-dir -w /wheels .

# Then the image: the installed wheel, the gunicorn settings and the WSGI entry point; no sources.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORTAL_BIND=0.0.0.0:8000

RUN groupadd --system --gid 10001 portal \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home portal

WORKDIR /app
COPY --from=wheel /wheels /wheels
COPY gunicorn.conf.py wsgi.py ./
RUN pip install /wheels/*.whl \
    && rm -rf /wheels \
    && mkdir -p instance \
    && chown 10001:10001 instance

USER 10001:10001
EXPOSE 8000
# /healthz never touches the database: it says the process answers. Port 8000 as in PORTAL_BIND above.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"]
