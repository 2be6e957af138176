"""The lazy operation table: every listed kind loads its class, and every operation class is listed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import gpuhost.operations
from gpuhost.core.operation import Operation
from gpuhost.operations import table


def test_every_kind_loads_its_class() -> None:
    for kind in table.kinds():
        cls = table.get(kind)
        assert cls is not None and cls.kind == kind
    assert table.get("no_such_operation") is None
    assert sorted(table.OPERATIONS) == table.kinds()


def test_every_operation_class_is_in_the_table() -> None:
    found = {}
    for info in pkgutil.iter_modules(gpuhost.operations.__path__):
        module = importlib.import_module(f"gpuhost.operations.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Operation) and obj is not Operation and getattr(obj, "kind", None):
                found[obj.kind] = obj
    assert {k: table.get(k) for k in found} == found


def test_every_role_loads_its_class() -> None:
    from gpuhost.roles import table as roles

    for name in roles.role_names():
        cls = roles.get_role(name)
        assert cls is not None and cls.name == name
    assert roles.get_role("no_such_role") is None
    assert sorted(roles.ROLES) == roles.role_names()
