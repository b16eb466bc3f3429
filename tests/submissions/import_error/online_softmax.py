"""Raises while being imported."""
import numpy as np

raise RuntimeError("configuration file not found")
