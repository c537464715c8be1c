#!/usr/bin/env python3
"""The kernel-sources fingerprint `tilecraft env` prints (kernel_sources_sha256)
for a git revision or a kernel directory: SHA-256 over each kernels/**/*.cuh
header's path (relative to kernels/) and text, in path order, as
length-prefixed fields ("<bytes>:<data>"), first 16 hex digits. It maps a
device log to the tree that produced it where the build's git commit cannot
(the device's copy of the repository, or an uncommitted tree).

  scripts/kernel_sources_hash.py            # HEAD
  scripts/kernel_sources_hash.py REV        # any revision
  scripts/kernel_sources_hash.py --dir D    # a kernel directory (TILECRAFT_KERNEL_DIR)
"""
import hashlib
import os
import subprocess
import sys


def field(h, data):
    h.update(str(len(data)).encode())
    h.update(b":")
    h.update(data)


def fingerprint(files):
    h = hashlib.sha256()
    for path, text in sorted(files):
        field(h, path.encode())
        field(h, text)
    return h.hexdigest()[:16]


def from_rev(rev):
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "kernels"], check=True,
                           capture_output=True, text=True).stdout.split()
    files = []
    for n in names:
        if n.endswith(".cuh"):
            text = subprocess.run(["git", "show", f"{rev}:{n}"], check=True, capture_output=True).stdout
            files.append((n[len("kernels/"):], text))
    return files


def from_dir(d):
    files = []
    for root, _, names in os.walk(d):
        for n in names:
            if n.endswith(".cuh"):
                p = os.path.join(root, n)
                with open(p, "rb") as f:
                    files.append((os.path.relpath(p, d).replace(os.sep, "/"), f.read()))
    return files


def main(argv):
    if len(argv) == 2 and argv[0] == "--dir":
        print(fingerprint(from_dir(argv[1])))
    elif len(argv) <= 1:
        print(fingerprint(from_rev(argv[0] if argv else "HEAD")))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
