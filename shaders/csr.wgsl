// csr.wgsl: the CSR prelude, after common.wgsl and before every csr_* kernel (which declares
// `values` at group 0, binding 2, as array<u32>). See shaders/README.md, "Homogeneous CSR".

// A homogeneous CSR matrix (one weight for every entry): the values binding then holds that
// weight alone, in the low half of word 0, and no entry has a value of its own. A pipeline
// constant, specialized away, so the CSR kernels read their values as before.
override HOMOGENEOUS: bool = false;

// y = A·x with x sparse (`Device::spmv_sparse_x`): x is the sparse vector's dense copy, and an
// entry under a zero of x adds nothing, even a NaN or ±∞ of A there (the reference's rule).
// A pipeline constant, specialized away in the ordinary product.
override SPARSE_X: bool = false;

// Whether an entry of value bits `bits` meets x's element `xv`: zero-valued entries never do,
// and with SPARSE_X neither do x's zeros. `!(xv == 0.0)`, not `xv != 0.0`: naga emits the
// ordered not-equal, false for a NaN of x (seen on lavapipe), which must still be met.
fn csr_live(bits: u32, xv: f32) -> bool {
    return (bits & 0x7fffu) != 0u && (!SPARSE_X || !(xv == 0.0));
}

// The binary16 bits of entry i's value.
fn csr_value_bits(i: u32) -> u32 {
    if HOMOGENEOUS {
        return values[0] & 0xffffu;
    }
    return (values[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu;
}
