#!/usr/bin/env python3
"""Checks docs/repository.md's "Where a change goes" against the tree (scripts/test.sh runs it).

For each kind of change (an element type, a memory backend, a Python protocol) CHANGES names
the files it touches. The check fails when
- a kind touches more than three files, a file is gone, or the doc's bullet does not name it;
- library source outside those files knows what only they should (OWNED): an element type's
  Rust type or `Extended` variant, a protocol method, a CUDA crate's paths. A new place that
  must change with every element, backend or protocol shows up here, with its line.
Tests (`#[cfg(test)] mod tests`, tests/) may name anything. The few lines that must know one
particular type or crate are in ALLOWED, each with its reason.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "repository.md"
SOURCES = ["cai-runtime/src", "cai-gt/src", "cai-py/src", "cai-derive/src"]

# kind (the doc's bullet title) -> (the files one such change edits, at most three; the module
# of its own it adds, as in the worked example, or None).
CHANGES = {
    # float8::F8E4M3: its for_each_element! line and Extended row, the feature, the version.
    "A new element type": (["cai-runtime/src/element.rs", "cai-runtime/Cargo.toml", "Cargo.toml"], None),
    # Inside the repository (outside it, one file of the backend's own crate: tests/backend).
    "A new memory backend": (
        ["cai-runtime/Cargo.toml", "cai-runtime/src/cuda/mod.rs"],
        "cai-runtime/src/cuda/cust.rs",
    ),
    "A new Python protocol": (
        ["cai-runtime/src/python/mod.rs", "cai-runtime/src/python/protocol.rs", "cai-derive/src/expand/python.rs"],
        "cai-runtime/src/python/dlpack/mod.rs",
    ),
}


def element_patterns():
    """The Rust types of for_each_element!'s lines and the Extended variants, read from
    element.rs itself (so a new line is covered as soon as it is written)."""
    text = (ROOT / "cai-runtime/src/element.rs").read_text()
    enum = re.search(r"pub enum Extended \{(.*?)\n\}", text, re.S).group(1)
    variants = re.findall(r"^\s{4}([A-Z]\w*),", enum, re.M)
    crates = sorted(set(re.findall(r"\b(half|float8|num_complex)::\w+", text)))
    aliases = re.search(r"pub mod feature_types \{(.*?)\n\}", text, re.S).group(1)
    alias_names = sorted(set(re.findall(r"pub type (\w+)", aliases)))
    return (
        [rf"\bExtended\s*::\s*{v}\b" for v in variants]
        # a crate's path, however written (`half::bf16`, `half :: {bf16}`, `use half as h`)
        + [rf"(?<![\w])(::)?\s*{c}\s*::" for c in crates]
        + [rf"\b(use|extern\s+crate)\s+(::)?{c}\b" for c in crates]
        # the aliases for_each_element!'s callers see
        + [rf"\b(__private|feature_types)\s*::\s*{a}\b" for a in alias_names]
    )


_NAMES = r"(__cuda_array_interface__|__array_interface__|__array_struct__|__dlpack__|__dlpack_device__|__dlpack_c_exchange_api__)"
PROTOCOLS = [rf"\bfn\s+(r#)?{_NAMES}\b", rf"\bname\s*=\s*\"{_NAMES}\""]
BACKENDS = [r"(?<![\w])(::)?\s*(cust|cudarc)\s*::", r"\b(use|extern\s+crate)\s+(::)?(cust|cudarc)\b"]

# what only some files may know -> those files
OWNED = [
    ("an element type", element_patterns(), ["cai-runtime/src/element.rs"]),
    ("a protocol method", PROTOCOLS, ["cai-runtime/src/python/protocol.rs", "cai-derive/src/expand/python.rs"]),
    (
        "a CUDA crate",
        BACKENDS,
        ["cai-runtime/src/cuda/cust.rs", "cai-runtime/src/cuda/cudarc.rs", "cai-runtime/src/cuda/mod.rs"],
    ),
]

# (file, text on the line) -> why that line may know it
ALLOWED = {
    ("cai-runtime/src/typestr.rs", "Extended::Bfloat16"): "a bare `<V2` is bfloat16: PyTorch's and ml_dtypes' spelling",
    ("cai-runtime/src/typestr.rs", "Extended::Float8E5M2"): "`<f1` is ml_dtypes' spelling of float8_e5m2",
    ("cai-runtime/src/python/export.rs", "fn __cuda_array_interface__"): "a mask's descriptor (CudaMask), not an array's protocol",
    ("cai-runtime/src/python/export.rs", "fn __array_interface__"): "a mask's descriptor (HostMask), not an array's protocol",
    ("cai-py/src/args.rs", "use num_complex::Complex"): "item values of the complex kind, generic over the part type",
}


TEST_ATTRIBUTE = re.compile(r"^\s*#\[cfg\((all\()?test\b[^\]]*\]\s*")


TOKENS = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)"""
    r"""|(?P<raw>r(?P<hashes>#*)".*?"(?P=hashes))"""
    r"""|(?P<string>b?"(?:\\.|[^"\\])*")"""
    r"""|(?P<char>b?'(?:\\.|[^'\\\n])')""",
    re.S,
)


