"""Screens of the dashboard: the live view, the plot view and the pickers."""
