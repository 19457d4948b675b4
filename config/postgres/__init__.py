"""Django's PostgreSQL backend with a health check that costs no round trip when
nothing can be wrong (`base.DatabaseWrapper.is_usable`); the settings name it as the
ENGINE of a PostgreSQL DATABASE_URL."""