def code_of(text):
    """`text` with comments, strings and char literals blanked (their braces are not code's),
    read left to right as the compiler does; newlines are kept, so lines keep their numbers."""
    return TOKENS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def library_lines(path):
    """The lines of `path` outside items gated on `test` (its test module, test helpers, a
    field or match arm), read as code (comments and literals blanked, line numbers kept)."""
    source = path.read_text().splitlines()
    code = code_of(path.read_text()).split("\n")
    skipping, depth, opened = False, 0, False
    for n, (line, text) in enumerate(zip(source, code), 1):
        if not skipping:
            m = TEST_ATTRIBUTE.match(text)
            if not m:
                yield n, line
                continue
            skipping, depth, opened = True, 0, False
            text = text[m.end():]  # the item may start on the attribute's line
            if not text.strip():
                continue
        depth += text.count("{") - text.count("}")
        opened = opened or "{" in text
        end = text.rstrip()
        if (opened and depth <= 0) or (not opened and end.endswith((";", ","))):
            skipping = False


def main():
    errors = []
    doc = DOC.read_text()
    section = doc.split("Where a change goes", 1)[1].split("\n## ", 1)[0]
    for kind, (files, module) in CHANGES.items():
        bullet = re.search(rf"- \*\*{re.escape(kind)}\*\*(.*?)(?=\n- \*\*|\Z)", section, re.S)
        if not bullet:
            errors.append(f"docs/repository.md has no bullet '{kind}'")
            continue
        text = " ".join(bullet.group(1).split())
        if len(files) > 3:
            errors.append(f"{kind}: {len(files)} files (at most 3): {files}")
        for f in files + [module] * bool(module):
            if not (ROOT / f).is_file():
                errors.append(f"{kind}: {f} does not exist")
            named = f"`{f}`" in text or (f == "Cargo.toml" and "workspace's `Cargo.toml`" in text)
            if f.endswith("/cust.rs"):
                named = named or "`cai-runtime/src/cuda/<backend>.rs`" in text
            if f.endswith("dlpack/mod.rs"):
                named = named or "`cai-runtime/src/python/<protocol>.rs`" in text
            if not named:
                errors.append(f"{kind}: docs/repository.md's bullet does not name {f}")
    used = set()
    for what, patterns, owners in OWNED:
        for folder in SOURCES:
            for path in sorted((ROOT / folder).rglob("*.rs")):
                rel = path.relative_to(ROOT).as_posix()
                if rel in owners:
                    continue
                for n, line in library_lines(path):
                    if line.lstrip().startswith("//"):
                        continue
                    for p in patterns:
                        m = re.search(p, line)
                        if not m:
                            continue
                        key = next((k for k in ALLOWED if k[0] == rel and k[1] in line), None)
                        if key:
                            used.add(key)
                        else:
                            errors.append(f"{rel}:{n}: knows {what} ({m.group(0)!r}), which only {', '.join(owners)} should")
    for key in ALLOWED.keys() - used:
        errors.append(f"ALLOWED entry no longer needed: {key}")
    for e in errors:
        print(e)
    kinds = ", ".join(
        f"{k.lower()[2:]}: {len(files)} files" + (" and its own module" if module else "")
        for k, (files, module) in CHANGES.items()
    )
    print(f"where-changes-go: {'FAILED' if errors else 'ok'} ({kinds})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
