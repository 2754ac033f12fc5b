#!/usr/bin/python3
"""A PS of the tests: the tables of tables.py, served until SIGTERM (exit 0 after a clean
stop). Arguments: wharf cluster flags; EAL arguments from WHARF_EAL_ARGS."""
import sys

import wharf
import tables

wharf.init(sys.argv[1:])
tables.declare()
print("ps_node: serving", flush=True)
wharf.run_server()
print("ps_node: stopped", flush=True)
wharf.stop()
