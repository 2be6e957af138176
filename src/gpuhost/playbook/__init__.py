"""Playbooks: plays that select hosts and run roles and tasks in order (:mod:`~gpuhost.playbook.loader`)."""
