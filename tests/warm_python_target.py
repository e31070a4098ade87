"""Run as a module by tests/test_warm_python.py: prints its name and argv."""
import sys

print(__name__, *sys.argv)
