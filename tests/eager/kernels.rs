//! The kernels of `tests/eager/ops.toml`: the same composition on Flex and on `CubeBackend`
//! (`rms_norm`: burn-route's kernel). Included by `tests/integration/eager_forms.rs` and
//! `benches/backends.rs`, next to a module `eager` that includes the generated code.

use burn_route::rt::backend::{Scalar, Shape, TensorMetadata, get_or_init_device_settings};
use burn_route::rt::{Backend, BoolTensor, CubeBackend, DeviceOf, Flex, FloatTensor, IntTensor};

use super::eager::ops::EagerForms;

#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn forms<B: Backend>(
    x: FloatTensor<B>,
    b: &FloatTensor<B>,
    opt: Option<FloatTensor<B>>,
    bopt: Option<&FloatTensor<B>>,
    xs: Vec<FloatTensor<B>>,
    mask: BoolTensor<B>,
    k: f32,
    sizes: &[usize],
) -> (
    FloatTensor<B>,
    (IntTensor<B>, Option<BoolTensor<B>>),
    Vec<FloatTensor<B>>,
    usize,
) {
    let settings = get_or_init_device_settings::<B>(&x.device());
    let pieces = burn_route::composite::split_last::<B>(x.clone(), sizes.to_vec());
    let count = pieces.len();
    let mut sum = B::float_add(x, b.clone());
    let has_opt = opt.is_some();
    for t in opt.into_iter().chain(bopt.cloned()).chain(xs) {
        sum = B::float_add(sum, t);
    }
    let above = B::float_greater_elem(sum.clone(), Scalar::from(k), settings.bool_dtype);
    let above = B::bool_into_int(above, settings.int_dtype);
    (sum, (above, has_opt.then_some(mask)), pieces, count)
}

fn filled<B: Backend>(n: usize, value: f32, device: &DeviceOf<B>) -> FloatTensor<B> {
    let dtype = get_or_init_device_settings::<B>(device).float_dtype;
    B::float_full(Shape::new([n]), Scalar::from(value), device, dtype)
}

fn total<B: Backend>(x: &FloatTensor<B>) -> f32 {
    let flat = B::float_reshape(x.clone(), Shape::new([x.shape().num_elements()]));
    let data = burn_route::rt::backend::read_sync(B::float_into_data(B::float_sum(flat)))
        .expect("a sum to read");
    data.convert::<f32>().try_to_vec::<f32>().expect("f32")[0]
}

macro_rules! kernels {
    ($backend:ty) => {
        impl EagerForms for $backend {
            fn forms(
                x: FloatTensor<Self>,
                b: &FloatTensor<Self>,
                opt: Option<FloatTensor<Self>>,
                bopt: Option<&FloatTensor<Self>>,
                xs: Vec<FloatTensor<Self>>,
                mask: BoolTensor<Self>,
                k: f32,
                sizes: &[usize],
            ) -> (
                FloatTensor<Self>,
                (IntTensor<Self>, Option<BoolTensor<Self>>),
                Vec<FloatTensor<Self>>,
                usize,
            ) {
                forms::<Self>(x, b, opt, bopt, xs, mask, k, sizes)
            }
            fn filled(n: usize, value: f32, device: &DeviceOf<Self>) -> FloatTensor<Self> {
                filled::<Self>(n, value, device)
            }
            fn total(x: &FloatTensor<Self>) -> f32 {
                total::<Self>(x)
            }
            fn rms_norm(
                x: FloatTensor<Self>,
                weight: FloatTensor<Self>,
                eps: f32,
            ) -> FloatTensor<Self> {
                <Self as burn_route::RoutedOps>::rms_norm(x, weight, eps)
            }
        }
    };
}

kernels!(Flex);
kernels!(CubeBackend);
