"""Jinja2 rendering with StrictUndefined: a missing variable is an error, never an empty string."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jinja2

from gpuhost.errors import SecretError, TemplateError
from gpuhost.resources import builtin_templates_dir
from gpuhost.secrets import read_secret

_SECRETS_READ = threading.local()


@contextmanager
def track_secrets() -> Iterator[list[str]]:
    """Inside the block, every ``secret_env``/``secret_file`` a render calls (in this thread) is listed in the
    yielded list, so the caller knows its output holds a secret."""
    outer = getattr(_SECRETS_READ, "names", None)
    names: list[str] = []
    _SECRETS_READ.names = names
    try:
        yield names
    finally:
        _SECRETS_READ.names = outer
        if outer is not None:
            outer.extend(names)


def _note(name: str) -> None:
    names = getattr(_SECRETS_READ, "names", None)
    if names is not None:
        names.append(name)


def _secret_env(name: str) -> str:
    """``{{ secret_env('PVE_TOKEN') }}``: a secret from the environment, masked in all output."""
    _note(f"secret_env('{name}')")
    try:
        return read_secret(f"secret_env('{name}')", env=name) or ""
    except SecretError as exc:
        raise TemplateError(str(exc)) from None


def _secret_file(path: str) -> str:
    """``{{ secret_file('/root/token') }}``: a secret from a 0600 file, masked in all output."""
    _note(f"secret_file('{path}')")
    try:
        return read_secret(f"secret_file('{path}')", file=path) or ""
    except SecretError as exc:
        raise TemplateError(str(exc)) from None


class Templates:
    """Finds templates in the given directories, then in gpuhost's own ``templates/``."""

    def __init__(self, search_path: Sequence[Path] = ()) -> None:
        dirs = [str(p) for p in search_path if p.is_dir()]
        builtin = builtin_templates_dir()
        if builtin is not None:
            dirs.append(str(builtin))
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(dirs),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )
        self.env.globals["secret_env"] = _secret_env
        self.env.globals["secret_file"] = _secret_file

    def render_file(self, name: str, variables: Mapping[str, Any]) -> str:
        try:
            return self.env.get_template(name).render(**variables)
        except jinja2.TemplateNotFound:
            raise TemplateError(f"template '{name}' not found (looked in: {self._search()})") from None
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"template '{name}': {exc.message}") from None
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template '{exc.name or name}' line {exc.lineno}: {exc.message}") from None

    def _search(self) -> str:
        return ", ".join(getattr(self.env.loader, "searchpath", []))

    def check_file(self, name: str, available: set[str]) -> None:
        """Compile template ``name`` and make sure every variable it uses is among ``available``."""
        from jinja2 import meta

        try:
            source, _, _ = self.env.loader.get_source(self.env, name)  # type: ignore[union-attr]
            parsed = self.env.parse(source)
        except jinja2.TemplateNotFound:
            raise TemplateError(f"template '{name}' not found (looked in: {self._search()})") from None
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template '{exc.name or name}' line {exc.lineno}: {exc.message}") from None
        missing = sorted(meta.find_undeclared_variables(parsed) - available - set(self.env.globals))
        if missing:
            raise TemplateError(
                f"template '{name}' uses undefined variable{'s' if len(missing) > 1 else ''} "
                + ", ".join(f"'{m}'" for m in missing)
            )

    def render_value(self, value: Any, variables: Mapping[str, Any]) -> Any:
        """Render every string inside ``value`` (dicts and lists walked) that contains ``{{`` or ``{%``."""
        if isinstance(value, str):
            if "{{" not in value and "{%" not in value:
                return value
            try:
                return self.env.from_string(value).render(**variables)
            except jinja2.UndefinedError as exc:
                raise TemplateError(f"in '{value}': {exc.message}") from None
            except jinja2.TemplateSyntaxError as exc:
                raise TemplateError(f"in '{value}': {exc.message}") from None
        if isinstance(value, dict):
            return {k: self.render_value(v, variables) for k, v in value.items()}
        if isinstance(value, list):
            return [self.render_value(v, variables) for v in value]
        return value
