"""Request validation: every 400 a request can earn, raised before anything is lowered or
run; `loop/` receives only what passed."""
