// The combine pass of the transposed products (common.wgsl and transposed.wgsl are
// prepended): y[c] = the sum of the chunks' partial sums of column c, in chunk order, rounded
// once to binary16 for an f16 y. One word of y per invocation (two columns of an f16 y).
// Dispatched once after the last row block's pass; group 1 is bound to an empty group.

@group(0) @binding(0) var<uniform> params: MatrixParams;

fn column_sum(c: u32, chunks: u32) -> f32 {
    var s = 0.0;
    for (var z = 0u; z < chunks; z++) {
        s += bitcast<f32>(partials[partial_at(z, c)]);
    }
    return s;
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let w = gid.x + gid.y * nwg.x * WORKGROUP;
    let chunks = partials[0];
    if Y_F16 {
        let c = 2u * w;
        if c < params.cols {
            let lo_bits = f32_to_f16_bits(column_sum(c, chunks));
            var hi_bits = 0u;
            if c + 1u < params.cols {
                hi_bits = f32_to_f16_bits(column_sum(c + 1u, chunks));
                y_wide[c + 1u] = unpack2x16float(hi_bits).x;
            }
            atomicStore(&y[w], lo_bits | (hi_bits << 16u));
            y_wide[c] = unpack2x16float(lo_bits).x;
        }
    } else if w < params.cols {
        atomicStore(&y[w], bitcast<u32>(column_sum(w, chunks)));
    }
}
