"""Settings for the example: the database comes from the environment, as the
``alkstore`` command reads it (``ALKSTORE_DSN``, else the SQLite file
``ALKSTORE_DB``), so the web app, alkstore and the worker share one database."""

import os

from psycopg.conninfo import conninfo_to_dict

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["orders"]
ROOT_URLCONF = "shop.urls"
WSGI_APPLICATION = "shop.wsgi.application"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DSN = os.environ.get("ALKSTORE_DSN") or None
if DSN is not None:
    params = conninfo_to_dict(DSN)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",  # psycopg 3
            "NAME": params.pop("dbname", ""),
            "USER": params.pop("user", ""),
            "PASSWORD": params.pop("password", ""),
            "HOST": params.pop("host", ""),
            "PORT": str(params.pop("port", "")),
            "OPTIONS": params,  # the rest of the DSN (search_path options, sslmode, ...)
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("ALKSTORE_DB") or "app.db",
        }
    }
