#!/usr/bin/env python3
"""Runs the wide permute kernels (copy_permute_w16/w32/w64) on the CPU.

A small PTX interpreter for the instruction subset these kernels use: every thread of each
block runs as a generator that yields at `bar.sync`, so shared memory and barriers behave as
on the device. Each case describes a copy (PermuteArgs axes in runs and 16-byte units), runs
the kernel over it with several tiles per block, in both tile-origin forms, and checks that

* every destination run equals its source run,
* every global access is 16-byte aligned and inside the described runs,
* every destination vector is stored exactly once,
* shared-memory accesses stay inside the kernel's tile.

Usage: ptxsim_wide.py DIR, where DIR holds copy_permute_w16.ptx, copy_permute_w32.ptx and
copy_permute_w64.ptx. Exits non-zero on the first failure.
"""
import re, struct, sys, random, itertools
M32=(1<<32)-1; M64=(1<<64)-1
def s32(x): x&=M32; return x-(1<<32) if x>>31 else x
def s64(x): x&=M64; return x-(1<<64) if x>>63 else x

def parse(text):
    body=text[text.index('{',text.index('.entry')):]
    lines=[l.strip() for l in body.split('\n')]
    ins=[];labels={}
    for l in lines:
        if not l or l.startswith('//') or l.startswith('.reg') or l in '{}' or l.startswith('.reqntid'): continue
        if l.endswith(':'): labels[l[:-1]]=len(ins); continue
        l=l.rstrip(';')
        pred=None
        if l.startswith('@'):
            p,l=l.split(None,1); pred=p[1:]
        op,_,rest=l.partition(' ')
        # split operands at top-level commas
        ops=[];depth=0;cur=''
        for ch in rest:
            if ch in '{[': depth+=1
            if ch in '}]': depth-=1
            if ch==',' and depth==0: ops.append(cur.strip()); cur=''
            else: cur+=ch
        if cur.strip(): ops.append(cur.strip())
        ins.append((pred,op,ops))
    return ins,labels

class Ctx: pass

