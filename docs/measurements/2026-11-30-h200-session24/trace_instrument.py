import sys
d=sys.argv[1]
p=d+'/moe/decode_split_balanced.cuh'; s=open(p).read()
def rep(a,b):
    global s
    assert a in s, a
    s=s.replace(a,b)
rep("""    Piece piece[kSplitMaxStages];""","""    Piece piece[kSplitMaxStages];
    unsigned long long t_start, t_flag, t_prodA, t_prodB, t_wait0, t_wait1;""")
rep("""    sh.pieces_done = 0;
  }
""","""    sh.pieces_done = 0;
    sh.t_flag = sh.t_prodA = sh.t_prodB = sh.t_wait1 = 0, sh.t_wait0 = ~0ull;
  }
  static __device__ __forceinline__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
  }
""")
rep("""    for (int bx = sh.b0; bx < sh.b1; ++bx, ++k) {""","""    sh.t_prodA = now();
    for (int bx = sh.b0; bx < sh.b1; ++bx, ++k) {""")
rep("""    for (int i = 0; i < S; ++i, ++k) {  // every consumer pair's end""","""    sh.t_prodB = now();
    for (int i = 0; i < S; ++i, ++k) {  // every consumer pair's end""")
rep("""          publish(p, sh, lane);""","""          publish(p, sh, lane); sh.t_flag = now();""")
rep("""        if (ls != ready_ls) wait_slot(p, ls, lane), ready_ls = ls;""","""        if (ls != ready_ls) {
          const unsigned long long t0 = now();
          wait_slot(p, ls, lane), ready_ls = ls;
          if (lane == 0) atomicMin(&sh.t_wait0, t0), atomicMax(&sh.t_wait1, now());
        }""")
rep("""  if (threadIdx.x == 0) B::setup(p, sh);""","""  if (threadIdx.x == 0) B::setup(p, sh), sh.t_start = B::now();""")
rep("""  __syncthreads();
  if (last_out) {""","""  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long te = B::now();
    unsigned smid;
    asm("mov.u32 %0, %smid;" : "=r"(smid));
    printf("TRACE cta %d sm %u start %llu flag %llu prodA %llu prodB %llu wait0 %llu wait1 %llu end %llu\\n", blockIdx.x, smid,
           sh.t_start, sh.t_flag, sh.t_prodA, sh.t_prodB, sh.t_wait0, sh.t_wait1, te);
  }
  if (last_out) {""")
open(p,'w').write(s)
