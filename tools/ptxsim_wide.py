#!/usr/bin/env python3
"""Runs the wide permute kernels (copy_permute_w16/w32/w64) and the vector kernel
(copy_permute_vec_b1) on the CPU.

A small PTX interpreter for the instruction subset these kernels use: every thread of each
block runs as a generator that yields at `bar.sync` (and `bar.warp.sync`), so shared memory
and barriers behave as on the device, and at `shfl.sync` (modes `up` and `idx`, full mask),
where the block's threads all must arrive and each takes its source lane's value. Registers
hold bit patterns; `cvt` between integers and IEEE floats (f16, f32, f64) rounds as PTX says
(`rn`: to nearest, ties to even; `rz`: toward zero; `rzi` to integers: toward zero, saturated,
NaN to 0; a NaN result is the canonical NaN), `setp` compares floats too, and `mov` packs and
unpacks halves (`{a, b}`), so that cast kernels run as well (tests/ptx/gather_sim.rs). Each
case describes a copy (PermuteArgs axes; for the wide kernels in runs and
16-byte units, for the vector kernel in bytes), runs the kernel over it with several tiles per
block, in both tile-origin forms, and checks that

* every destination run (vector kernel: byte) equals its source run (byte),
* every global access is 16-byte aligned and inside the described runs (vector kernel: loads
  inside the source bytes, stores inside the destination bytes),
* every destination vector is stored exactly once,
* shared-memory accesses are aligned to their width and stay inside the kernel's declared
  shared memory (the tile; for the vector kernel also its table of B slots).

The vector kernel's cases cover partial tiles on both sides, second tile axes in pieces,
negative and zero (broadcast) source strides, batch axes, sides whose pieces do not fill the
tile, and runs of whole tiles followed by partial ones. Its registers that a predicated load
left unwritten read as 0 and its shared memory starts as 0, while source bytes are never 0,
so any such garbage that reaches the destination is a mismatch.

Usage: ptxsim_wide.py DIR [CASE...], where DIR holds copy_permute_w16.ptx, copy_permute_w32.ptx,
copy_permute_w64.ptx and copy_permute_vec_b1.ptx, runs the named cases (all without any) and
exits non-zero on the first failure; `ptxsim_wide.py --list` prints every case's name. A case is
named KERNEL/INDEX/ORIGIN: the kernel (w16, w32, w64 or vec), the index of its copy in `cases`
or `vec_cases`, and the tile-origin form (o32 or o64). Each case seeds its random data from its
name, so a case checks the same data whichever cases run with it.
"""
import re, struct, sys, random, itertools
from fractions import Fraction
M32=(1<<32)-1; M64=(1<<64)-1
def s32(x): x&=M32; return x-(1<<32) if x>>31 else x
def s64(x): x&=M64; return x-(1<<64) if x>>63 else x
def sg(x,ww): x&=(1<<ww)-1; return x-(1<<ww) if x>>(ww-1) else x

IMM={}
def imm(o):
    """The value of operand `o` if it is an integer literal, else None (cached by its text)."""
    if o not in IMM:
        IMM[o]=int(o,0) if re.fullmatch(r'-?(0x[0-9A-Fa-f]+|\d+)',o) else None
    return IMM[o]

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
            # (predicate register, whether the instruction runs when it is false)
            p,l=l.split(None,1); pred=(p[1:].lstrip('!'),p[1:].startswith('!'))
        op,_,rest=l.partition(' ')
        # split operands at top-level commas
        ops=[];depth=0;cur=''
        for ch in rest:
            if ch in '{[': depth+=1
            if ch in '}]': depth-=1
            if ch==',' and depth==0: ops.append(cur.strip()); cur=''
            else: cur+=ch
        if cur.strip(): ops.append(cur.strip())
        # The instruction also carries its dot-separated parts and, where the last part is a
        # type such as u32, that type's width in bits.
        parts=op.split('.')
        w=int(parts[-1][1:]) if parts[-1][1:].isdigit() else None
        ins.append((pred,op,ops,parts,w))
    return ins,labels

