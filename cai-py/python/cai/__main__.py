"""Command line: check objects' array interfaces against the spec.

    python -m cai check "cupy.arange(10)[::2]"
    python -m cai check --json "numpy.zeros((3, 4))" "torch.ones(3, device='cuda')"
    cai-check "mypkg.make_array()" "numpy.zeros(3)"

(``cai-check EXPRESSION...`` is ``python -m cai check EXPRESSION...``.) Each EXPRESSION is
evaluated with the modules it names imported (``numpy.zeros(3)`` imports numpy,
``cai.examples.Grid(2, 3)`` cai and cai.examples; add others with ``-i``) and reported on its
own: one that cannot be evaluated, or whose interface raises, is an error for that expression,
and the others are still checked. ``--json`` always prints one JSON list, an entry per
expression (``"violations"``, or ``"error"`` for one that could not be checked). Exit status: 2
when some expression could not be checked, else 1 when errors were found (warnings count only
with --strict), else 0.
"""

import argparse
import contextlib
import importlib
import io
import json
import re
import sys
import tokenize

from . import check

_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)*")


def _names(expression):
    """The dotted names an expression's code mentions (not its string literals)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(expression).readline))
    except (tokenize.TokenError, SyntaxError):
        return [m.group(0) for m in _NAME.finditer(expression)]
    # Blank out string literals and comments in place, so dotted names stay whole.
    lines = [list(line) for line in expression.splitlines(keepends=True)] or [[]]
    for t in tokens:
        if t.type in (tokenize.STRING, tokenize.COMMENT):
            (r0, c0), (r1, c1) = t.start, t.end
            for r in range(r0 - 1, r1):
                start = c0 if r == r0 - 1 else 0
                end = c1 if r == r1 - 1 else len(lines[r])
                lines[r][start:end] = " " * (end - start)
    code = "".join("".join(line) for line in lines)
    return [m.group(0) for m in _NAME.finditer(code)]


def _import_option(value):
    """``-i MODULE`` or ``-i "MODULE as NAME"``: ``(module, name)``, the name it is bound to
    (``numpy as np``: ``("numpy", "np")``; a plain ``a.b`` binds ``a``, as ``import a.b``)."""
    module, _, alias = (part.strip() for part in value.partition(" as "))
    return module, alias or None


def _namespace(expression, extra_modules):
    """The names to evaluate ``expression`` with, and the dotted names' roots that are no module
    here (``mypkg`` of ``mypkg.make()``: not installed in this Python, most likely)."""
    ns, missing = {}, set()
    aliases = {}
    for value in extra_modules:
        module, alias = _import_option(value)
        if alias:
            aliases[alias] = module
    for name in [_import_option(v)[0] for v in extra_modules] + _names(expression):
        if name.split(".")[0] in aliases:
            continue
        root = name.split(".")[0]
        if root not in ns:
            try:
                ns[root] = importlib.import_module(root)
            except ModuleNotFoundError as e:
                # A name that is no module (a builtin, a variable); a module that is there but
                # fails to import is that module's error, reported as such.
                if e.name != root:
                    raise
                if "." in name:
                    missing.add(root)
                continue
        # A submodule named in the expression (`cai.examples.Grid`) is imported too: each
        # dotted prefix that is a module, up to the first that is not.
        parts = name.split(".")
        for i in range(2, len(parts) + 1):
            if not _import_submodule(ns[root], parts[:i]):
                break
    for value in extra_modules:
        module, alias = _import_option(value)
        try:
            imported = importlib.import_module(module)
        except Exception as e:
            raise _ImportOptionFailed(value) from e
        if alias:
            ns[alias] = imported
    return ns, missing


# The names code often gives modules (`import numpy as np`), which an expression here cannot
# use: it names modules in full.
_ALIASES = {
    "np": "numpy",
    "cp": "cupy",
    "jnp": "jax.numpy",
    "pd": "pandas",
    "xr": "xarray",
    "da": "dask.array",
    "pa": "pyarrow",
    "sp": "scipy",
    "tf": "tensorflow",
}


def _no_module(name, expression):
    """Why `expression`, whose dotted name's root `name` is no module here, could not be
    evaluated."""
    message = f"no module named {name!r} in this Python ({sys.executable})"
    if name in _ALIASES:
        full = _ALIASES[name]
        spelled = re.sub(rf"(?<![\w.]){name}\.", f"{full}.", expression)
        return f"{message}: {name!r} is {full}'s usual alias; name it in full ({spelled}) or bind the alias with -i \"{full} as {name}\""
    return f"{message}: is it installed there?"


class _ImportOptionFailed(Exception):
    """A module named with ``-i`` failed to import (its error is the cause)."""

    def __init__(self, module):
        super().__init__(module)
        self.module = module


def _import_submodule(root, parts):
    """Imports the submodule named by ``parts`` unless its parent already has that attribute (a
    function, a class, a submodule already imported); returns whether it is a module."""
    parent = root
    for p in parts[1:-1]:
        parent = getattr(parent, p, None)
        if parent is None:
            return False
    if hasattr(parent, parts[-1]):
        return isinstance(getattr(parent, parts[-1]), type(root))
    try:
        importlib.import_module(".".join(parts))
    except ImportError:
        return False
    return True


def _report(expression, violations, as_json):
    if as_json:
        return {
            "expression": expression,
            "violations": [
                {k: getattr(v, k) for k in ("interface", "key", "message", "rule", "rule_text", "severity", "exception")}
                for v in violations
            ],
        }
    if len(violations) == 0:  # (a report's truth value says "conforms", even with warnings)
        print(f"{expression}: conforms")
    for v in violations:
        print(f"{expression}: {v}")
    return None


def _failure(expression, what, e, as_json):
    message = f"{what}{type(e).__name__}: {e}"
    if as_json:
        return {"expression": expression, "error": message}
    print(f"{expression}: {message}", file=sys.stderr)
    return None


_DESCRIPTION = "Check objects' __cuda_array_interface__ / __array_interface__ against the spec."
_EPILOG = """examples:
  cai-check "numpy.zeros((3, 4))[:, ::2]"
  cai-check --json "cupy.arange(10)" "torch.ones(3, device='cuda')"
  cai-check -i "numpy as np" "np.zeros(3)"

