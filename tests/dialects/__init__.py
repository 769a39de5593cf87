"""The frameworks' dialects against the frameworks themselves, and the translator."""
