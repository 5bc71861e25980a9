"""The e2e harness: a running ecosystem behind one interface, whatever the backend."""
