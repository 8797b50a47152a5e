"""Builds the docs' own code, as a newcomer would copy it: every fenced block after a
`<!-- newcomer: DIR/FILE -->` line (in README.md and the docs that have such blocks,
`DOCS`) is written to DIR/FILE in a scratch folder beside a `cai`
link to this repository (the README's crates depend on `../cai/...`), then each DIR that got a
Cargo.toml is built (`cargo run` where it has src/main.rs). A DIR with Python files is a PyO3
module: its wheel is built with maturin (this interpreter's), installed into a scratch folder, and
each of its Python files run with this interpreter (NumPy from its environment). The README cannot
drift from the code.

With `--driver DIR` (a folder holding a libcuda.so.1: the emulated driver's, in the test command),
every program is run a second time with that driver found first, and must then not say
"no GPU here" (the README's GPU example says so only where the driver or a device is missing):
its device path runs as written, the context it makes current included.

Run: python3 tests/newcomer/check.py [--driver DIR]   (scripts/test.sh runs it)
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The files whose marked blocks are built and run, README.md first.
DOCS = ["README.md", "docs/python.md", "docs/cuda.md"]
MARK = re.compile(r"^<!-- newcomer: (\S+) -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)
# What the README's GPU example prints where it finds no driver or no device.
NO_GPU = "no GPU here"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--driver", type=pathlib.Path, help="a folder with a libcuda.so.1")
    args = parser.parse_args()
    blocks = []
    for doc in DOCS:
        found = MARK.findall((ROOT / doc).read_text())
        if not found:
            sys.exit(f"{doc} has no `<!-- newcomer: ... -->` code blocks")
        blocks += found
    target = ROOT / "target" / "newcomer"
    with tempfile.TemporaryDirectory() as tmp:
        scratch = pathlib.Path(tmp)
        (scratch / "cai").symlink_to(ROOT)
        for path, text in blocks:
            out = scratch / path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
        crates = sorted({pathlib.Path(p).parts[0] for p, _ in blocks if p.endswith("Cargo.toml")})
        env = dict(os.environ, CARGO_TARGET_DIR=str(target))
        for crate in crates:
            binary = (scratch / crate / "src" / "main.rs").exists()
            command = ["cargo", "run", "--quiet"] if binary else ["cargo", "build", "--quiet"]
            print(f"== {crate}: {' '.join(command)}", flush=True)
            subprocess.run(command, cwd=scratch / crate, env=env, check=True)
            if binary and args.driver:
                print(f"== {crate}: {' '.join(command)}, with {args.driver}", flush=True)
                library_path = [str(args.driver.resolve()), env.get("LD_LIBRARY_PATH", "")]
                run = subprocess.run(
                    command,
                    cwd=scratch / crate,
                    env=dict(env, LD_LIBRARY_PATH=":".join(filter(None, library_path))),
                    check=True,
                    capture_output=True,
                    text=True,
                )
                print(run.stdout, end="", file=sys.stdout)
                print(run.stderr, end="", file=sys.stderr)
                if NO_GPU in run.stdout:
                    sys.exit(f"README's {crate} found no GPU with the driver in {args.driver}")
        for crate in sorted({pathlib.Path(p).parts[0] for p, _ in blocks if p.endswith(".py")}):
            run_module(scratch / crate, env)
    print(f"{', '.join(DOCS)}: {len(blocks)} blocks, {len(crates)} crates built")


def run_module(crate, env):
    """Builds `crate`'s wheel, installs it into a scratch folder and runs its Python files."""
    maturin = pathlib.Path(sys.executable).parent / "maturin"
    wheels, site = crate / "wheels", crate / "site"
    print(f"== {crate.name}: maturin build, then its Python", flush=True)
    subprocess.run([maturin, "build", "--quiet", "-i", sys.executable, "-o", wheels], cwd=crate, env=env, check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--target", site, *wheels.glob("*.whl")],
        check=True,
    )
    for script in sorted(crate.glob("*.py")):
        print(f"== {crate.name}/{script.name}", flush=True)
        subprocess.run([sys.executable, script], env=dict(env, PYTHONPATH=site), check=True)


if __name__ == "__main__":
    main()
