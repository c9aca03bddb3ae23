"""env_dump.py as a module, for `ddprun -m ddptest_workers.env_dump DIR` (PYTHONPATH=workers/)."""
import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "env_dump.py"), run_name="__main__")