def shared_decls(text,dyn_smem=0):
    """The kernel's shared memory: each static `.shared` declaration's name and byte offset,
    laid out one after another at their alignments, then the dynamic one (`.extern .shared
    NAME[]`, `dyn_smem` bytes, as the launch gives), and the total size in bytes."""
    names={}; size=0
    for m in re.finditer(r'^[ \t]*\.shared \.align (\d+) \.b8 (\w+)\[(\d+)\];',text,re.M):
        al,name,n=int(m.group(1)),m.group(2),int(m.group(3))
        size=-(-size//al)*al; names[name]=size; size+=n
    for m in re.finditer(r'^[ \t]*\.extern \.shared \.align (\d+) \.b8 (\w+)\[\];',text,re.M):
        al,name=int(m.group(1)),m.group(2)
        size=-(-size//al)*al; names[name]=size; size+=dyn_smem
    return names,size

# Where `mov.u64 %r, p_args` puts the parameter block, so that `ld.param [%r+N]` reads byte
# (%r + N - PARAM_BASE) of it.
PARAM_BASE=1<<62

def param_offsets(text):
    """Where each of the entry's parameters lies in the launch's parameter bytes: in the
    order of the list, each at the next multiple of its alignment (`.align N`, else its
    type's size), as the parameter bytes of a case lay them out (a kernel's argument block
    `p_args` first, then any scalars such as a fill's `p_value`)."""
    head=text[text.index('.entry'):]
    head=head[head.index('(')+1:head.index(')')]
    offs={}; off=0
    for p in head.split(','):
        m=re.fullmatch(r'\.param\s+(?:\.align\s+(\d+)\s+)?\.[a-z](\d+)\s+(\w+)(?:\[(\d+)\])?',p.strip())
        assert m,('parameter form',p)
        width=int(m.group(2))//8
        align=int(m.group(1)) if m.group(1) else width
        size=width*(int(m.group(4)) if m.group(4) else 1)
        off=-(-off//align)*align
        offs[m.group(3)]=off; off+=size
    return offs

# IEEE binary formats: (exponent bits, mantissa bits without the hidden one).
FLOATS={'f16':(5,10),'f32':(8,23),'f64':(11,52)}

def float_value(bits,t):
    """The value of the bit pattern `bits` of float type `t`: ('nan',), or (sign, n, d) with
    the magnitude n / d exactly (infinity as d == 0)."""
    e,m=FLOATS[t]; w=1+e+m; bits&=(1<<w)-1
    sign=bits>>(w-1); ex=(bits>>m)&((1<<e)-1); man=bits&((1<<m)-1)
    bias=(1<<(e-1))-1
    if ex==(1<<e)-1: return ('nan',) if man else (sign,1,0)
    if ex==0: n,p=man,1-bias-m
    else: n,p=man|(1<<m),ex-bias-m
    return (sign,n<<p,1) if p>=0 else (sign,n,1<<-p)

def float_bits(sign,n,d,t,mode='rn'):
    """The bits of float type `t` nearest to sign * n / d (d == 0: infinity), rounded to nearest
    with ties to even (`rn`) or toward zero (`rz`); overflow gives infinity (rn) or the largest
    finite value (rz)."""
    e,m=FLOATS[t]; bias=(1<<(e-1))-1; emax=bias; emin=1-bias
    top=((1<<e)-1)<<m
    if d==0: return (sign<<(e+m))|top
    if n==0: return sign<<(e+m)
    # Exponent E with 2^E <= n/d < 2^(E+1), at least emin (subnormals).
    E=n.bit_length()-d.bit_length()
    if (E>=0 and n<(d<<E)) or (E<0 and (n<<-E)<d): E-=1
    E=max(E,emin)
    # q = n / d * 2^(m - E), split into its integer part and remainder.
    sh=m-E
    num,den=(n<<sh,d) if sh>=0 else (n,d<<-sh)
    q,r=divmod(num,den)
    if mode=='rn' and (2*r>den or (2*r==den and q&1)): q+=1
    if q>>(m+1): q>>=1; E+=1
    if E>emax:
        return (sign<<(e+m))|(top if mode=='rn' else top-1)
    if q>>m: return (sign<<(e+m))|((E+bias)<<m)|(q&((1<<m)-1))
    return (sign<<(e+m))|q

def cvt(x,dt,st,mode):
    """`cvt.MODE.DT.ST` of the bits `x`: integers sign- or zero-extended or truncated, integers
    and floats to floats rounded by `mode` (exact widenings too), floats to integers truncated
    toward zero and saturated, NaN to 0."""
    if st in FLOATS:
        v=float_value(x,st)
        if dt in FLOATS:
            if v[0]=='nan':
                e,m=FLOATS[dt]; return (((1<<(e+1))-1)<<(m-1))  # canonical NaN
            return float_bits(*v,dt,mode if mode in ('rn','rz') else 'rn')
        sw=int(dt[1:])
        lo,hi=((-(1<<(sw-1)),(1<<(sw-1))-1) if dt[0]=='s' else (0,(1<<sw)-1))
        if v[0]=='nan': return 0
        sign,n,d=v
        if d==0: return (lo if sign else hi)&((1<<sw)-1)
        i=n//d
        i=min(i,hi) if not sign else max(-i,lo)
        return i&((1<<sw)-1) if sw<64 else i&M64
    sw=int(st[1:]); x=sg(x,sw) if st[0]=='s' else x&((1<<sw)-1)
    if dt in FLOATS:
        return float_bits(1 if x<0 else 0,abs(x),1,dt,mode if mode in ('rn','rz') else 'rn')
    return x&(M64 if dt[1:]=='64' else M32)

def prmt(a,b,c):
    # prmt.b32 default mode (PTX ISA): nibble i of the selector's low 16 bits picks byte i of
    # d from the 8 bytes {b, a} (a in bytes 0-3, b in 4-7) with its low 3 bits; with bit 3
    # set, byte i is the picked byte's sign bit replicated.
    x=(a&M32)|((b&M32)<<32); d=0
    for i in range(4):
        n=(c>>(4*i))&15
        y=(x>>(8*(n&7)))&255
        if n&8: y=255 if y&128 else 0
        d|=y<<(8*i)
    return d

def run_kernel(text, params, glob, tid_dims, nblocks, log, shared_fill=0xcc, undef=None,
               dyn_smem=0, async_land='wait'):
    """Runs every block of the kernel in `text` (one after another); `nblocks` is the grid's
    x extent, or a pair (x, y); `dyn_smem` is the launch's dynamic shared memory in bytes.

    `cp.async` copies read the source when issued and land in shared memory at the thread's
    `cp.async.wait_group` that completes their group (`async_land='wait'`, the latest the
    hardware may land them: a read of the buffer before that wait sees old bytes) or at once
    (`'issue'`, the earliest: a copy into a buffer that a thread still reads overwrites it).

    Logs each global access as (kind, address, block, tx, ty, %bid). Shared memory starts as
    `shared_fill` bytes. A register read before it is written raises, except where `undef`
    is set: then it reads as that value (the kernels may move garbage through registers that
    a predicated load left unwritten, as long as none of it reaches the destination).
    """
    ins,labels=parse(text)
    shared_names,shared_size=shared_decls(text,dyn_smem)
    poffs=param_offsets(text)
    # Parameter loads read the same bytes in every thread: each is read once, by instruction
    # and address.
    param_loads={}
    gx,gy=nblocks if isinstance(nblocks,(tuple,list)) else (nblocks,1)
    def thread(bx,tx,ty,shared,by=0):
        R={}
        def val(o):
            if o in R: return R[o]
            if o=='%tid.x': return tx
            if o=='%tid.y': return ty
            if o=='%ctaid.x': return bx
            if o=='%nctaid.x': return gx
            if o=='%ctaid.y': return by
            if o=='%nctaid.y': return gy
            if o=='%ntid.x': return tid_dims[0]
            if o=='%ntid.y': return tid_dims[1]
            if o in shared_names: return shared_names[o]
            if o=='p_args': return PARAM_BASE
            v=imm(o)
            if v is not None: return v
            if undef is not None and re.fullmatch(r'%\w+',o): return undef
            raise Exception('reg '+o)
        def memaddr(o):
            o=o.strip('[]')
            if '+' in o:
                a,b=o.split('+')
                if a in poffs: return ('p',poffs[a]+int(b))
                return val(a)+int(b)
            if o in poffs: return ('p',poffs[o])
            return val(o)
        # cp.async copies not landed yet: [group (None until committed), address, bytes].
        pend=[]; groups=0
        pc=0
        while True:
            pred,op,ops,parts,width=ins[pc]; pc+=1
            if pred:
                if R[pred[0]]==pred[1]: continue
            try:
                o=parts[0]
                if o=='ret': return
                if o=='bra': pc=labels[ops[0]]; continue
                if o=='bar': yield 'bar'; continue
                if o=='cp' and parts[1]=='async':
                    if parts[2]=='commit_group':
                        groups+=1
                        for p_ in pend:
                            if p_[0] is None: p_[0]=groups
                        continue
                    if parts[2] in ('wait_group','wait_all'):
                        keep=int(ops[0]) if parts[2]=='wait_group' else 0
                        for p_ in pend:
                            if p_[0] is not None and p_[0]<=groups-keep: shared[p_[1]:p_[1]+len(p_[2])]=p_[2]
                        pend=[p_ for p_ in pend if not (p_[0] is not None and p_[0]<=groups-keep)]
                        continue
                    # cp.async.ca|cg.shared.global [shared], [global], bytes
                    assert parts[2] in ('ca','cg') and parts[3:5]==['shared','global'],('cp.async form',op)
                    n=int(ops[2]); a=memaddr(ops[0])&M64; g_=memaddr(ops[1])&M64
                    assert a%n==0 and g_%n==0,('misaligned',op,hex(a),hex(g_))
                    assert 0<=a and a+n<=shared_size,('shared oob',op,a,n,shared_size)
                    b=glob.read(g_,n); log.append(('ld',g_,bx,tx,ty,R.get('%bid')))
                    if async_land=='issue': shared[a:a+n]=b
                    else: pend.append([None,a,b])
                    continue
                if o=='shfl':
                    assert parts[1]=='sync' and parts[3]=='b32' and val(ops[4])&M32==M32
                    R[ops[0]]=(yield ('shfl',tx,parts[2],val(ops[1])&M32,val(ops[2])&M32,val(ops[3])&M32)); continue
                if o=='shf':
                    assert parts[1]=='r' and parts[2]=='clamp'
                    a_,b_,c_=val(ops[1])&M32,val(ops[2])&M32,val(ops[3])&M32
                    R[ops[0]]=((((b_<<32)|a_))>>min(c_,32))&M32; continue
                if o=='ld' and parts[1]=='param':
                    a=memaddr(ops[1]); w=int(parts[2][1:])//8
                    off=a[1] if isinstance(a,tuple) else a-PARAM_BASE
                    assert 0<=off and off+w<=len(params),('param oob',op,off)
                    if (pc,off) not in param_loads:
                        param_loads[pc,off]=int.from_bytes(params[off:off+w],'little')
                    R[ops[0]]=param_loads[pc,off]; continue
                if o in('ld','st') and parts[1] in('global','shared'):
                    # [ld|st].space[.nc][.vN].type: N registers of the type's width.
                    regs=[r.strip() for r in (ops[0] if o=='ld' else ops[1]).strip('{}').split(',')]
                    ew=int(parts[-1][1:])//8
                    assert len(regs)==(int(parts[-2][1:]) if parts[-2][0]=='v' else 1),('operands',op)
                    n=ew*len(regs)
                    a=memaddr(ops[1] if o=='ld' else ops[0])
                    a&=M64
                    if parts[1]=='global':
                        assert a%n==0,('misaligned',op,hex(a))
                    else:
                        assert a%n==0,('misaligned',op,hex(a))
                        assert 0<=a and a+n<=shared_size,('shared oob',op,a,n,shared_size)
                    if o=='ld':
                        b=glob.read(a,n) if parts[1]=='global' else bytes(shared[a:a+n])
                        for i,r in enumerate(regs):
                            x=int.from_bytes(b[ew*i:ew*(i+1)],'little')
                            # Signed loads narrower than 64 bits sign-extend into the register.
                            R[r]=sg(x,8*ew)&M64 if parts[-1][0]=='s' and ew<8 else x
                        if parts[1]=='global': log.append(('ld',a,bx,tx,ty,R.get('%bid')))
                    else:
                        if all(r in R for r in regs) or undef is not None:
                            b=b''.join((val(r)&((1<<(8*ew))-1)).to_bytes(ew,'little') for r in regs)
                        else: b=None
                        if parts[1]=='global':
                            assert b is not None,('stores an unwritten register',op,ops)
                            glob.write(a,b); log.append(('st',a,bx,tx,ty,R.get('%bid')))
                        else:
                            shared[a:a+n]= b if b is not None else b'\xee'*n
                    continue
                d=ops[0]
                if o=='mov' and parts[1]=='pred': R[d]=bool(int(ops[1])) if ops[1] in ('0','1') else R[ops[1]]; continue
                if o=='mov' and d.startswith('{'):
                    # Unpack a register into halves (`_` drops one), low half first.
                    x=val(ops[1]); w=int(parts[1][1:])//2; halves=[h.strip() for h in d.strip('{}').split(',')]
                    for i,h in enumerate(halves):
                        if h!='_': R[h]=(x>>(w*i))&((1<<w)-1)
                    continue
                if o=='mov' and ops[1].startswith('{'):
                    # Pack halves into a register, the first lowest.
                    w=int(parts[1][1:])//2; halves=[h.strip() for h in ops[1].strip('{}').split(',')]
                    R[d]=sum((val(h)&((1<<w)-1))<<(w*i) for i,h in enumerate(halves)); continue
                if o=='mov': R[d]=val(ops[1])&(M64 if parts[1] in('b64','u64','f64') else M32); continue
                if o=='cvt':
                    mode=parts[1] if parts[1] in ('rn','rz','rzi','rni') else None
                    dt,st=(parts[2],parts[3]) if mode else (parts[1],parts[2])
                    R[d]=cvt(val(ops[1]),dt,st,mode); continue
                if o=='selp': R[d]=val(ops[1]) if R[ops[3]] else val(ops[2]); continue
                if o=='setp' and parts[-1] in FLOATS:
                    cmp=parts[1]; tp=parts[-1]
                    assert len(parts)==3,('combined float comparisons',op)
                    a,b=float_value(val(ops[1]),tp),float_value(val(ops[2]),tp)
                    nan=a[0]=='nan' or b[0]=='nan'
                    if cmp in ('nan','num'): R[d]=nan if cmp=='nan' else not nan; continue
                    if nan: R[d]=cmp.endswith('u') and len(cmp)==3; continue
                    def key(v):
                        s,n,dd=v
                        x=float('inf') if dd==0 else Fraction(n,dd)
                        return -x if s else x
                    ka,kb=key(a),key(b)
                    c=cmp[:2]
                    R[d]={'eq':ka==kb,'ne':ka!=kb,'lt':ka<kb,'le':ka<=kb,'gt':ka>kb,'ge':ka>=kb}[c]; continue
                if o=='setp':
                    cmp=parts[1]; tp=parts[-1]; comb=parts[2] if len(parts)==4 else None
                    a,b=val(ops[1]),val(ops[2]); w=int(tp[1:])
                    m=(1<<w)-1; a&=m; b&=m
                    if tp[0]=='s': a=a-(1<<w) if a>>(w-1) else a; b=b-(1<<w) if b>>(w-1) else b
                    r={'ge':a>=b,'eq':a==b,'lt':a<b,'ne':a!=b,'gt':a>b,'le':a<=b}[cmp]
                    if comb=='and': r=r and R[ops[3]]
                    if comb=='or': r=r or R[ops[3]]
                    assert comb in (None,'and','or')
                    R[d]=bool(r); continue
                if o=='and' and parts[1]=='pred': R[d]=R[ops[1]] and R[ops[2]]; continue
                tp=parts[-1]; w=width; m=(1<<w)-1
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
                if o=='rem': R[d]=(A[0]&m)%(A[1]&m); continue
                if o=='and': R[d]=A[0]&A[1]&m; continue
                if o=='or': R[d]=(A[0]|A[1])&m; continue
                if o=='xor': R[d]=(A[0]^A[1])&m; continue
                if o=='shl': R[d]=(A[0]<<A[1])&m; continue
                if o=='shr' and tp[0]=='s': R[d]=(sg(A[0],w)>>min(A[1],w-1))&m; continue
                if o=='shr': R[d]=((A[0]&m)>>A[1]) if A[1]<w else 0; continue
                if o=='bfe':
                    pos,ln=A[1]&255,A[2]&255; x=(A[0]&m)>>pos; x&=(1<<ln)-1 if ln else 0
                    if tp[0]=='s' and ln: x=sg(x,ln)
                    R[d]=x&m; continue
                if o in('min','max'):
                    a,b=(sg(A[0],w),sg(A[1],w)) if tp[0]=='s' else (A[0]&m,A[1]&m)
                    R[d]=(min(a,b) if o=='min' else max(a,b))&m; continue
                if o=='neg': R[d]=(-A[0])&m; continue
                if o=='prmt' and len(parts)==2: R[d]=prmt(A[0],A[1],A[2]); continue
                raise Exception('op '+op)
            except AssertionError as e:
                raise AssertionError(f'block {bx} thread ({tx}, {ty}), tile %bid={R.get("%bid")}: '
                                     f'{op} {", ".join(ops)}: {e}') from None
    for by,bx in itertools.product(range(gy),range(gx)):
        shared=bytearray(bytes([shared_fill])*shared_size)
        ths=[thread(bx,tx,ty,shared,by) for ty in range(tid_dims[1]) for tx in range(tid_dims[0])]
        alive=ths
        pending={id(t):None for t in ths}
        wof={id(t):(ty*tid_dims[0]+tx)//32 for t,(tx,ty) in zip(ths,[(tx,ty) for ty in range(tid_dims[1]) for tx in range(tid_dims[0])])}
        while alive:
            res=[]; ys=[]; done=set(); going=set()
            for t in alive:
                try: ys.append(t.send(pending[id(t)])); res.append(t); going.add(wof[id(t)])
                except StopIteration: done.add(wof[id(t)])
            # A warp's threads end together (warps may end apart: the narrow kernels' warps
            # synchronise alone).
            assert not (done & going), 'divergent barrier'
            # Each warp's threads stop at the same kind of point (a barrier or one shuffle);
            # warps may differ (the narrow kernels' warps synchronise alone).
            warps={}
            for y in ys:
                if not isinstance(y,str): warps.setdefault(y[1]//32,set()).add(y[2])
            kinds={}
            for t,y in zip(res,ys):
                kinds.setdefault(id(t),y if isinstance(y,str) else y[0])
            vals={y[1]:y[3] for y in ys if not isinstance(y,str)}
            for t,y in zip(res,ys):
                if isinstance(y,str):
                    pending[id(t)]=None; continue
                _,tx_,mode,a_,b_,c_=y; lane=tx_%32; wbase=tx_-lane
                assert len(warps[tx_//32])==1,'mixed shfl modes'
                seg=(c_>>8)&31; cv=c_&31
                maxl=(lane&seg)|(cv&~seg); minl=lane&seg
                if mode=='up': j=lane-(b_&31); pv=j>=maxl
                elif mode=='idx': j=minl|((b_&31)&~seg); pv=j<=maxl
                else: raise Exception(mode)
                if not pv: j=lane
                assert wbase+j in vals,('shuffle with a lane that is not at it',tx_,wbase+j)
                pending[id(t)]=vals[wbase+j]
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
    # The planner's 32-bit fast division (kernels/src/abi/args/fast_div.rs: fast_div32): q = (mul.hi(x, magic) + x) >> sh.
    if d<=1: return 0,0
    sh=(d-1).bit_length()
    magic=((1<<32)*((1<<sh)-d)//d+1)&M32
    return magic,sh

def make_args(dst,src,axes,tile,origin32_allowed=True,pack=0):
    # axes: list of (len,chunk,dst_stride,src_stride) in units; first four are tile axes
    rank=len(axes)
    L=[1]*8;C=[1]*8;N=[1]*8;DS=[0]*8;SS=[0]*8;DST=[0]*8;SST=[0]*8
    tiles=1
    for k,(l,c,ds,ss) in enumerate(axes):
        L[k]=l;C[k]=c;N[k]=-(-l//c);DS[k]=ds;SS[k]=ss;DST[k]=ds*c;SST[k]=ss*c;tiles*=N[k]
    reach=lambda st: sum(abs(st[k])*(N[k]-1) for k in range(8))
    o32=int(origin32_allowed and all(l<2**31 for l in L) and reach(DST)<2**31 and reach(SST)<2**31)
    b=bytearray(688)
    struct.pack_into('<QQQII',b,0,dst,src,tiles,rank,pack)
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
    log=[]
    run_kernel(text,params,mem,block,nblocks,log)
    for d,s in pairs.items():
        assert mem.read(d,runb)==mem.read(s,runb),('mismatch',hex(d))
    sts=[e[1] for e in log if e[0]=='st']
    assert len(sts)==len(set(sts))==len(pairs)*v, (len(sts),len(set(sts)),len(pairs)*v)
    return tiles,len(log)


def check_vec(text,axes,dbase,sbase,nblocks,o32=True):
    """Runs copy_permute_vec_b1 (tile 128, block (32, 8)) on a copy of 1-byte elements.

    axes: (len, chunk, dst stride, src stride) in bytes; the first four are the tile axes.
    """
    tile,block=128,(32,8)
    L=[a[0] for a in axes]; C=[a[1] for a in axes]
    # The planner's conditions (PermuteArgs::vectorized).
    assert axes[0][2]==1 and axes[2][3]==1,'axis 0 dst stride and axis 2 src stride must be 1'
    assert all(x%16==0 for x in (L[0],C[0],L[2],C[2])),'axes 0 and 2: extents and chunks of 16'
    assert all(a[2]%16==0 for a in axes[1:]) and all(a[3]%16==0 for k,a in enumerate(axes) if k!=2)
    assert dbase%16==0 and sbase%16==0
    assert C[0]*C[1]<=tile and C[2]*C[3]<=tile,'a side holds too many slots'
    assert all(c==1 for c in C[4:]),'batch axes have chunk 1'
    N=[-(-l//c) for l,c in zip(L,C)]
    # Reference: destination byte -> (source byte, multi-index).
    ref={}
    for ix in itertools.product(*[range(l) for l in L]):
        d=dbase+sum(i*a[2] for i,a in zip(ix,axes))
        s=sbase+sum(i*a[3] for i,a in zip(ix,axes))
        assert d not in ref
        ref[d]=(s,ix)
    srcb={s for s,_ in ref.values()}
    assert not srcb & ref.keys()
    mem=Mem()
    # Source bytes are never 0 or 1: unwritten registers and shared memory read as 0 (so any
    # garbage that reaches the destination mismatches), the destination starts as 1.
    for s in srcb: mem.d[s]=random.randrange(2,256)
    for d in ref: mem.d[d]=1
    vecs={d&~15 for d in ref}
    assert len(vecs)*16==len(ref),'destination vectors are whole'
    params,tiles=make_args(dbase,sbase,axes,tile,o32,pack=16)
    log=[]
    run_kernel(text,params,mem,block,nblocks,log,shared_fill=0,undef=0)

    def tile_of(ix):
        t=0
        for k in reversed(range(len(axes))): t=t*N[k]+ix[k]//C[k]
        return t
    def who(e): return f'block {e[2]} thread ({e[3]}, {e[4]}) tile %bid={e[5]}'
    errs=[]
    for e in log:
        space=srcb if e[0]=='ld' else ref
        out=[i for i in range(16) if e[1]+i not in space]
        if out:
            errs.append(f'{e[0]} {hex(e[1])} by {who(e)}: bytes {out} outside the '
                        f'{"source" if e[0]=="ld" else "destination"}')
    stores={}
    for e in log:
        if e[0]=='st': stores.setdefault(e[1],[]).append(e)
    for a,es in stores.items():
        if len(es)>1: errs.append(f'st {hex(a)} stored {len(es)} times: '+'; '.join(map(who,es)))
    for a in sorted(vecs-stores.keys()):
        _,ix=ref[a]
        errs.append(f'dst vector {hex(a)} (index {ix}, tile {tile_of(ix)}) never stored')
    bad=[d for d,(s,_) in ref.items() if mem.d[d]!=mem.d[s]]
    for d in sorted(bad)[:20]:
        s,ix=ref[d]; es=stores.get(d&~15,[])
        errs.append(f'dst byte {hex(d)} (index {ix}, tile {tile_of(ix)}) = {mem.d[d]:#04x}, '
                    f'source {hex(s)} = {mem.d[s]:#04x}; stored by '+('; '.join(map(who,es)) or 'none'))
    if bad: errs.append(f'{len(bad)} of {len(ref)} destination bytes differ from their source')
    assert not errs,'copy_permute_vec_b1 fails:\n'+'\n'.join(errs[:40])
    return tiles,len(log)


def vec_cases():
    """Axes (len, chunk, dst stride, src stride) in bytes per case; the first four are the tile
    axes (A: 0, 1, destination stride 1 on axis 0; B: 2, 3, source stride 1 on axis 2)."""
    return [
        # A transpose with partial tiles on both sides (160 = 128 + 32, 144 = 128 + 16) and
        # padded source rows: whole -> partial tiles in block 0.
        [(160, 128, 1, 176), (1, 1, 0, 0), (144, 128, 160, 1), (1, 1, 0, 0)],
        # Second tile axes in pieces (12 = 8 + 4) on full 128-slot sides, negative source
        # strides on axes 0 and 3, a batch axis and a source broadcast along a second batch
        # axis; whole and partial tiles alternate.
        [(16, 16, 1, -192), (12, 8, 16, 3072), (16, 16, 4608, 1), (12, 8, 384, -16),
         (2, 1, 73728, 36864), (2, 1, 192, 0)],
        # Sides whose pieces do not fill the tile (96 and 64 slots: no whole-tile path), a
        # batch axis and padded destination batches.
        [(32, 32, 1, 32), (5, 3, 1024, 5120), (32, 16, 32, 1), (5, 4, 5120, 1024),
         (2, 1, 25616, 25600)],
        # Many whole tiles (2 x 3), then a partial column (400 = 3 * 128 + 16): whole -> whole
        # and whole -> partial in every block.
        [(256, 128, 1, 416), (1, 1, 0, 0), (400, 128, 256, 1), (1, 1, 0, 0)],
    ]


# (vectors per run, slots per side, block rows): PERMUTE_WIDE in kernels/src/abi/permute.rs.
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


def all_cases():
    """Every case: (name, kernel, copy index, 32-bit tile origins allowed)."""
    out = []
    for (v, tile, _) in VARIANTS:
        for i in range(len(cases(v, tile))):
            for o32 in (True, False):
                out.append((f"w{16 * v}/{i}/o{32 if o32 else 64}", f"w{16 * v}", i, o32))
    for i in range(len(vec_cases())):
        for o32 in (True, False):
            out.append((f"vec/{i}/o{32 if o32 else 64}", "vec", i, o32))
    return out


def run_case(d, kernel, i, o32):
    """Runs one case; returns the line that reports it."""
    if kernel == "vec":
        text = open(f"{d}/copy_permute_vec_b1.ptx").read()
        ax = vec_cases()[i]
        tiles, accesses = check_vec(text, ax, 0x10000000, 0x90000000, 3, o32)
        name = "copy_permute_vec_b1"
    else:
        (v, tile, by), = [x for x in VARIANTS if f"w{16 * x[0]}" == kernel]
        text = open(f"{d}/copy_permute_{kernel}.ptx").read()
        ax = cases(v, tile)[i]
        tiles, accesses = check(text, v, tile, (32, by), ax, 0x10000000,
                                0x90000000 + 16 * 10000 * v, 3, o32)
        name = f"copy_permute_{kernel}"
    return (f"{name}: {len(ax)} axes, origin32 {int(o32)}: "
            f"{tiles} tiles, {accesses} global accesses, ok")


def main():
    known = all_cases()
    if sys.argv[1:] == ["--list"]:
        for (name, _, _, _) in known:
            print(name)
        return
    if len(sys.argv) < 2:
        sys.exit("usage: ptxsim_wide.py DIR [CASE...] | ptxsim_wide.py --list")
    d = sys.argv[1]
    wanted = sys.argv[2:]
    unknown = [w for w in wanted if w not in {c[0] for c in known}]
    if unknown:
        sys.exit(f"unknown cases {unknown}; `ptxsim_wide.py --list` names them")
    for (name, kernel, i, o32) in known:
        if wanted and name not in wanted:
            continue
        random.seed(name)
        print(f"{name}: {run_case(d, kernel, i, o32)}", flush=True)


if __name__ == "__main__":
    main()
