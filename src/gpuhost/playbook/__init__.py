"""Playbooks: plays that select hosts and run roles and tasks in order."""

from gpuhost.playbook.loader import load_playbook
from gpuhost.playbook.models import Play, Playbook, RoleRef
from gpuhost.playbook.task import Task, role_task

__all__ = ["Play", "Playbook", "RoleRef", "Task", "load_playbook", "role_task"]
