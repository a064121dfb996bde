"""Shell-command parsing and description shared by readers and scenarios.

A scenario never imports a reader module: both import `extractors.base` and these helpers.
"""
