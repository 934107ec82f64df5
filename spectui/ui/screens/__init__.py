"""Screens, one module each: the dashboard's (live, compare, diff, plot, history, tune, the
composer and the pickers) and the other apps' (sweep, workload, watch). Each draws from the
view it is given (the dashboard's ``DashboardView``, or the plain data it shows; never the
app's insides or the controller); keys act through the app, by the messages of
``spectui.ui.messages``."""
