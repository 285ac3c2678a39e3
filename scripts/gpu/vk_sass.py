#!/usr/bin/env python3
"""What the NVIDIA Vulkan driver compiled our WGSL kernels into (issue 7: the driver offers no
internal representation through VK_KHR_pipeline_executable_properties).

The NVIDIA driver keeps compiled shaders in a disk cache, for Vulkan as for OpenGL: set
`__GL_SHADER_DISK_CACHE_PATH=DIR` (and `__GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1`) before a program
creates its pipelines, and DIR fills with pairs of `.toc` / `.bin` files. This script unpacks
every object of those pairs and disassembles the microcode with nvdisasm (CUDA toolkit, or PyPI's
nvidia-cuda-nvdisasm). Layout, as observed in the files themselves:

- `.toc`: a 32-byte header starting "CDVN", then 24-byte entries; bytes 16..20 of an entry are
  the offset of its section in the `.bin`, bytes 20..24 the section's size field.
- `.bin` section at that offset: a 36-byte header (magic 0x9846A19D, size field at 28, unpacked
  size at 32), then size - 4 bytes of packed data: a zstd frame (magic 28 B5 2F FD), or raw.
- an unpacked object that starts "NVuc" (or has it within its first 16 bytes, after "NVVM" or
  "NVDANVVM") is a microcode archive; its code section (see `code_section`) is raw SASS that
  `nvdisasm --binary SM90` reads.

Usage: vk_sass.py CACHE_DIR OUT_DIR [--nvdisasm PATH] [--arch SM90]. Writes objectNNNN.{nvuc,bin},
the code of each archive as objectNNNN.code and its disassembly as objectNNNN.sass, and prints
one line per object. Seen working: driver 580.159.04 on an H200, nvdisasm 13 (2026-11-23).
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

SECTION_MAGIC = 0x9846A19D
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def unpack(packed: bytes, size: int) -> bytes:
    if packed[:4] == ZSTD_MAGIC:
        out = subprocess.run(["zstd", "-d", "-c", "-q"], input=packed, capture_output=True)
        if out.returncode != 0:
            raise ValueError(f"zstd: {out.stderr.decode(errors='replace').strip()}")
        return out.stdout
    if len(packed) == size:
        return packed
    raise ValueError(f"unknown packing {packed[:8].hex()} ({len(packed)} bytes, {size} unpacked)")


def code_section(nvuc: bytes):
    """The microcode of an NVuc archive. nvdisasm 13 cannot read driver 580's archives whole, so
    the code is cut out and disassembled raw: the archive counts its sections at byte 16 and lists
    them from byte 32, 32 bytes each (type, size, offset from the archive's start); type 1 is the
    code (seen: one such section, its size the "Binary Size" of the pipeline's statistics)."""
    if len(nvuc) < 32:
        return None
    count, = struct.unpack_from("<I", nvuc, 16)
    for k in range(min(count, 64)):
        at = 32 + 32 * k
        if at + 12 > len(nvuc):
            break
        kind, size, offset = struct.unpack_from("<III", nvuc, at)
        if kind == 1 and size and offset + size <= len(nvuc):
            return nvuc[offset:offset + size]
    return None


def objects(toc_path: Path):
    toc = toc_path.read_bytes()
    bin_path = toc_path.with_suffix(".bin")
    if not bin_path.exists():
        raise ValueError(f"{toc_path}: no {bin_path.name} beside it")
    data = bin_path.read_bytes()
    if toc[:4] != b"CDVN" or (len(toc) - 32) % 24:
        raise ValueError(f"{toc_path}: not a cache index (magic {toc[:4]!r}, {len(toc)} bytes)")
    for i in range((len(toc) - 32) // 24):
        offset, size = struct.unpack_from("<II", toc, 32 + 24 * i + 16)
        if size < 4 or offset + 36 + size - 4 > len(data):
            yield i, None, f"entry out of range (offset {offset}, size {size})"
            continue
        magic, = struct.unpack_from("<I", data, offset)
        hsize, unpacked = struct.unpack_from("<II", data, offset + 28)
        if magic != SECTION_MAGIC or hsize != size:
            yield i, None, f"bad section header (magic {magic:#x}, size {hsize} vs {size})"
            continue
        try:
            yield i, unpack(data[offset + 36: offset + 36 + size - 4], unpacked), ""
        except ValueError as e:
            yield i, None, str(e)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache")
    ap.add_argument("out")
    ap.add_argument("--nvdisasm", default=shutil.which("nvdisasm") or "nvdisasm")
    ap.add_argument("--arch", default="SM90", help="nvdisasm --binary architecture (SM90: H100/H200)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for toc in sorted(Path(args.cache).rglob("*.toc")):
        try:
            found = list(objects(toc))
        except ValueError as e:
            print(f"skipping {e}")
            continue
        for i, obj, why in found:
            name = f"object{n:04d}"
            n += 1
            if obj is None:
                print(f"{name} ({toc.name}#{i}): {why}")
                continue
            # Driver 580 (H200, 2026-11): "NVDA" "NVVM" "NVuc"...; older: "NVVMNVuc", "NVuc".
            at = obj.find(b"NVuc", 0, 16)
            if at > 0:
                obj = obj[at:]
            ext = "nvuc" if obj[:4] == b"NVuc" else "bin"
            (out / f"{name}.{ext}").write_bytes(obj)
            line = f"{name} ({toc.name}#{i}): {len(obj)} bytes, {ext}"
            if ext == "nvuc":
                code = code_section(obj)
                if code is None:
                    line += ", no code section found"
                else:
                    (out / f"{name}.code").write_bytes(code)
                    r = subprocess.run(
                        [args.nvdisasm, "--binary", args.arch, str(out / f"{name}.code")],
                        capture_output=True, text=True)
                    if r.returncode == 0:
                        (out / f"{name}.sass").write_text(r.stdout)
                        instr = sum(1 for l in r.stdout.splitlines() if l.rstrip().endswith(";"))
                        line += f", {instr} instructions -> {name}.sass"
                    else:
                        line += f", nvdisasm failed: {r.stderr.strip()[:200]}"
            print(line)
    if n == 0:
        print(f"no cache index (*.toc) under {args.cache}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
