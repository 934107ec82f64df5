"""Small widgets of the dashboard, each with its own DEFAULT_CSS."""
