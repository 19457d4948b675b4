-- The two roles of an Allot database, created once by a superuser (or a role with
-- CREATEROLE and CREATEDB) before the first migration:
--
--   psql -v owner=allot_owner -v owner_password='...' -v app=allot_app \
--        -v app_password='...' -v dbname=allot -f deploy/postgres/roles.sql postgres
--
-- owner: owns the database, its schema and every table; migrations run as it
--        (ALLOT_MIGRATE_DATABASE_URL, allot-migrate.service).
-- app:   what the web and worker processes connect as (DATABASE_URL). It owns nothing, so
--        it cannot ALTER TABLE ... DISABLE TRIGGER, drop or replace a trigger or its
--        function, or truncate; on the audited tables it may only read and add rows
--        (ops/dbroles.py grants that after every migration, and makes pgtrigger.ignore
--        the owner's alone), and it may not create temporary tables, which could shadow
--        the history tables the triggers write to.
\set ON_ERROR_STOP on

CREATE ROLE :"owner" LOGIN PASSWORD :'owner_password'
    NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
CREATE ROLE :"app" LOGIN PASSWORD :'app_password'
    NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
CREATE DATABASE :"dbname" OWNER :"owner";
REVOKE ALL ON DATABASE :"dbname" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"dbname" TO :"app";

\connect :"dbname"
-- The schema is the owner's; the runtime role uses it and creates nothing in it.
ALTER SCHEMA public OWNER TO :"owner";
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO :"app";
-- Tables the owner creates later start readable and appendable by the runtime role only;
-- updates and deletes are granted per table after each migration, audited tables excepted.
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public
    GRANT SELECT, INSERT ON TABLES TO :"app";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public
    GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO :"app";
