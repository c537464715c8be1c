# A random-schedule model of decode_split.cuh's producer/consumer protocol:
# the stage ring (full/empty mbarriers and their parities), the two h buffers
# with their monotonic counters h_ready (one per gate/up piece) and h_free
# (one per down box), and x's copy. MODE=parity models h_ready/h_free as
# mbarriers with parity waits instead, the first form, which this model
# showed wrong: a box could pass a wait two phases behind. It checks that nothing deadlocks, that every consumer reads
# the piece the producer put in its stage after it landed, that a down box
# reads the complete h slice of its own unit, and that no gate/up piece
# writes an h buffer a down box of another unit may still read. With several
# CTAs and a balancing pool (the last `pool` boxes of every unit, claimed
# through a global counter once every unit's h is published), it also checks
# that a pool box reads a complete published h, that every box of every live
# unit is computed exactly once, that no CTA waits for another, and that the
# last CTA out leaves the counters at 0 after everyone's last use. Run it after
# changing the protocol, before spending device time:
#   python3 scripts/decode_split_protocol_model.py
import os
import random
import sys

PARITY = os.environ.get("MODE") == "parity"


class MBar:
    def __init__(self, count):
        self.count, self.arrived, self.tx, self.phase = count, 0, 0, 0

    def arrive(self, tx=0):
        self.tx += tx
        self.arrived += 1
        self._check()

    def land(self, tx):
        self.tx -= tx
        self._check()

    def _check(self):
        if self.arrived == self.count and self.tx == 0:
            self.phase += 1
            self.arrived = 0

    def done(self, parity):  # try_wait.parity: the phase with this parity has completed
        return (self.phase & 1) != parity


class Global:
    """What the CTAs share: h_global, the counter pair, the boxes computed."""

    def __init__(self, live_units, pool):
        self.h = {}               # unit -> set of gate/up pieces written to h_global
        self.published = 0        # high bits of sched[0]
        self.claims = 0           # low bits of sched[0]
        self.done = 0             # sched[1]
        self.reset = False
        self.live_units, self.pool = live_units, pool
        self.computed = {}        # (unit, box) -> times