def run_kernel(text, params, glob, tid_dims, nblocks, shared_size, log):
    ins,labels=parse(text)
    tile_name=re.search(r'\.shared \.align 16 \.b8 (\w+)\[',text).group(1)
    def thread(bx,tx,ty,shared):
        R={}
        def val(o):
            if o in R: return R[o]
            if o=='%tid.x': return tx
            if o=='%tid.y': return ty
            if o=='%ctaid.x': return bx
            if o=='%nctaid.x': return nblocks
            if o==tile_name: return 0
            if re.fullmatch(r'-?(0x[0-9A-Fa-f]+|\d+)',o): return int(o,0)
            raise Exception('reg '+o)
        def memaddr(o):
            o=o.strip('[]')
            if '+' in o:
                a,b=o.split('+')
                if a=='p_args': return ('p',int(b))
                return val(a)+int(b)
            if o=='p_args': return ('p',0)
            return val(o)
        pc=0
        while True:
            pred,op,ops=ins[pc]; pc+=1
            if pred:
                neg=pred.startswith('!'); p=R[pred.lstrip('!')]
                if p==neg: continue
            parts=op.split('.')
            o=parts[0]
            if o=='ret': return
            if o=='bra': pc=labels[ops[0]]; continue
            if o=='bar': yield 'bar'; continue
            if o=='ld' and parts[1]=='param':
                kind,off=memaddr(ops[1]); w=int(parts[2][1:])//8
                x=int.from_bytes(params[off:off+w],'little')
                R[ops[0]]=x; continue
            if o in('ld','st') and parts[1] in('global','shared'):
                regs=[r.strip() for r in (ops[0] if o=='ld' else ops[1]).strip('{}').split(',')]
                a=memaddr(ops[1] if o=='ld' else ops[0])
                a&=M64
                assert a%16==0,('misaligned',op,hex(a))
                space=glob if parts[1]=='global' else shared
                if parts[1]=='shared': assert 0<=a and a+16<=shared_size,('shared oob',a)
                if o=='ld':
                    b=space.read(a,16) if parts[1]=='global' else bytes(shared[a:a+16])
                    R[regs[0]]=int.from_bytes(b[:8],'little'); R[regs[1]]=int.from_bytes(b[8:],'little')
                    if parts[1]=='global': log.append(('ld',a))
                else:
                    b=val(regs[0]).to_bytes(8,'little')+val(regs[1]).to_bytes(8,'little') if regs[0] in R else None
                    if parts[1]=='global':
                        glob.write(a,b); log.append(('st',a))
                    else:
                        shared[a:a+16]= b if b is not None else b'\xee'*16
                continue
            d=ops[0]
            if o=='mov': R[d]=val(ops[1])&(M64 if parts[1] in('b64','u64') else M32); continue
            if o=='cvt':
                x=val(ops[1]); dt,st=parts[1],parts[2]
                if st=='s32': x=s32(x)
                elif st=='u32': x&=M32
                R[d]=x&(M64 if dt[1:]=='64' else M32); continue
            if o=='setp':
                cmp=parts[1]; tp=parts[-1]; comb=parts[2] if len(parts)==4 else None
                a,b=val(ops[1]),val(ops[2]); w=int(tp[1:])
                m=(1<<w)-1; a&=m; b&=m
                if tp[0]=='s': a=a-(1<<w) if a>>(w-1) else a; b=b-(1<<w) if b>>(w-1) else b
                r={'ge':a>=b,'eq':a==b,'lt':a<b,'ne':a!=b,'gt':a>b,'le':a<=b}[cmp]
                if comb=='and': r=r and R[ops[3]]
                R[d]=bool(r); continue
            if o=='and' and parts[1]=='pred': R[d]=R[ops[1]] and R[ops[2]]; continue
            tp=parts[-1]; w=int(tp[1:]); m=(1<<w)-1
            def sg(x,ww): x&=(1<<ww)-1; return x-(1<<ww) if x>>(ww-1) else x
            A=[val(x) for x in ops[1:]]
            if o=='mad' and parts[1]=='wide':
                R[d]=(sg(A[0],32)*sg(A[1],32)+A[2])&M64 if tp=='s32' else ((A[0]&M32)*(A[1]&M32)+A[2])&M64; continue
            if o=='mul' and parts[1]=='wide':
                R[d]=((A[0]&M32)*(A[1]&M32))&M64; continue
            if o=='mul' and parts[1]=='hi': R[d]=((A[0]&m)*(A[1]&m))>>w; continue
            if o in('mul',) : R[d]=(A[0]*A[1])&m; continue
            if o=='mad': R[d]=(A[0]*A[1]+A[2])&m; continue
            if o=='add': R[d]=(A[0]+A[1])&m; continue
            if o=='sub': R[d]=(A[0]-A[1])&m; continue
            if o=='div': R[d]=(A[0]&m)//(A[1]&m); continue
            if o=='and': R[d]=A[0]&A[1]&m; continue
            if o=='or': R[d]=(A[0]|A[1])&m; continue
            if o=='shl': R[d]=(A[0]<<A[1])&m; continue
            if o=='shr': R[d]=((A[0]&m)>>A[1]) if A[1]<w else 0; continue
            if o=='min': R[d]=min(A[0]&m,A[1]&m); continue
            raise Exception('op '+op)
    for bx in range(nblocks):
        shared=bytearray(b'\xcc'*shared_size)
        ths=[thread(bx,tx,ty,shared) for ty in range(tid_dims[1]) for tx in range(tid_dims[0])]
        alive=ths
        while alive:
            res=[]
            for t in alive:
                try: next(t); res.append(t)
                except StopIteration: pass
            assert len(res) in (0,len(alive)), 'divergent barrier'
            alive=res

class Mem:
    def __init__(s): s.d={}
    def read(s,a,n):
        out=bytearray()
        for i in range(n):
            assert a+i in s.d, ('read unmapped',hex(a+i))
            out.append(s.d[a+i])
        return bytes(out)
    def write(s,a,b):
        for i,x in enumerate(b):
            assert a+i in s.d, ('write unmapped',hex(a+i))
            s.d[a+i]=x

