"""Does the rotated codecs' 32-point Walsh-Hadamard transform need fp32? Single quantize/dequantize
round trips (numpy, blocks of 32, the spec's sign pattern and 2^-5 / 2^-3 scales, fp16 block scales)
of int4/int6 plain, rotated in fp32 (today's arithmetic), rotated in fp16 after normalising each
block by a power of two >= its absmax, and rotated in bf16 (every butterfly rounded). Session 15:
fp16 changes nothing (ratios to plain equal to 3 digits); bf16 costs int4h ~0.5% and int6h 4%
(gaussian 1.039x plain, student-t 0.602, llm 0.311 vs 0.272). Run: python lab/probes/half_precision_rotation.py
"""
import numpy as np
rng=np.random.default_rng(0)
SIGNS=np.array([(0x9E3779B9>>i)&1 for i in range(32)])*-2+1
def wht(v, dt):
    v=v.astype(dt).copy()
    h=1
    while h<32:
        for i in range(32):
            if i&h==0:
                a,b=v[...,i].copy(),v[...,i+h].copy()
                v[...,i]=(a+b).astype(dt); v[...,i+h]=(a-b).astype(dt)
        h*=2
    return v
def quant(r,qmax):
    amax=np.abs(r).max(-1,keepdims=True)
    scale=(amax/qmax).astype(np.float16).astype(np.float32)
    scale[scale==0]=1
    q=np.clip(np.rint(r/scale),-qmax,qmax)
    return (q*scale).astype(np.float32)
def trip(x,qmax,mode):
    x=x.reshape(-1,32).astype(np.float32)
    if mode=='plain': return quant(x,qmax)
    if mode=='fp32':
        r=wht(x*SIGNS*2**-5,np.float32); d=quant(r,qmax); return (wht(d*2**-3,np.float32)*8*SIGNS)
    # fp16: normalise by a power of two >= absmax so values fit fp16 comfortably
    amax=np.abs(x).max(-1,keepdims=True); e=np.where(amax>0,np.ceil(np.log2(np.maximum(amax,1e-30))),0)
    p=np.exp2(-e)
    r=wht((x*p*SIGNS*2**-5).astype(np.float16),np.float16).astype(np.float32)
    d=quant(r,qmax)
    y=wht((d*2**-3).astype(np.float16),np.float16).astype(np.float32)*8
    return y*SIGNS/p
def data(kind,n=32*20000):
    if kind=='gaussian': return rng.standard_normal(n)
    if kind=='student_t': return rng.standard_t(3,n)
    x=rng.standard_normal((n//4096,4096)); ch=rng.choice(4096,20,replace=False); x[:,ch]*=rng.uniform(20,100,20); return x.ravel()
for kind in ('gaussian','student_t','llm'):
    x=data(kind).astype(np.float32)
    for name,qmax in (('int4',7),('int6',31)):
        e={m:np.linalg.norm(trip(x,qmax,m).ravel()-x)/np.linalg.norm(x) for m in ('plain','fp32','fp16')}
        print(f"{kind:10s} {name}: plain {e['plain']:.4f}  rot32 {e['fp32']:.4f} ({e['fp32']/e['plain']:.3f})  rot16 {e['fp16']:.4f} ({e['fp16']/e['plain']:.3f})")
def bf16(a):
    a=np.asarray(a,np.float32); u=a.view(np.uint32).astype(np.uint64)
    r=((u+0x7FFF+((u>>16)&1))>>16)<<16
    return r.astype(np.uint32).view(np.float32)
def wht_bf16(v):
    v=bf16(v).copy(); h=1
    while h<32:
        for i in range(32):
            if i&h==0:
                a,b=v[...,i].copy(),v[...,i+h].copy()
                v[...,i]=bf16(a+b); v[...,i+h]=bf16(a-b)
        h*=2
    return v
def trip_bf16(x,qmax):
    x=x.reshape(-1,32).astype(np.float32)
    r=wht_bf16(x*SIGNS*2**-5); d=quant(r,qmax); return wht_bf16(d*2**-3)*8*SIGNS
print("bf16 transform:")
for kind in ('gaussian','student_t','llm'):
    x=data(kind).astype(np.float32)
    for name,qmax in (('int4',7),('int6',31)):
        p=np.linalg.norm(trip(x,qmax,'plain').ravel()-x)/np.linalg.norm(x); b=np.linalg.norm(trip_bf16(x,qmax).ravel()-x)/np.linalg.norm(x)
        print(f"{kind:10s} {name}: plain {p:.4f} rot_bf16 {b:.4f} ({b/p:.3f})")
