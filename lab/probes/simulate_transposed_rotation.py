# The transposed rotated domain of lab/wip/rotation-transposed.patch (removed in session 16: git show 90dbb98:lab/wip/rotation-transposed.patch), simulated lane by lane in numpy
# (4 threads of 8 registers, the shuffles as copies): forward == oracle rotate, inverse (butterflies
# 8, 16, 1, 2, 4) == the patched oracle unrotate, bit for bit. Run after `git apply` of the patch.
import os, sys
import numpy as np
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
src = open(os.path.join(ROOT, 'python/quickreduce/oracle/codecs.py')).read()  # without the package (no _C)
ns={}
exec(compile(src,"codecs","exec"),ns)
rotate,unrotate=ns['rotate'],ns['unrotate']
SIGNS=0x9E3779B9
f32=np.float32
def lane_stages(v):
    for h in (1,2,4):
        for i in range(8):
            if not i&h:
                a,b=v[i],v[i+h]; v[i]=f32(a+b); v[i+h]=f32(a-b)
def flip(v,b):
    for i in range(8):
        if (SIGNS>>(8*b+i))&1: v[i]=-v[i]
def transpose(T):  # T[b] = list of 8 regs
    for m in (1,2):
        new=[list(t) for t in T]
        for b in range(4):
            hi=bool(b&m)
            for k in range(4):
                if k&m: continue
                for e in range(2):
                    lo_i,up_i=2*k+e,2*(k|m)+e
                    # value sent by partner b^m
                    p=b^m; phi=bool(p&m)
                    sent=T[p][lo_i] if phi else T[p][up_i]
                    if hi: new[b][lo_i]=sent
                    else: new[b][up_i]=sent
        T[:]=new
def cross(v):
    for m in (1,2):
        for l in range(4):
            if l&m: continue
            for e in range(2):
                a,c=v[2*l+e],v[2*(l|m)+e]; v[2*l+e]=f32(a+c); v[2*(l|m)+e]=f32(a-c)
rng=np.random.default_rng(0)
ok=True
for trial in range(200):
    x=(rng.standard_normal(32)*10**rng.uniform(-3,3,32)).astype(np.float32)
    T=[list(x[8*b:8*b+8]) for b in range(4)]
    for b in range(4):
        flip(T[b],b); T[b]=[f32(t*f32(0.03125)) for t in T[b]]; lane_stages(T[b])
    transpose(T)
    for b in range(4): cross(T[b])
    ref=rotate(x[None,:])[0]
    # thread b reg 2l+e = index 8l+2b+e
    got=np.zeros(32,np.float32)
    for b in range(4):
        for l in range(4):
            for e in range(2): got[8*l+2*b+e]=T[b][2*l+e]
    ok&=np.array_equal(got.view(np.uint32),ref.view(np.uint32))
    # inverse from permuted
    y=(rng.standard_normal(32)).astype(np.float32)
    T=[[None]*8 for _ in range(4)]
    for b in range(4):
        for l in range(4):
            for e in range(2): T[b][2*l+e]=y[8*l+2*b+e]
    for b in range(4):
        T[b]=[f32(t*f32(0.125)) for t in T[b]]; cross(T[b])
    transpose(T)
    for b in range(4):
        lane_stages(T[b]); T[b]=[f32(t*f32(8)) for t in T[b]]; flip(T[b],b)
    got=np.concatenate([np.array(T[b],np.float32) for b in range(4)])
    ref=unrotate(y[None,:])[0]
    ok&=np.array_equal(got.view(np.uint32),ref.view(np.uint32))
print("device algorithm == oracle:",ok)
