// csr.wgsl: the CSR prelude, after common.wgsl and before every csr_* kernel (which declares
// `values` at group 0, binding 2, as array<u32>). See shaders/README.md, "Homogeneous CSR".

// A homogeneous CSR matrix (one weight for every entry): the values binding then holds that
// weight alone, in the low half of word 0, and no entry has a value of its own. A pipeline
// constant, specialized away, so the CSR kernels read their values as before.
override HOMOGENEOUS: bool = false;

// The binary16 bits of entry i's value.
fn csr_value_bits(i: u32) -> u32 {
    if HOMOGENEOUS {
        return values[0] & 0xffffu;
    }
    return (values[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu;
}
