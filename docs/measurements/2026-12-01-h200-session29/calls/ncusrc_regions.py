#!/usr/bin/env python3
"""Warp stall samples of one ncusrc SASS listing, summed by code region.

    python3 ncusrc_regions.py call2/ncusrc_fused_moe_race-performance-2.sass.csv

The region bounds are the SASS offsets (low 20 bits of the address) of
call 2's race 2 down-projection kernel (tree 694bdc8), read off the listing:
the consumer mainloop runs from its tile-ring wait to the k-loop's branch
back, the epilogue from the last wgmma wait to the exit path, the producer
(thread 0, TMA) after the consumers' exit.
"""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
hdr, data = rows[1], rows[2:]
ia, iss = hdr.index("Address"), hdr.index("Warp Stall Sampling (All Samples)")
total = sum(int(r[iss]) for r in data)
regions = [("setup, tile ring", 0, 0xC3720), ("consumer mainloop", 0xC3720, 0xC3EE0),
           ("last wgmma wait", 0xC3EE0, 0xC3F30), ("epilogue", 0xC3F30, 0xC6590),
           ("consumer exit", 0xC6590, 0xC6740), ("producer", 0xC6740, 0xC7FF0), ("wait retries", 0xC7FF0, 0x100000)]
for name, lo, hi in regions:
    s = sum(int(r[iss]) for r in data if lo <= int(r[ia], 16) & 0xFFFFF < hi)
    print(f"{name:20s} {s:7d} {100 * s / total:5.1f}%")
