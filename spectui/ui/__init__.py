"""The Textual dashboard. Nothing in the headless core imports this package."""
