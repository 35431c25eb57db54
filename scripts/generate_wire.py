"""Regenerate (or, with --check, verify) the code generated from proto/ and fbs/.

Generated files are committed so an install needs neither protoc nor flatc;
CI runs ``--check`` so a schema edit without regeneration fails.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto" / "dejaq.proto"
FBS = ROOT / "fbs" / "batch.fbs"
# What generation produces, relative to the repository root.
PROTO_OUT = ["proto/dejaq_pb2.py", "proto/dejaq_pb2.pyi", "proto/dejaq_pb2_grpc.py"]
FBS_OUT_DIR = "fbs/batch"


def _generate(out: Path) -> None:
    # protoc: lay the schema out as dejaq/proto/ so generated imports read
    # `from dejaq.proto import dejaq_pb2`.
    src = out / "src" / "dejaq" / "proto"
    src.mkdir(parents=True)
    shutil.copy(PROTO, src / "dejaq.proto")
    gen = out / "gen"
    gen.mkdir()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{out / 'src'}",
            f"--python_out={gen}",
            f"--pyi_out={gen}",
            f"--grpc_python_out={gen}",
            "dejaq/proto/dejaq.proto",
        ],
        check=True,
    )
    (out / "proto").mkdir()
    for name in ("dejaq_pb2.py", "dejaq_pb2.pyi", "dejaq_pb2_grpc.py"):
        shutil.copy(gen / "dejaq" / "proto" / name, out / "proto" / name)

    # flatc: namespace dejaq.fbs.batch -> dejaq/fbs/batch/*.py
    fgen = out / "fgen"
    subprocess.run(["flatc", "--python", "-o", str(fgen), str(FBS)], check=True)
    shutil.copytree(fgen / "dejaq" / "fbs" / "batch", out / FBS_OUT_DIR)


def _tree(base: Path) -> dict[str, Path]:
    files = {p: base / p for p in PROTO_OUT}
    for f in sorted((base / FBS_OUT_DIR).glob("*.py")):
        files[f"{FBS_OUT_DIR}/{f.name}"] = f
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if generated code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        _generate(out)
        fresh = _tree(out)
        if args.check:
            current = _tree(ROOT)
            stale = sorted(
                name
                for name in fresh.keys() | current.keys()
                if name not in fresh
                or name not in current
                or not filecmp.cmp(fresh[name], current[name], shallow=False)
            )
            if stale:
                print("generated code is stale; run scripts/generate_wire.py:", *stale, sep="\n  ")
                return 1
            print("generated code is fresh")
            return 0
        shutil.rmtree(ROOT / FBS_OUT_DIR, ignore_errors=True)
        for name, path in fresh.items():
            target = ROOT / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        print("generated", len(fresh), "files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
