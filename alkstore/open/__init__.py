"""open."""
