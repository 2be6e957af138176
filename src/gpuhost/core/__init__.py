"""The core contract every layer above it speaks, importing nothing of the runner, the inventory
or any transport.

- :mod:`~gpuhost.core.result`: what a command on a target returned.
- :mod:`~gpuhost.core.facts`: a fact is a ``(command, parse)`` pair; tests fill it from captures.
- :mod:`~gpuhost.core.actions`: what an operation asks the runner to do (it never acts itself).
- :mod:`~gpuhost.core.plan`: an operation's decision: reason, actions, diff.
- :mod:`~gpuhost.core.operation`: the :class:`Operation` base and its typed ``Args``.
- :mod:`~gpuhost.core.context`: the :class:`HostContext` protocol an operation plans against.
- :mod:`~gpuhost.core.task`: a task: one operation with name, tags and handler notifications.
"""
