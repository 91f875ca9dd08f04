//! `leaky_relu` on the GPU: a CubeCL kernel for `CubeBackend`, on every cubecl runtime (wgpu,
//! CUDA, ...). With fusion on (`Cube` is then `Fusion<CubeBackend>`), the generated `Fusion<B>`
//! implementation queues one operation that runs this kernel, which the output's declared
//! `shape` and `dtype` make possible; nothing here knows about fusion.

use burn_route_runtime::rt::backend::{DType, TensorMetadata};
use burn_route_runtime::rt::cube::ops::numeric::empty_device_contiguous_dtype;
use burn_route_runtime::rt::{CubeBackend, CubeTensor, FloatTensor};
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

use crate::ops::MyOps;

/// `out[i] = x[i]` where `x[i] > 0`, else `slope * x[i]`; one unit per element.
#[cube(launch_unchecked)]
fn leaky_relu_kernel(x: &[f32], out: &mut [f32], slope: f32, len: u32) {
    let i = ABSOLUTE_POS;
    if i >= len as usize {
        terminate!();
    }
    let v = x[i];
    out[i] = select(v > 0.0, v, slope * v);
}

impl MyOps for CubeBackend {
    fn leaky_relu(x: FloatTensor<Self>, slope: f32) -> FloatTensor<Self> {
        let len = x.meta.num_elements();
        // The kernel reads a contiguous `f32` buffer; anything else takes the composition.
        let Ok(units) = u32::try_from(len) else {
            return super::composed::<Self>(x, slope);
        };
        if x.dtype != DType::F32 || !x.is_contiguous() || len == 0 {
            return super::composed::<Self>(x, slope);
        }
        let out: CubeTensor = empty_device_contiguous_dtype(
            x.client.clone(),
            x.device.clone(),
            x.shape(),
            DType::F32,
        );
        let dim = CubeDim::new(&x.client, len);
        let count = calculate_cube_count_elemwise(&x.client, len, dim);
        // SAFETY: both buffers hold `len` `f32`s and the kernel writes index `i < len` only.
        unsafe {
            leaky_relu_kernel::launch_unchecked(
                &x.client,
                count,
                dim,
                x.clone().into_buffer_arg(),
                out.clone().into_buffer_arg(),
                slope,
                units,
            );
        }
        out
    }
}
