"""Python imports this at start-up from any directory on PYTHONPATH: with MEMLIFE_NET_AUDIT set,
the process (and every Python process it starts with its environment) refuses and logs each
connection off loopback (netaudit.py beside this file)."""
import os

import netaudit

if os.environ.get(netaudit.ENV):
    netaudit.install(os.environ[netaudit.ENV])
