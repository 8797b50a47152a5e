"""cai.check: every kind of broken descriptor is reported, with the rule it breaks; conforming
producers (NumPy, our derived classes) get no errors; the command line works."""

import json
import os
import pathlib
import subprocess
import sys
import tomllib

import numpy as np
import pytest

import cai
import cai.examples

ROOT = pathlib.Path(__file__).resolve().parents[2]


def good(**changes):
    d = {"shape": (2, 3), "typestr": "<f4", "data": (0x1000, False), "version": 3, "strides": None, "stream": None}
    d.update(changes)
    return {k: v for k, v in d.items() if v is not DROP}


DROP = object()


def rules(violations, severity=None):
    return [v.rule for v in violations if severity is None or v.severity == severity]


@pytest.mark.parametrize(
    "changes, rule, exception",
    [
        ({"shape": DROP}, "shape", "KeyError"),
        ({"typestr": DROP}, "typestr", "KeyError"),
        ({"data": DROP}, "data", "KeyError"),
        ({"version": DROP}, "version", "KeyError"),
        ({"shape": "2x3"}, "shape", "TypeError"),
        ({"shape": (2, -1)}, "shape", "ValueError"),
        ({"shape": (2**40, 2**40)}, "shape-size", "ValueError"),
        ({"typestr": "float32"}, "typestr", "TypeError"),
        ({"data": 0x1000}, "data", "TypeError"),
        ({"data": (0x1000, "no")}, "data", "TypeError"),
        ({"data": (0, False)}, "data-null", "ValueError"),
        ({"shape": (0,), "data": (0x1000, False)}, "data-zero-size", ""),
        ({"version": 9}, "version", "ValueError"),
        ({"strides": (4, 4, 4)}, "strides", "ValueError"),
        ({"strides": "C"}, "strides", "TypeError"),
        ({"descr": [("a", "<f8")]}, "descr", "ValueError"),
        ({"descr": [("a",)]}, "descr", "TypeError"),
        ({"mask": object()}, "mask", "TypeError"),
        ({"stream": 0}, "stream", "ValueError"),
        ({"stream": 1.0}, "stream", "TypeError"),
        ({"version": 2, "stream": 5}, "stream-version", ""),
    ],
)
def test_each_kind_of_violation_is_reported_with_its_rule(changes, rule, exception):
    found = cai.check_descriptor(good(**changes))
    errors = [v for v in found if v.severity == "error"]
    assert rule in rules(errors), found
    v = next(v for v in errors if v.rule == rule)
    assert v.exception == exception
    assert v.interface == "__cuda_array_interface__"
    assert v.rule_text and v.message
    assert v.key.split(".")[0].split("[")[0] in {"shape", "typestr", "data", "version", "strides", "descr", "mask", "stream"}


def test_every_violation_is_reported_at_once():
    found = cai.check_descriptor(good(shape=(2, -1), typestr=5, data=(0x10, 1), stream=0))
    assert rules(found, "error") == ["shape", "typestr", "data", "stream"]


def test_mask_problems_name_the_path():
    class Mask:
        __cuda_array_interface__ = {"shape": (2,), "typestr": "|b1", "data": (0x2000, False), "version": 3}

    found = cai.check_descriptor(good(mask=Mask()))
    assert [(v.key, v.rule) for v in found if v.severity == "error"] == [("mask", "mask")]
    assert "interop-mask" in rules(found, "warning")


def test_mask_layout_hazards_name_the_mask():
    class Mask:
        def __init__(self, **changes):
            d = {"shape": (2, 3), "typestr": "|b1", "data": (0x2000, False), "version": 3, "strides": None}
            self.__cuda_array_interface__ = {**d, **changes}

    inner = Mask(typestr="|V2", descr=[("a", "|u1"), ("a", "|u1")])
    found = cai.check_descriptor(good(mask=Mask(typestr="<u2", strides=(6, 3), mask=inner)))
    assert rules(found, "error") == []
    warned = {(v.key, v.rule) for v in found if v.severity == "warning"}
    assert ("mask.strides", "interop-strides-itemsize") in warned
    assert ("mask.mask.descr", "interop-descr-names") in warned
    assert not any(k in {"strides", "descr"} for k, _ in warned)


@pytest.mark.parametrize(
    "changes, rule",
    [
        ({"strides": DROP}, "interop-strides-key"),
        ({"strides": (8, 3)}, "interop-strides-itemsize"),
        ({"data": (0x1000, True)}, "interop-readonly"),
        ({"typestr": ">f4"}, "interop-byte-order"),
        ({"version": 2, "stream": DROP}, "interop-version"),
        ({"typestr": "|V2", "descr": [("a", "|u1"), ("a", "|u1")]}, "interop-descr-names"),
    ],
)
def test_interoperability_hazards_are_warnings(changes, rule):
    found = cai.check_descriptor(good(**changes))
    assert rules(found, "error") == []
    assert rule in rules(found, "warning")


