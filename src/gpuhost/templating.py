"""Jinja2 rendering in a sandbox, with StrictUndefined: a missing variable is an error, never an empty string.

Templates come from playbooks and inventories, files other people write: every one renders in
:class:`jinja2.sandbox.ImmutableSandboxedEnvironment` (no attribute that starts with ``_``, no mutation of
the variables), a template that names such an attribute is refused before anything runs, and the work a
render may do is bounded: ``range`` (the sandbox's own limit), the number of loop iterations of one render,
the length of a string or list made by ``*``, ``~`` or ``%``, powers, and the output's length. A Jinja
runtime error (``1/0``, a ``%`` type error) is a :class:`~gpuhost.errors.TemplateError` naming the template
and line, never a crash.
"""

from __future__ import annotations

import re
import shlex
import threading
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import UNSAFE_FUNCTION_ATTRIBUTES, UNSAFE_METHOD_ATTRIBUTES, ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from gpuhost.errors import GpuhostError, SecretError, TemplateError
from gpuhost.inventory.names import env_key, single_line
from gpuhost.resources import builtin_templates_dir
from gpuhost.secrets import read_secret

#: Longest text one render may produce, and longest string or list an operator may build in it.
MAX_OUTPUT = 4 * 1024 * 1024
#: Loop iterations one render may run, all loops together (nested loops multiply).
MAX_ITERATIONS = 1_000_000
#: Largest exponent ``**`` may use on numbers other than -1, 0 and 1.
MAX_EXPONENT = 4096
#: Widths in a ``%`` or ``format`` spec (``%0999999999d``) above this are refused.
MAX_FORMAT_WIDTH = 100_000

#: Attributes a template may never name (the sandbox refuses them at run time too; these are refused at load).
_UNSAFE_NAMES = frozenset(UNSAFE_FUNCTION_ATTRIBUTES | UNSAFE_METHOD_ATTRIBUTES) | {
    "gi_frame",
    "gi_code",
    "cr_frame",
    "cr_code",
    "ag_code",
    "ag_frame",
    "f_globals",
    "f_locals",
    "f_builtins",
    "tb_frame",
}
_FORMAT_WIDTH = re.compile(r"\d+")

_SECRETS_READ = threading.local()
_BUDGET = threading.local()


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


class _Refused(Exception):
    """A render went past one of the limits (turned into a TemplateError with the template's line)."""


def _charge(n: int) -> None:
    left = getattr(_BUDGET, "left", MAX_ITERATIONS)
    left -= n
    _BUDGET.left = left
    if left < 0:
        raise _Refused(f"the template runs more than {MAX_ITERATIONS:,} loop iterations")


def _bounded_loop(iterable: Iterable[Any]) -> Iterator[Any]:
    """What every ``{% for %}`` iterates: the loop's items, each one charged to the render's budget."""
    for item in iterable:
        _charge(1)
        yield item


def _check_size(value: Any, what: str) -> Any:
    if isinstance(value, (str, bytes, list, tuple)) and len(value) > MAX_OUTPUT:
        raise _Refused(f"{what} would be longer than {MAX_OUTPUT:,} characters")
    return value


def _bounded_concat(*parts: Any) -> str:
    """``a ~ b``: the parts joined, refused when the result would be too long."""
    texts = [str(p) for p in parts]
    if sum(len(t) for t in texts) > MAX_OUTPUT:
        raise _Refused(f"'~' would build a string longer than {MAX_OUTPUT:,} characters")
    return "".join(texts)


def _check_format(spec: str) -> None:
    if any(len(n) > 6 or int(n) > MAX_FORMAT_WIDTH for n in _FORMAT_WIDTH.findall(spec)):
        raise _Refused(f"a format width above {MAX_FORMAT_WIDTH:,} is refused")


def _sized(value: Any) -> bool:
    return isinstance(value, (str, bytes, list, tuple))


