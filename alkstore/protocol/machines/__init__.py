"""machines."""
