#!/usr/bin/env python3
"""Whether two JIT cache directories hold the same machine code.

    scripts/kernel_code_diff.py CACHE_A CACHE_B

Each cache is a TILECRAFT_CACHE_DIR that `tilecraft compile` filled (for
example one with the tree's kernels, one with TILECRAFT_KERNEL_DIR set to
an older revision's). Kernels are matched by (function, template
arguments, config, arch, options); for each pair the code-bearing sections of the cubins (.text.*,
.nv.shared.*, .nv.constant0.*, matched by kind and order, not by the
mangled names in theirs) are compared byte for byte. Whole cubins
differ even for unchanged kernels (their cache keys differ with the
sources), so this is the check that a source change which should not
change code (comments, refactors, code compiled out) did not: a GPU result
measured on one side then holds for the other.

Prints each differing or unmatched kernel; exit 0 when every kernel is in
both caches with the same code, 1 otherwise, 2 on a usage error.
"""
import glob
import hashlib
import json
import os
import struct
import sys

CODE_PREFIXES = (".text", ".nv.shared", ".nv.constant0")
SHT_NOBITS = 8


def code_sections(cubin):
    """{section name: sha256 of its bytes (size for NOBITS)} for the code-bearing sections of an ELF64 cubin."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("not an ELF64 file")
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name_off, kind, _flags, _addr, off, size, *_ in headers:
        start = names_at + name_off
        name = cubin[start:cubin.index(b"\0", start)].decode()
        prefix = next((p for p in CODE_PREFIXES if name.startswith(p)), None)
        if prefix:
            # Keyed by kind and order, not by the mangled kernel name: a
            # template argument added with a default (a new instantiation
            # for one value only) renames every kernel without changing code.
            n = sum(1 for k in out if k.startswith(prefix + "#"))
            out[f"{prefix}#{n}"] = f"nobits:{size}" if kind == SHT_NOBITS else hashlib.sha256(cubin[off:off + size]).hexdigest()
    return out


def load(cache):
    kernels = {}
    for meta in glob.glob(os.path.join(cache, "kernels", "*", "*.json")):
        with open(meta) as f:
            j = json.load(f)
        with open(meta[:-len(".json")] + ".cubin", "rb") as f:
            sections = code_sections(f.read())
        key = (j["function"], json.dumps(j.get("template_args", "")), j["config"], j["arch"], j.get("options", ""))
        kernels[key] = sections
    return kernels


def main(argv):
    if len(argv) != 3 or not all(os.path.isdir(d) for d in argv[1:]):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    a, b = load(argv[1]), load(argv[2])
    bad = 0
    for key in sorted(set(a) | set(b)):
        label = " ".join(k for i, k in enumerate(key) if k and i != 1)
        if key not in a or key not in b:
            print(f"only in {'B' if key not in a else 'A'}: {label}")
            bad += 1
        elif a[key] != b[key]:
            changed = sorted(s for s in set(a[key]) | set(b[key]) if a[key].get(s) != b[key].get(s))
            print(f"code differs: {label} ({', '.join(changed)})")
            bad += 1
    print(f"{len(set(a) & set(b))} kernels in both, {bad} differing or unmatched")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
