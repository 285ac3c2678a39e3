// CSR SpMV without subgroup operations (common.wgsl is prepended). See shaders/README.md.
//
// One row per workgroup of 64 invocations striding over its entries; tree sum in workgroup
// memory.

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<u32>;
@group(0) @binding(3) var<storage, read> col_idx: array<u32>;

const WORKGROUP: u32 = 64u;

var<workgroup> partial: array<f32, WORKGROUP>;

fn term(i: u32) -> f32 {
    let bits = csr_value_bits(i);
    let c = select(0u, col_idx[i], (bits & 0x7fffu) != 0u);
    let xv = load_x(c);
    return select(0.0, unpack2x16float(bits).x * xv, csr_live(bits, xv));
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let row = wid.x + wid.y * nwg.x;
    if row >= params.rows {
        return;
    }
    let s = row_ptr[row];
    let e = row_ptr[row + 1u];
    var acc = 0.0;
    var i = s + t;
    loop {
        if i + WORKGROUP >= e {
            break;
        }
        acc += term(i) + term(i + WORKGROUP);
        i += 2u * WORKGROUP;
    }
    if i < e {
        acc += term(i);
    }
    partial[t] = acc;
    workgroupBarrier();
    for (var half = WORKGROUP / 2u; half > 0u; half /= 2u) {
        if t < half {
            partial[t] += partial[t + half];
        }
        workgroupBarrier();
    }
    if t == 0u {
        store_y(params.row_offset + row, partial[0]);
    }
}