Each expression is checked on its own. Exit status: 0 when every object conforms, 1 when
errors were found (warnings too with --strict), 2 when some expression could not be checked."""


def _version():
    from importlib import metadata

    try:
        return metadata.version("cai-arrays")
    except metadata.PackageNotFoundError:
        return "unknown"


def _add_check_arguments(parser):
    parser.add_argument("expressions", nargs="+", metavar="EXPRESSION", help="a Python expression giving the object to check")
    parser.add_argument(
        "-i",
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help='import MODULE first: one the expressions do not name (a plugin that registers types), or "MODULE as NAME" to use an alias (-i "numpy as np"); modules an expression names in full (numpy.zeros(3)) are imported without it',
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--json", action="store_true", help="print a JSON report")
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")


def cai_check(argv=None):
    """``cai-check EXPRESSION...``: the checker alone, its options in its own ``--help``."""
    parser = argparse.ArgumentParser(prog="cai-check", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_check_arguments(parser)
    return _run(parser.parse_args(sys.argv[1:] if argv is None else argv), parser.prog)


def main(argv=None):
    """``python -m cai check EXPRESSION...`` (``check`` may be left out)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in ("check", "-h", "--help"):
        argv.insert(0, "check")
    parser = argparse.ArgumentParser(prog="python -m cai", description=_DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_check_arguments(sub.add_parser("check", help="check the objects the expressions evaluate to", description=_DESCRIPTION))
    return _run(parser.parse_args(argv), parser.prog)


def _run(args, prog):
    failed = unchecked = False
    reports = []
    if not args.json:
        # A module of `-i` that cannot be imported is said once, not as each expression's error.
        for value in args.imports:
            try:
                importlib.import_module(_import_option(value)[0])
            except Exception as e:  # noqa: BLE001 - the module's own failure, reported as such
                print(f"{prog}: could not import -i {value}: {type(e).__name__}: {e}", file=sys.stderr)
                return 2
    # With --json, whatever the expressions, imports and getters print goes to stderr: stdout
    # carries the JSON alone.
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    for expression in args.expressions:
        report = None
        with quiet:
            missing = set()
            try:
                ns, missing = _namespace(expression, args.imports)
                obj = eval(expression, ns)  # noqa: S307 - a CLI evaluating the user's own expression
            except KeyboardInterrupt:
                raise
            except _ImportOptionFailed as e:
                unchecked = True
                report = _failure(expression, f"could not import -i {e.module}: ", e.__cause__, args.json)
            except BaseException as e:  # noqa: BLE001 - any failure of the user's expression (SystemExit too) is its own
                unchecked = True
                if isinstance(e, NameError) and e.name in missing:
                    e = ModuleNotFoundError(_no_module(e.name, expression))
                report = _failure(expression, "could not evaluate: ", e, args.json)
            else:
                try:
                    violations = check(obj)
                except KeyboardInterrupt:
                    raise
                except BaseException as e:  # noqa: BLE001 - the object's own getter raised
                    unchecked = True
                    report = _failure(expression, "reading its interface raised ", e, args.json)
                else:
                    failed |= any(v.severity == "error" or args.strict for v in violations)
                    report = _report(expression, violations, args.json)
        if report is not None:
            reports.append(report)
    if args.json:
        print(json.dumps(reports, indent=2))
    return 2 if unchecked else 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