def fast_div32(d):
    # The planner's 32-bit fast division (src/kernels/args.rs: fast_div32): q = (mul.hi(x, magic) + x) >> sh.
    if d<=1: return 0,0
    sh=(d-1).bit_length()
    magic=((1<<32)*((1<<sh)-d)//d+1)&M32
    return magic,sh

def make_args(dst,src,axes,tile,origin32_allowed=True):
    # axes: list of (len,chunk,dst_stride,src_stride) in units; first four are tile axes
    rank=len(axes)
    L=[1]*8;C=[1]*8;N=[1]*8;DS=[0]*8;SS=[0]*8;DST=[0]*8;SST=[0]*8
    tiles=1
    for k,(l,c,ds,ss) in enumerate(axes):
        L[k]=l;C[k]=c;N[k]=-(-l//c);DS[k]=ds;SS[k]=ss;DST[k]=ds*c;SST[k]=ss*c;tiles*=N[k]
    reach=lambda st: sum(abs(st[k])*(N[k]-1) for k in range(8))
    o32=int(origin32_allowed and all(l<2**31 for l in L) and reach(DST)<2**31 and reach(SST)<2**31)
    b=bytearray(688)
    struct.pack_into('<QQQII',b,0,dst,src,tiles,rank,0)
    struct.pack_into('<8Q',b,32,*L); struct.pack_into('<8Q',b,96,*C); struct.pack_into('<8Q',b,160,*N)
    struct.pack_into('<8q',b,352,*DS); struct.pack_into('<8q',b,416,*SS)
    struct.pack_into('<8q',b,480,*DST); struct.pack_into('<8q',b,544,*SST)
    mg=[fast_div32(n) for n in N]
    struct.pack_into('<8I',b,608,*[x[0] for x in mg]); struct.pack_into('<8I',b,640,*[x[1] for x in mg])
    struct.pack_into('<IIII',b,672,tile,0,o32,0)
    return bytes(b),tiles

def check(text,v,tile,block,axes,dbase,sbase,nblocks,o32=True):
    # A side (axes 0, 1) and B side (axes 2, 3) hold at most `tile` slots each.
    assert axes[0][1]*axes[1][1]<=tile and axes[2][1]*axes[3][1]<=tile,'a side holds too many slots'
    mem=Mem()
    runb=16*v
    # reference mapping
    idxs=itertools.product(*[range(a[0]) for a in axes])
    pairs={}
    for ix in idxs:
        d=dbase+16*sum(i*a[2] for i,a in zip(ix,axes))
        s=sbase+16*sum(i*a[3] for i,a in zip(ix,axes))
        assert d not in pairs
        pairs[d]=s
    for s in set(pairs.values()):
        for i in range(runb): mem.d[s+i]=random.randrange(256)
    dstbytes=set()
    for d in pairs:
        for i in range(runb): assert d+i not in mem.d; mem.d[d+i]=0; dstbytes.add(d+i)
    params,tiles=make_args(dbase,sbase,axes,tile,o32)
    p=v*(tile+1)
    log=[]
    run_kernel(text,params,mem,block,nblocks,tile*p*16,log)
    for d,s in pairs.items():
        assert mem.read(d,runb)==mem.read(s,runb),('mismatch',hex(d))
    sts=[a for k,a in log if k=='st']
    assert len(sts)==len(set(sts))==len(pairs)*v, (len(sts),len(set(sts)),len(pairs)*v)
    return tiles,len(log)


# (vectors per run, slots per side, block rows): WIDE_VARIANTS in build/permute.rs.
VARIANTS = [(1, 32, 8), (2, 32, 16), (4, 16, 8)]


def cases(v, tile):
    """Axes (len, chunk, dst stride, src stride) per case; the first four are the tile axes."""
    a, b = tile + 5, tile + 3
    h = tile // 4
    return [
        # A transpose of runs with partial tiles on both sides.
        [(a, tile, v, b * v), (1, 1, 0, 0), (b, tile, a * v, v), (1, 1, 0, 0)],
        # A negative source stride, second tile axes in pieces, a batch axis, and a source
        # broadcast along a second batch axis.
        [(h, h, v, -3 * 6 * v), (6, 4, h * v, 3 * v), (3, 3, h * 6 * v, v),
         (5, tile // 3, h * 6 * 3 * v, 3 * 6 * h * v), (2, 1, h * 6 * 3 * 5 * v, 0)],
        # Sides whose pieces do not fill the tile (no whole-tile path).
        [(7, 7, v, 9 * v), (5, tile // 8, 7 * v, 9 * 7 * v * 5), (9, 9, 35 * v, v),
         (1, 1, 0, 0), (3, 1, 35 * 9 * v, 9 * 7 * v)],
    ]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ptxsim_wide.py DIR")
    d = sys.argv[1]
    random.seed(1)
    for (v, tile, by) in VARIANTS:
        text = open(f"{d}/copy_permute_w{16 * v}.ptx").read()
        for ax in cases(v, tile):
            for o32 in (True, False):
                tiles, accesses = check(text, v, tile, (32, by), ax, 0x10000000,
                                        0x90000000 + 16 * 10000 * v, 3, o32)
                print(f"copy_permute_w{16 * v}: {len(ax)} axes, origin32 {int(o32)}: "
                      f"{tiles} tiles, {accesses} global accesses, ok")


if __name__ == "__main__":
    main()
