"""The kopf operator that reconciles Butler resources."""
