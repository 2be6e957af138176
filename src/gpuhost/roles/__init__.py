"""Roles: ordered operations chosen in Python from facts, configured by typed, validated variables.

Each role declares a pydantic :class:`RoleVars` model; the playbook loader validates every role's
variables (inventory, group, play, role and ``-e`` merged) before any host is contacted.
The table of roles is :mod:`gpuhost.roles.table`.
"""