def test_host_rules_differ_from_device_rules():
    # NumPy exports real pointers for empty arrays and has no version other than 3.
    assert rules(cai.check(np.zeros((0, 3))), "error") == []
    found = cai.check_descriptor({"shape": (2,), "typestr": "<f8", "data": (64, False), "version": 2}, "host")
    assert rules(found, "error") == ["version"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.zeros((3, 4)),
        lambda: np.zeros((3, 4))[::-1, ::2],
        lambda: np.zeros((2, 3), order="F"),
        lambda: np.zeros((), dtype=np.complex64),
        lambda: np.zeros(4, dtype=[("a", "u1"), ("b", "<f8")]),
        # NumPy's descr of this names the gap like the field 'f1' (a warning, not an error).
        lambda: np.zeros(4, dtype=np.dtype([("f0", "u1"), ("f1", "<f8")], align=True)),
        lambda: cai.examples.Grid(2, 3, order="F"),
        lambda: cai.examples.counts(7),
        lambda: cai.examples.DeviceMatrix(0x1000, 4, 4, stream=2),
        lambda: cai.examples.Buffer(64, "<c16", [2], [-16], 32),
        lambda: cai.as_host_array(np.arange(10)[::-2]),
    ],
)
def test_conforming_producers_have_no_errors(make):
    assert rules(cai.check(make()), "error") == []


def test_objects_without_or_with_broken_interfaces():
    (v,) = cai.check(object())
    assert v.severity == "error" and "exposes neither" in v.message

    class Raises:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("device lost")

    # Only AttributeError means "does not expose": the getter's own error propagates.
    with pytest.raises(RuntimeError, match="device lost"):
        cai.check(Raises())
    broken = run_cli("check", "type('R', (), {'__cuda_array_interface__': property(lambda s: 1 / 0)})()")
    assert broken.returncode == 2 and "raised ZeroDivisionError" in broken.stderr

    class NotADict:
        __cuda_array_interface__ = [1, 2]

    (v,) = cai.check(NotADict())
    assert v.exception == "TypeError" and "not dict" in v.message


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "cai", *args], capture_output=True, text=True, timeout=60)


def test_cli_reports_conformance_and_fails_on_errors():
    ok = run_cli("check", "numpy.zeros((3, 4))[:, ::2]")
    assert ok.returncode == 0, ok.stderr
    assert "conforms" in ok.stdout
    bad = run_cli("check", "--json", "types.SimpleNamespace(__cuda_array_interface__={'shape': (2,), 'typestr': '<f4', 'data': (0, False), 'version': 3, 'stream': 0})")
    assert bad.returncode == 1, bad.stderr
    report = json.loads(bad.stdout)
    assert [v["rule"] for v in report[0]["violations"] if v["severity"] == "error"] == ["stream", "data-null"]
    broken = run_cli("check", "no_such_module_xyz.thing")
    assert broken.returncode == 2 and "could not evaluate" in broken.stderr
    strict = run_cli("check", "--strict", "cai.examples.DeviceMatrix(4096, 2, 2, readonly=True)")
    assert strict.returncode == 1 and "interop-readonly" in strict.stdout


