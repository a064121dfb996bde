"""Readers (raw format -> Trajectory) and scenario extractors (Trajectory -> GoldStep).

Pure functions over schema objects: a new raw format is one module in `readers/`, a new scenario is one
package (or module) here plus one folder in `samples/`; `discovery` finds both by their tag. `ingest/`
routes records to readers, `labels/` decides success, `shell/` parses shell commands for both sides.
"""
