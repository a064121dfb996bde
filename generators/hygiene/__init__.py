"""Hygiene: secret scanning and scrubbing, duplicate removal and contamination against earlier releases.

Pure functions over schema objects; `flows/hygiene.py` reads files and applies them.
"""
