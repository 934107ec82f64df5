"""Screens of the dashboard: live, compare, diff, plot, and the pickers. Each draws from the
``DashboardView`` it is given (never from the app's insides); keys act through the app."""