class _LoopBounds(NodeTransformer):
    """Rewrites a parsed template: each ``for`` iterates through the budget, each ``~`` through the size check."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Call(nodes.Name("gpuhost_bounded_loop", "load"), [node.iter], [], None, None)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.Name("gpuhost_bounded_concat", "load"), list(node.nodes), [], None, None)


def _unsafe_names(tree: nodes.Template) -> list[tuple[str, int]]:
    """Every attribute or key the template names that the sandbox would refuse, with its line."""
    found: list[tuple[str, int]] = []
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            name: Any = node.attr
        else:
            assert isinstance(node, nodes.Getitem)
            arg = node.arg
            name = arg.value if isinstance(arg, nodes.Const) else None
        if isinstance(name, str) and (name.startswith("_") or name in _UNSAFE_NAMES):
            found.append((name, node.lineno))
    return found


class _Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        unsafe = _unsafe_names(tree)
        if unsafe:
            attr, line = unsafe[0]
            raise jinja2.TemplateSyntaxError(
                f"refused: the template reaches '{attr}', which templates may not use (rendering is sandboxed)",
                line,
                name,
                filename,
            )
        bounded = _LoopBounds().visit(tree)
        assert isinstance(bounded, nodes.Template)
        return bounded

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if _sized(seq) and isinstance(times, int) and len(seq) * times > MAX_OUTPUT:
                    raise _Refused(f"'*' would build a value longer than {MAX_OUTPUT:,} characters")
        elif operator == "**":
            if isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT and left not in (-1, 0, 1):
                raise _Refused(f"'**' with an exponent above {MAX_EXPONENT} is refused")
        elif operator == "%" and isinstance(left, str):
            _check_format(left)
        return _check_size(super().call_binop(context, operator, left, right), f"'{operator}'")

    def wrap_str_format(self, value: Any) -> Any:
        """``'{:>999999999}'.format(x)``: the format string's widths are checked before it is wrapped."""
        owner = getattr(value, "__self__", None)
        if isinstance(owner, str) and getattr(value, "__name__", "") in ("format", "format_map"):
            _check_format(owner)
        return super().wrap_str_format(value)


def _bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    if n > 100 or max > 1000:
        raise _Refused("lipsum() is limited to 100 paragraphs of 1,000 words")
    from jinja2.utils import generate_lorem_ipsum

    return str(generate_lorem_ipsum(n=n, html=html, min=min, max=max))


