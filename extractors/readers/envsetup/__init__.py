"""Readers of executed environment-setup run folders (SUPER, RepoLaunch, Installamatic, Repo2Run).

`common` holds what they share: the EnvSetupRun -> Trajectory conversion and the verdict rules.
"""
