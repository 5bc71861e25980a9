"""OAuth 2.0 clients of third-party providers (Google), shared by the dashboard's
bootstrap routes and the modules that use a stored grant."""
