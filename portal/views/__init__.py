"""One blueprint per area of the portal."""
