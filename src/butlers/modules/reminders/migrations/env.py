from butlers.migrations.env import run_migrations

run_migrations()