def test_cli_checks_every_expression_and_always_prints_json():
    """`cai-check EXPR...` needs no subcommand; an expression that cannot be checked is an error
    for it alone, and --json stays one valid list (it printed nothing, and stopped at the first
    failure)."""
    mixed = ["no_such_module_xyz.thing", "numpy.zeros((3, 4))", "type('R', (), {'__array_interface__': property(lambda s: 1 / 0)})()"]
    plain = run_cli(*mixed)
    assert plain.returncode == 2
    assert "numpy.zeros((3, 4)): conforms" in plain.stdout
    assert "could not evaluate" in plain.stderr and "raised ZeroDivisionError" in plain.stderr
    as_json = run_cli("check", "--json", *mixed)
    assert as_json.returncode == 2
    report = json.loads(as_json.stdout)
    assert [r["expression"] for r in report] == mixed
    assert "could not evaluate" in report[0]["error"] and report[1]["violations"] == []
    assert "ZeroDivisionError" in report[2]["error"]
    script = subprocess.run(
        [sys.executable, "-c", "import sys; from cai.__main__ import main; sys.exit(main())", "numpy.zeros(3)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert script.returncode == 0 and "conforms" in script.stdout, script.stderr


def test_a_report_is_true_when_the_object_conforms():
    """`if cai.check(x):` means "x conforms": a valid read-only array has a warning, which made
    the plain list of findings true (it was `[Violation(warning)]`)."""
    ro = cai.examples.DeviceMatrix(4096, 2, 2, readonly=True)
    report = cai.check(ro)
    assert isinstance(report, cai.CheckReport) and isinstance(report, list)
    assert report and report.conforms and report.errors == []
    assert [v.rule for v in report.warnings] == ["interop-readonly"]
    bad = cai.check_descriptor({"shape": (2,), "typestr": "<f4", "data": (0, False), "version": 3, "stream": 0})
    assert not bad and not bad.conforms and {v.rule for v in bad.errors} == {"stream", "data-null"}
    assert bad == bad.errors + bad.warnings
    assert "does not conform" in repr(bad)
    nothing = cai.check(object())
    assert not nothing and nothing.errors


def test_cai_check_has_its_own_help_and_names_missing_modules():
    """The `cai-check` command is the checker alone: its help names it and lists its options
    (it showed `usage: cai [-h] {check} ...`, and no arguments said "required: command"); a
    dotted name whose root is no module here says so (it was a NameError), and so does a module
    of `-i` (it was the expression that "could not evaluate")."""
    script = "import sys; from cai.__main__ import cai_check; sys.exit(cai_check())"
    run = lambda *a: subprocess.run([sys.executable, "-c", script, *a], capture_output=True, text=True, timeout=60)  # noqa: E731
    usage = run("--help")
    assert usage.returncode == 0 and usage.stdout.startswith("usage: cai-check "), usage.stdout
    assert all(o in usage.stdout for o in ("--json", "--strict", "--import", "EXPRESSION"))
    bare = run()
    assert bare.returncode == 2 and "cai-check: error" in bare.stderr and "EXPRESSION" in bare.stderr
    missing = run("no_such_module_xyz.make()", "numpy.zeros(3)", "undefined_name_xyz + 1")
    assert missing.returncode == 2 and "numpy.zeros(3): conforms" in missing.stdout
    assert "no module named 'no_such_module_xyz' in this Python" in missing.stderr, missing.stderr
    assert "NameError: name 'undefined_name_xyz' is not defined" in missing.stderr
    option = run("--json", "-i", "no_such_module_xyz", "numpy.zeros(3)")
    assert option.returncode == 2 and json.loads(option.stdout) == [
        {"expression": "numpy.zeros(3)", "error": "could not import -i no_such_module_xyz: ModuleNotFoundError: No module named 'no_such_module_xyz'"}
    ]
    module = subprocess.run([sys.executable, "-m", "cai", "--help"], capture_output=True, text=True, timeout=60)
    assert module.stdout.startswith("usage: python -m cai "), module.stdout
    scripts = tomllib.loads((ROOT / "cai-py" / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"cai-check": "cai.__main__:cai_check"}


def test_cai_check_hints_at_aliases_and_says_a_failed_import_once():
    """A newcomer's `cai-check "np.zeros(3)"` said only "no module named 'np'", and
    `cai-check -i nosuchmod 1` labeled the import's failure with the expression "1"."""
    script = "import sys; from cai.__main__ import cai_check; sys.exit(cai_check())"
    run = lambda *a: subprocess.run([sys.executable, "-c", script, *a], capture_output=True, text=True, timeout=60)  # noqa: E731
    alias = run("np.zeros(3) + np.ones(3)")
    assert alias.returncode == 2
    assert "'np' is numpy's usual alias" in alias.stderr and "numpy.zeros(3) + numpy.ones(3)" in alias.stderr, alias.stderr
    bound = run("-i", "numpy as np", "np.zeros(3) + np.ones(3)")
    assert bound.returncode == 0 and "conforms" in bound.stdout, bound.stderr
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("cai-check "), version.stdout
    option = run("-i", "no_such_module_xyz", "1", "numpy.zeros(3)")
    assert option.returncode == 2 and option.stdout == ""
    assert option.stderr == "cai-check: could not import -i no_such_module_xyz: ModuleNotFoundError: No module named 'no_such_module_xyz'\n"


def test_cli_json_survives_what_expressions_do(tmp_path):
    """Found by an attack: a getter calling sys.exit() made the CLI exit 0 with no output, and
    what an import or getter printed (`this` named inside a string literal imported the Zen of
    Python) broke the JSON; a module that fails to import was reported as a NameError."""
    (tmp_path / "hostile.py").write_text(
        "import sys\n"
        "class Exits:\n"
        "    @property\n"
        "    def __array_interface__(self):\n"
        "        sys.exit(0)\n"
        "class Prints:\n"
        "    @property\n"
        "    def __array_interface__(self):\n"
        "        print('chatter')\n"
        "        raise AttributeError\n"
    )
    (tmp_path / "broken_dep.py").write_text("import no_such_dependency_xyz\nthing = 1\n")
    # (The modules' folder first, then the caller's path: the cai under test may be found only
    # through it, as in the profile-guided wheel's training.)
    path = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    run = lambda *a: subprocess.run([sys.executable, "-m", "cai", *a], capture_output=True, text=True, timeout=60, env=env)
    out = run("check", "--json", "hostile.Exits()", "hostile.Prints()", 'numpy.zeros(3) if "this" else 0', "object()")
    report = json.loads(out.stdout)
    assert out.returncode == 2
    assert "SystemExit" in report[0]["error"]
    assert report[2]["violations"] == [] and report[3]["violations"]
    assert "chatter" in out.stderr and "Zen of Python" not in out.stdout + out.stderr
    dep = run("check", "broken_dep.thing")
    assert dep.returncode == 2 and "no_such_dependency_xyz" in dep.stderr and "NameError" not in dep.stderr
