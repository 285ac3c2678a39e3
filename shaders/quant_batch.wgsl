// quant_batch.wgsl: shared by the few-token kernels of quantized matrices (after batch.wgsl,
// before quant_macko_batch_wg.wgsl or quant_dense_batch_wg.wgsl): the tree that sums a
// workgroup's W accumulators. See shaders/README.md, "Quantized matrices".

// Invocations per workgroup of both quantized few-token kernels.
const WORKGROUP: u32 = 64u;

var<workgroup> partial: array<array<vec4<f32>, 4>, WORKGROUP>;

// The workgroup's sums of batch.wgsl's W accumulators, left in every invocation's.
fn reduce_workgroup(t: u32) {
    partial[t] = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    workgroupBarrier();
    for (var half = WORKGROUP / 2u; half > 0u; half /= 2u) {
        if t < half {
            for (var q = 0u; q < 4u; q++) {
                partial[t][q] += partial[t + half][q];
            }
        }
        workgroupBarrier();
    }
    acc0 = partial[0][0];
    acc1 = partial[0][1];
    acc2 = partial[0][2];
    acc3 = partial[0][3];
}
