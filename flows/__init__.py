"""Prefect flows (build, publish, rebuild), config loading, outputs and the CLI.

The only layer that knows the stage order, file locations, caching and retries.
"""