def _bounded_filter(name: str, func: Any) -> Any:
    """A filter whose width-like integer arguments are bounded and whose result is size-checked."""

    def bounded(*args: Any, **kwargs: Any) -> Any:
        for value in (*args[1:], *kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FORMAT_WIDTH:
                raise _Refused(f"filter '{name}' with an argument above {MAX_FORMAT_WIDTH:,} is refused")
        if name == "format" and args and isinstance(args[0], str):
            _check_format(args[0])
        return _check_size(func(*args, **kwargs), f"filter '{name}'")

    for attr in ("jinja_pass_arg",):
        if hasattr(func, attr):
            setattr(bounded, attr, getattr(func, attr))
    return bounded


_ENV_PLAIN = re.compile(r"^[A-Za-z0-9_.,:/@%+=-]*$")


def _env_value(value: Any) -> str:
    """``{{ v | env_value }}``: ``v`` as one value of a systemd ``EnvironmentFile=`` line.

    Plain words stay as they are; anything else is double-quoted with ``\\ " ` $`` escaped, as systemd reads a
    double-quoted value (systemd src/basic/env-file.c, parse_env_file_internal, DOUBLE_QUOTE_VALUE_ESCAPE with
    SHELL_NEED_ESCAPE). A control character (a newline would start a second variable) is refused.
    """
    text = str(value)
    try:
        single_line(text, "environment value")
    except ValueError as exc:
        raise _Refused(str(exc)) from None
    if _ENV_PLAIN.match(text):
        return text
    return '"' + re.sub(r'([\\"`$])', r"\\\1", text) + '"'


def _env_name(value: Any) -> str:
    """``{{ k | env_name }}``: ``k`` when it is an environment variable name, refused otherwise."""
    try:
        return env_key(str(value))
    except ValueError as exc:
        raise _Refused(str(exc)) from None


def _shell_word(value: Any) -> str:
    """``{{ v | shquote }}``: ``v`` as one shell word (:func:`shlex.quote`); a control character is refused."""
    text = str(value)
    try:
        single_line(text, "shell word")
    except ValueError as exc:
        raise _Refused(str(exc)) from None
    return shlex.quote(text)


def _render_error(exc: BaseException, what: str, filename: str | None) -> TemplateError:
    """The error of a failed render, at its template line when the traceback has one."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == (filename or "<template>"):
            line = frame.lineno
    where = f"{what} line {line}" if line else what
    if isinstance(exc, jinja2.UndefinedError):
        return TemplateError(f"{where}: {exc.message}")
    if isinstance(exc, jinja2.exceptions.SecurityError):
        return TemplateError(f"{where}: refused by the template sandbox: {exc}")
    if isinstance(exc, _Refused):
        return TemplateError(f"{where}: refused: {exc}")
    if isinstance(exc, RecursionError):
        return TemplateError(f"{where}: the template recurses too deeply")
    return TemplateError(f"{where}: {type(exc).__name__}: {exc}")


class Templates:
    """Finds templates in the given directories, then in gpuhost's own ``templates/``."""

    def __init__(self, search_path: Sequence[Path] = ()) -> None:
        dirs = [str(p) for p in search_path if p.is_dir()]
        builtin = builtin_templates_dir()
        if builtin is not None:
            dirs.append(str(builtin))
        self.env = _Sandbox(
            loader=jinja2.FileSystemLoader(dirs),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )
        self.env.globals["secret_env"] = _secret_env
        self.env.globals["secret_file"] = _secret_file
        self.env.globals["lipsum"] = _bounded_lipsum
        self.env.globals["gpuhost_bounded_loop"] = _bounded_loop
        self.env.globals["gpuhost_bounded_concat"] = _bounded_concat
        self.env.filters = {n: _bounded_filter(n, f) for n, f in self.env.filters.items()}
        self.env.filters.update(env_value=_env_value, env_name=_env_name, shquote=_shell_word)
        #: each checked template's undeclared variables (:meth:`check_file`: every host asks for the same)
        self._undeclared: dict[str, frozenset[str]] = {}

    def _render(self, template: jinja2.Template, variables: Mapping[str, Any]) -> str:
        outer = getattr(_BUDGET, "left", None)
        _BUDGET.left = MAX_ITERATIONS
        try:
            out: list[str] = []
            size = 0
            for chunk in template.generate(**variables):
                size += len(chunk)
                if size > MAX_OUTPUT:
                    raise _Refused(f"the output would be longer than {MAX_OUTPUT:,} characters")
                out.append(chunk)
            return "".join(out)
        finally:
            if outer is None:
                del _BUDGET.left
            else:
                _BUDGET.left = outer

    def render_file(self, name: str, variables: Mapping[str, Any]) -> str:
        try:
            template = self.env.get_template(name)
        except jinja2.TemplateNotFound:
            raise TemplateError(f"template '{name}' not found (looked in: {self._search()})") from None
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template '{exc.name or name}' line {exc.lineno}: {exc.message}") from None
        try:
            return self._render(template, variables)
        except GpuhostError:
            raise
        except Exception as exc:
            raise _render_error(exc, f"template '{name}'", template.filename) from None

    def _search(self) -> str:
        return ", ".join(getattr(self.env.loader, "searchpath", []))

    def check_file(self, name: str, available: set[str]) -> None:
        """Compile template ``name`` (refusing what the sandbox forbids) and make sure every variable it uses
        is among ``available``."""
        missing = sorted(self._undeclared_in(name) - available - set(self.env.globals))
        if missing:
            raise TemplateError(
                f"template '{name}' uses undefined variable{'s' if len(missing) > 1 else ''} "
                + ", ".join(f"'{m}'" for m in missing)
            )

    def _undeclared_in(self, name: str) -> frozenset[str]:
        """The variables template ``name`` uses without setting them (it is compiled, and refused, on the way)."""
        from jinja2 import meta

        found = self._undeclared.get(name)
        if found is not None:
            return found
        try:
            source, _, _ = self.env.loader.get_source(self.env, name)  # type: ignore[union-attr]
            parsed = self.env.parse(source)
            self.env.get_template(name)
        except jinja2.TemplateNotFound:
            raise TemplateError(f"template '{name}' not found (looked in: {self._search()})") from None
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template '{exc.name or name}' line {exc.lineno}: {exc.message}") from None
        found = self._undeclared[name] = frozenset(meta.find_undeclared_variables(parsed))
        return found

    def render_value(self, value: Any, variables: Mapping[str, Any]) -> Any:
        """Render every string inside ``value`` (dicts and lists walked) that contains ``{{`` or ``{%``."""
        if isinstance(value, str):
            if "{{" not in value and "{%" not in value:
                return value
            try:
                template = self.env.from_string(value)
            except jinja2.TemplateSyntaxError as exc:
                raise TemplateError(f"in '{value}': {exc.message}") from None
            try:
                return self._render(template, variables)
            except GpuhostError:
                raise
            except Exception as exc:
                raise _render_error(exc, f"in '{value}'", None) from None
        if isinstance(value, dict):
            return {k: self.render_value(v, variables) for k, v in value.items()}
        if isinstance(value, list):
            return [self.render_value(v, variables) for v in value]
        return value
