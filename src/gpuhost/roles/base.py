"""The :class:`Role` base and its typed variables."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext
    from gpuhost.core.task import Task


class RoleVars(BaseModel):
    """A role's variables. Keys of other roles and of templates pass through untouched; the role's own
    keys are typed, defaulted and described (the reference docs are generated from these models)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


V = TypeVar("V", bound=RoleVars)


class Role(ABC, Generic[V]):
    name: ClassVar[str]
    Vars: ClassVar[type[RoleVars]]
    #: templates the role renders (compiled and checked against the variables at load time)
    templates: ClassVar[tuple[str, ...]] = ()
    #: the variables the role itself passes to those templates (``TemplateArgs.vars``): no layer sets them
    template_vars: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def tasks(self, host: HostContext, v: V) -> list[Task]:
        """The role's tasks for this host (may read facts to choose)."""

    def handlers(self, v: V) -> list[Task]:
        """The role's handlers (known from the variables alone, so ``notify`` names are checked at load)."""
        return []
