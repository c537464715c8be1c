#!/usr/bin/env python3
"""The closing note's table from a call's bench logs: session 28's script
(docs/measurements/2026-11-30-h200-session28/calls/table.py), run as is.

    python3 table.py callN/race.log callN/model.log
"""
import os
import runpy

here = os.path.dirname(os.path.abspath(__file__))
runpy.run_path(os.path.join(here, "../../2026-11-30-h200-session28/calls/table.py"), run_name="__main__")
