# The references (bare endpoint, minimal proxy) run under gunicorn without the portal's gunicorn.conf.py, whose
# hooks check the portal's settings; worker settings come from the command line, the same as the portal's.