def cta(units, pieces_per_unit, boxes_per_unit, S, pool, g, rnd, landings, ctas_left):
    """One CTA's coroutines over its own (possibly dropped) units."""
    own_boxes = boxes_per_unit - pool
    full = [MBar(1) for _ in range(S)]
    empty = [MBar(1) for _ in range(S)]
    x_full = MBar(1)
    h_ready = [MBar(pieces_per_unit) for _ in range(2)]   # (parity mode)
    h_free = [MBar(max(own_boxes, 1)) for _ in range(2)]
    ready_count = [0, 0]  # counter mode
    free_count = [0, 0]
    stage = [None] * S       # what landed in each stage
    header = [None] * S      # the piece descriptor
    h = [dict(), dict()]     # buffer -> {piece index: unit}
    readers = [0, 0]         # boxes of a unit reading buffer b right now (by unit)
    live = [u for u in units if u in g.live_units]
    finished = [0]
    published = [0]  # this CTA's units published

    def producer():
        x_full.arrive(1)
        landings.append((x_full, 1, None, stage))
        ring = Ring(S, full, empty, header, stage, landings)
        claim = ring.claim

        for lu, u in enumerate(live):
            for i in range(pieces_per_unit):
                yield from claim(('gu', lu, u, i))
            for r in range(own_boxes):
                yield from claim(('box', lu, u, r))
        if pool:
            while published[0] < len(live):
                yield
            if g.published == len(g.live_units):
                order = sorted(g.live_units)
                while True:
                    assert not g.reset, "claim after the counters were reset"
                    v = g.claims
                    g.claims += 1
                    if v >= len(order) * pool:
                        break
                    yield from claim(('pool', 0, order[v % len(order)], own_boxes + v // len(order)))
        yield from ring.finish()
        while not x_full.done(0):
            yield

    def consumer(st):
        use = 0
        have_x = False
        while True:
            pc = yield from next_piece(full, header, stage, st, use)
            if pc is None:
                return
            kind, lu, u, i = pc
            b = lu & 1
            if kind == 'gu':
                if not have_x:
                    while not x_full.done(0):
                        yield
                    have_x = True
                if lu >= 2:
                    if PARITY:
                        while not h_free[b].done(((lu >> 1) - 1) & 1):
                            yield
                    else:
                        while free_count[b] < (lu >> 1) * (own_boxes + (1 if pool else 0)):
                            yield
                assert readers[b] == 0, f"unit {lu} writes h[{b}] while a box still reads it"
                yield  # the dot products
                h[b][i] = lu
                h_ready[b].arrive()
                ready_count[b] += 1
                if pool and ready_count[b] == ((lu >> 1) + 1) * pieces_per_unit:
                    # The unit's last piece: copy the buffer out, then publish.
                    for j in range(pieces_per_unit):
                        assert h[b].get(j) == lu, f"copy of unit {lu} reads h[{b}] = {h[b]}"
                        yield
                        assert h[b].get(j) == lu, f"h[{b}] changed under the copy of unit {lu}"
                        g.h.setdefault(u, set()).add(j)
                    assert not g.reset, "publish after the counters were reset"
                    g.published += 1
                    yield
                    published[0] += 1
                    free_count[b] += 1
            elif kind == 'box':
                if PARITY:
                    while not h_ready[b].done((lu >> 1) & 1):
                        yield
                else:
                    while ready_count[b] < ((lu >> 1) + 1) * pieces_per_unit:
                        yield
                assert all(h[b].get(j) == lu for j in range(pieces_per_unit)), \
                    f"box of unit {lu} reads h[{b}] = {h[b]}"
                readers[b] += 1
                yield  # reading h and the stage
                assert all(h[b].get(j) == lu for j in range(pieces_per_unit)), f"h[{b}] changed under a box"
                readers[b] -= 1
                h_free[b].arrive()
                free_count[b] += 1
                g.computed[(u, i)] = g.computed.get((u, i), 0) + 1
            else:  # a pool box: h from h_global
                assert g.h.get(u) == set(range(pieces_per_unit)), f"pool box of unit {u} reads h {g.h.get(u)}"
                yield
                g.computed[(u, i)] = g.computed.get((u, i), 0) + 1
            yield  # (the named barrier of the pair)
            empty[st].arrive()
            use += 1

    def wrap(co):
        yield from co
        finished[0] += 1
        if finished[0] == S + 1 and pool:  # the CTA's last barrier: count it out
            assert not g.reset
            g.done += 1
            if g.done == ctas_left:
                g.claims = g.published = g.done = 0
                g.reset = True

    return [wrap(producer())] + [wrap(consumer(st)) for st in range(S)]


def interleave(coros, landings, rnd, steps):
    """Runs the coroutines (warps) and the copies' landings in a random
    order until every coroutine has returned; fails if none can move."""
    alive = list(range(len(coros)))
    for _ in range(steps):
        if not alive:
            return
        if landings and rnd.random() < 0.3:
            bar, tx, action, stage = landings.pop(rnd.randrange(len(landings)))
            if action is not None:
                s, piece = action
                stage[s] = piece
            bar.land(tx)
            continue
        c = rnd.choice(alive)
        try:
            next(coros[c])
        except StopIteration:
            alive.remove(c)
    raise AssertionError(f"no progress (deadlock?): alive {alive}, landings {len(landings)}")


def next_piece(full, header, stage, st, use):
    """A consumer's next piece of stage st (its use-th), once it has landed,
    checked against what the stage holds; None at the end marker."""
    while not full[st].done(use & 1):
        yield
    pc = header[st]
    if pc[0] == 'end':
        return None
    assert stage[st] == pc, f"stage {st}: read {stage[st]} for {pc}"
    return pc


class Ring:
    """The producer's side of a CTA's ring (both kernels): piece k takes
    stage k % S once that stage's previous use is released; finish() gives
    every consumer its end marker."""

    def __init__(self, S, full, empty, header, stage, landings):
        self.S, self.full, self.empty, self.header, self.stage, self.landings = S, full, empty, header, stage, landings
        self.k = 0

    def wait_free(self):
        S, k = self.S, self.k
        if k >= S:
            while not self.empty[k % S].done(((k - S) // S) & 1):
                yield

    def claim(self, piece):
        yield from self.wait_free()
        s = self.k % self.S
        self.header[s] = piece
        self.stage[s] = None
        self.full[s].arrive(1)
        self.landings.append((self.full[s], 1, (s, piece), self.stage))
        self.k += 1

    def finish(self):
        for _ in range(self.S):
            yield from self.wait_free()
            s = self.k % self.S
            self.header[s] = ('end',)
            self.full[s].arrive(0)
            self.k += 1


def run(units, pieces_per_unit, boxes_per_unit, S, seed, ctas=1, pool=0):
    rnd = random.Random(seed)
    live_units = {u for u in range(units) if rnd.random() > 0.2}  # some slots are dropped: no pieces
    g = Global(live_units, pool)
    landings = []  # (bar, tx, action, that CTA's stages)
    ctas = max(1, min(ctas, units)) if units else 1
    coros = []
    for c in range(ctas):
        mine = list(range(units * c // ctas, units * (c + 1) // ctas))
        coros += cta(mine, pieces_per_unit, boxes_per_unit, S, pool, g, rnd, landings, ctas)
    interleave(coros, landings, rnd, 400000)
    for u in live_units:
        for r in range(boxes_per_unit):
            assert g.computed.get((u, r)) == 1, f"unit {u} box {r} computed {g.computed.get((u, r))} times"
    assert len(g.computed) == len(live_units) * boxes_per_unit, "a box of a dropped unit was computed"
    if pool:
        assert g.reset and g.claims == g.published == g.done == 0, "counters not left at 0"
    return len(live_units)


def run_balanced(slots, slices, W, gu, items_per_slot, S, G, seed):
    """decode_split = 2: G CTAs, each with an even range of the live slots'
    h columns (phase A: gate/up pieces that never cross a W-column unit)
    and of their down items (phase B: full rows of one slot). A CTA's last
    phase-A piece copies its h columns to h_global and adds, to each slot
    those columns meet, how many it published there; an item of slot ls
    waits until that count is I = slices * W. The last CTA out zeroes the
    counts."""
    rnd = random.Random(seed)
    live = [j for j in range(slots) if rnd.random() > 0.2]
    I = slices * W
    cols, items = len(live) * I, len(live) * items_per_slot
    g = {"h": set(), "slot_cols": [0] * len(live), "done": 0, "reset": False, "computed": {}}
    landings = []
    coros = []

    def cta(b):
        a0, a1 = cols * b // G, cols * (b + 1) // G
        b0, b1 = items * b // G, items * (b + 1) // G
        pieces = []
        c = a0
        while c < a1:
            n = min(gu, W - c % W, a1 - c)
            pieces.append((c, n))
            c += n
        full = [MBar(1) for _ in range(S)]
        empty = [MBar(1) for _ in range(S)]
        stage, header = [None] * S, [None] * S
        local_h = set()
        state = {"done_pieces": 0, "finished": 0}

        def publish():
            assert not g["reset"], "publish after the counters were reset"
            if a1 <= a0:
                return
            for ls in range(a0 // I, (a1 - 1) // I + 1):
                lo, hi = max(a0, ls * I), min(a1, (ls + 1) * I)
                g["slot_cols"][ls] += hi - lo

        def producer():
            ring = Ring(S, full, empty, header, stage, landings)
            claim = ring.claim

            for c, n in pieces:
                yield from claim(('gu', c, n))
            for bx in range(b0, b1):
                yield from claim(('rows', bx // items_per_slot, bx % items_per_slot))
            yield from ring.finish()

        def consumer(st):
            use = 0
            while True:
                pc = yield from next_piece(full, header, stage, st, use)
                if pc is None:
                    return
                if pc[0] == 'gu':
                    _, c, n = pc
                    yield  # the dot products
                    local_h.update(range(c, c + n))
                    state["done_pieces"] += 1
                    if state["done_pieces"] == len(pieces):
                        for col in sorted(local_h):  # the copy out
                            yield
                            g["h"].add(col)
                        assert local_h == set(range(a0, a1)), "a CTA published before all its columns"
                        publish()
                else:
                    _, ls, r = pc
                    while g["slot_cols"][ls] < I:
                        yield
                    assert set(range(ls * I, ls * I + I)) <= g["h"], f"rows of live slot {ls} read an incomplete h"
                    yield
                    g["computed"][(ls, r)] = g["computed"].get((ls, r), 0) + 1
                yield  # (the named barrier of the pair)
                empty[st].arrive()
                use += 1

        def wrap(co):
            yield from co
            state["finished"] += 1
            if state["finished"] == S + 1:
                assert not g["reset"]
                g["done"] += 1
                if g["done"] == G:
                    assert all(v == I for v in g["slot_cols"]), f"slot counts {g['slot_cols']}, want {I} each"
                    g["slot_cols"] = [0] * len(live)
                    g["done"] = 0
                    g["reset"] = True

        return [wrap(producer())] + [wrap(consumer(st)) for st in range(S)]

    for b in range(G):
        coros += cta(b)
    interleave(coros, landings, rnd, 600000)
    for ls in range(len(live)):
        for r in range(items_per_slot):
            assert g["computed"].get((ls, r)) == 1, f"live slot {ls} item {r}: {g['computed'].get((ls, r))}"
    assert g["reset"] and g["done"] == 0 and not any(g["slot_cols"]), "counters not left at 0"


def main():
    cases = 0
    for seed in range(400):
        rnd = random.Random(seed)
        units = rnd.randint(0, 7)
        S = rnd.randint(2, 8)
        pieces = rnd.randint(1, 5)
        boxes = rnd.randint(1, 4)
        run(units, pieces, boxes, S, seed)
        cases += 1
    if not PARITY:
        for seed in range(300):
            rnd = random.Random(1000 + seed)
            units = rnd.randint(0, 9)
            S = rnd.randint(2, 6)
            pieces = rnd.randint(1, 4)
            boxes = rnd.randint(1, 5)
            run(units, pieces, boxes, S, 1000 + seed, ctas=rnd.randint(1, 4), pool=rnd.randint(0, boxes - 1))
            cases += 1
        for seed in range(200):
            rnd = random.Random(5000 + seed)
            run_balanced(rnd.randint(0, 4), rnd.randint(1, 3), rnd.choice([2, 3, 4, 6]), rnd.randint(1, 3),
                         rnd.randint(1, 4), rnd.randint(2, 5), rnd.randint(1, 9), 5000 + seed)
            cases += 1
    print(f"decode_split protocol: {cases} random schedules (one CTA; several with a pool; decode_split=2 over "
          "several CTAs), no deadlock, no stale or overwritten read, every box once, counters left at 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
