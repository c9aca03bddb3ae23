"""ddprun's worker-side Python package (standard library and torch only).

ddprun writes this package into each run's log directory and puts that directory first on the
workers' PYTHONPATH, so a worker script imports it without installing anything. The wheel
(scripts/package.sh) installs it too, for scripts started by other launchers.
"""

__all__ = []
