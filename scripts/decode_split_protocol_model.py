# A random-schedule model of decode_split.cuh's producer/consumer protocol:
# the stage ring (full/empty mbarriers and their parities), the two h buffers
# with their monotonic counters h_ready (one per gate/up piece) and h_free
# (one per down box), and x's copy. MODE=parity models h_ready/h_free as
# mbarriers with parity waits instead, the first form, which this model
# showed wrong: a box could pass a wait two phases behind. It checks that nothing deadlocks, that every consumer reads
# the piece the producer put in its stage after it landed, that a down box
# reads the complete h slice of its own unit, and that no gate/up piece
# writes an h buffer a down box of another unit may still read. Run it after
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


def run(units, pieces_per_unit, boxes_per_unit, S, seed):
    rnd = random.Random(seed)
    full = [MBar(1) for _ in range(S)]
    empty = [MBar(1) for _ in range(S)]
    x_full = MBar(1)
    h_ready = [MBar(pieces_per_unit) for _ in range(2)]   # (parity mode)
    h_free = [MBar(boxes_per_unit) for _ in range(2)]
    ready_count = [0, 0]  # counter mode
    free_count = [0, 0]
    stage = [None] * S       # what landed in each stage
    header = [None] * S      # the piece descriptor
    h = [dict(), dict()]     # buffer -> {piece index: unit}
    readers = [0, 0]         # boxes of a unit reading buffer b right now (by unit)
    landings = []            # (bar, tx, action)
    live = [u for u in range(units) if rnd.random() > 0.2]  # some slots are dropped: no pieces

    def producer():
        x_full.arrive(1)
        landings.append((x_full, 1, None))
        k = 0

        def claim(piece):
            nonlocal k
            s = k % S
            if k >= S:
                while not empty[s].done(((k - S) // S) & 1):
                    yield
            header[s] = piece
            stage[s] = None
            full[s].arrive(1)
            landings.append((full[s], 1, (s, piece)))
            k += 1

        for lu, u in enumerate(live):
            for i in range(pieces_per_unit):
                yield from claim(('gu', lu, u, i))
            for r in range(boxes_per_unit):
                yield from claim(('box', lu, u, r))
        for _ in range(S):
            s = k % S
            if k >= S:
                while not empty[s].done(((k - S) // S) & 1):
                    yield
            header[s] = ('end',)
            full[s].arrive(0)
            k += 1
        while not x_full.done(0):
            yield

    def consumer(st):
        use = 0
        have_x = False
        while True:
            while not full[st].done(use & 1):
                yield
            pc = header[st]
            if pc[0] == 'end':
                return
            assert stage[st] == pc, f"stage {st}: read {stage[st]} for {pc}"
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
                        while free_count[b] < (lu >> 1) * boxes_per_unit:
                            yield
                assert readers[b] == 0, f"unit {lu} writes h[{b}] while a box still reads it"
                yield  # the dot products
                h[b][i] = lu
                h_ready[b].arrive()
                ready_count[b] += 1
            else:
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
            yield  # (the named barrier of the pair)
            empty[st].arrive()
            use += 1

    coros = [producer()] + [consumer(st) for st in range(S)]
    alive = list(range(len(coros)))
    for _ in range(200000):
        if not alive:
            return len(live)
        if landings and rnd.random() < 0.3:
            bar, tx, action = landings.pop(rnd.randrange(len(landings)))
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
    print(f"decode_split protocol: {cases} random schedules, no deadlock, no stale or overwritten read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
