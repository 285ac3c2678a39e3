//! `Device::spmm_cuda_pointers`, the product on another framework's CUDA memory, refuses what
//! it can check before touching any pointer: a device without CUDA, and misaligned buffers.
//! (Its products on real PyTorch tensors, streams and CUDA graphs are tested from Python on
//! the GPU machine: python/tests/test_torch.py.)

#![cfg(feature = "cuda")]
use macko::interop::{CudaPointers, CUDA_POINTER_ALIGN};
use macko::{DenseMatrix, Device, Error, Precision};

fn pointers(x: u64, y: u64) -> CudaPointers {
    CudaPointers {
        x,
        y,
        batch: 1,
        y_precision: Precision::F32,
        stream: 0,
    }
}

#[test]
fn products_on_framework_pointers_refuse_what_they_can_check() {
    let dev = Device::new(macko::BackendKind::Cpu).expect("the CPU device always opens");
    let a = dev
        .upload(&DenseMatrix::zeros(4, 8).expect("a shape"))
        .expect("upload");
    let aligned = CUDA_POINTER_ALIGN * 1024;
    // SAFETY: every call here is refused before a pointer is used.
    let not_cuda = unsafe { dev.spmm_cuda_pointers(&a, &pointers(aligned, aligned * 2)) };
    match not_cuda {
        Err(Error::Backend { message, .. }) => {
            assert!(message.contains("cuda device"), "{message}")
        }
        other => panic!("a CPU device must refuse CUDA pointers, got {other:?}"),
    }
    for (x, y) in [(aligned + 2, aligned), (aligned, aligned + 8)] {
        let misaligned = unsafe { dev.spmm_cuda_pointers(&a, &pointers(x, y)) };
        match misaligned {
            Err(Error::Backend { message, .. }) => {
                assert!(message.contains("aligned"), "{message}")
            }
            other => panic!("a misaligned pointer must be refused, got {other:?}"),
        }
    }
}
