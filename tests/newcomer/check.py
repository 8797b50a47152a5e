"""Builds the README's own code, as a newcomer would copy it: every fenced block after a
`<!-- newcomer: DIR/FILE -->` line is written to DIR/FILE in a scratch folder beside a `cai`
link to this repository (the README's crates depend on `../cai/...`), then each DIR that got a
Cargo.toml is built (`cargo run` where it has src/main.rs). The README cannot drift from the code.

Run: python3 tests/newcomer/check.py   (scripts/test.sh runs it)
"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARK = re.compile(r"^<!-- newcomer: (\S+) -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)


def main():
    readme = (ROOT / "README.md").read_text()
    blocks = MARK.findall(readme)
    if not blocks:
        sys.exit("README.md has no `<!-- newcomer: ... -->` code blocks")
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
            print(f"== README's {crate}: {' '.join(command)}", flush=True)
            subprocess.run(command, cwd=scratch / crate, env=env, check=True)
    print(f"README.md: {len(blocks)} blocks, {len(crates)} crates built")


if __name__ == "__main__":
    main()
