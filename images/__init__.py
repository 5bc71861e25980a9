"""Building the butler and operator images, and running them as the operator renders pods."""
