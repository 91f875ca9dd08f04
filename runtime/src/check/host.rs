//! Host copies of tensors (`Host`, `HostLeaf`): reading outputs back, uploading inputs, and
//! comparing leaves within a tolerance.

use super::*;

/// The elements of a tensor on the host.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Data {
    Float(Vec<f32>),
    Int(Vec<i64>),
    Bool(Vec<bool>),
}

/// A tensor on the host.
#[derive(Clone, Debug)]
pub(super) struct Host {
    pub(super) shape: Vec<usize>,
    pub(super) data: Data,
}

/// An output tensor, flattened out of the [`Value`]s.
pub(super) struct Leaf {
    pub(super) name: String,
    pub(super) kind: TensorKind,
    pub(super) tensor: Option<DispatchTensor>,
    /// For the variant of an enum output ([`Value::Variant`]), which holds no tensor.
    pub(super) variant: Option<&'static str>,
}

/// A [`Leaf`] read back to the host.
#[derive(Debug)]
pub(super) struct HostLeaf {
    pub(super) name: String,
    pub(super) kind: TensorKind,
    /// The dtype the op returned it in (`None` for an absent tensor or a variant).
    pub(super) dtype: Option<DType>,
    pub(super) value: Option<Host>,
    pub(super) variant: Option<&'static str>,
}

pub(super) fn flatten(values: Vec<Value>) -> Vec<Leaf> {
    let mut leaves = Vec::new();
    for (position, value) in values.into_iter().enumerate() {
        match value {
            Value::Tensor(kind, tensor) => leaves.push(Leaf {
                name: format!("output {position}"),
                kind,
                tensor: Some(tensor),
                variant: None,
            }),
            Value::Optional(kind, tensor) => leaves.push(Leaf {
                name: format!("output {position}"),
                kind,
                tensor,
                variant: None,
            }),
            Value::Tensors(kind, tensors) => {
                leaves.extend(tensors.into_iter().enumerate().map(|(i, tensor)| Leaf {
                    name: format!("output {position}[{i}]"),
                    kind,
                    tensor: Some(tensor),
                    variant: None,
                }));
            }
            Value::Plain => {}
            // A variant is a leaf without a tensor (its kind is never read).
            Value::Variant(name) => leaves.push(Leaf {
                name: format!("output {position}"),
                kind: TensorKind::Bool,
                tensor: None,
                variant: Some(name),
            }),
        }
    }
    leaves
}

pub(super) fn read_leaf(leaf: Leaf) -> Result<HostLeaf, String> {
    let dtype = leaf.tensor.as_ref().map(DispatchTensor::dtype);
    let value = match leaf.tensor {
        None => None,
        Some(tensor) => Some(read(tensor, leaf.kind).map_err(|e| format!("{}: {e}", leaf.name))?),
    };
    Ok(HostLeaf {
        name: leaf.name,
        kind: leaf.kind,
        dtype,
        value,
        variant: leaf.variant,
    })
}

/// Reads a tensor of `kind` back to the host.
pub(super) fn read(tensor: DispatchTensor, kind: TensorKind) -> Result<Host, String> {
    let dtype = tensor.dtype();
    let fits = match kind {
        TensorKind::Float => dtype.is_float(),
        TensorKind::Int => dtype.is_int() || dtype.is_uint(),
        TensorKind::Bool => dtype.is_bool(),
        TensorKind::Quantized => {
            return Err(format!(
                "it is a quantized tensor (dtype {dtype:?}), which the op check does not read \
                 back; dequantize it and return it as `Value::float`"
            ));
        }
    };
    if !fits {
        return Err(format!(
            "returned as a {kind} tensor (`Value::{kind}`), it holds dtype {dtype:?}; wrap it \
             with the `Value` constructor of its kind"
        ));
    }
    let data = match kind {
        TensorKind::Float => read_sync(Dispatch::float_into_data(tensor)),
        TensorKind::Int => read_sync(Dispatch::int_into_data(tensor)),
        TensorKind::Bool => read_sync(Dispatch::bool_into_data(tensor)),
        TensorKind::Quantized => unreachable!("refused above"),
    }
    .map_err(|err| format!("reading it failed: {err:?}"))?;
    let shape = data.shape().as_slice().to_vec();
    let bad = |err| format!("converting its data failed: {err:?}");
    let data = match kind {
        TensorKind::Float => Data::Float(data.try_into_vec_as::<f32>().map_err(bad)?),
        TensorKind::Int => Data::Int(data.try_into_vec_as::<i64>().map_err(bad)?),
        TensorKind::Bool if data.dtype() == DType::Bool(BoolStore::Native) => {
            Data::Bool(data.try_into_vec::<bool>().map_err(bad)?)
        }
        TensorKind::Bool => Data::Bool(
            data.try_into_vec_as::<i64>()
                .map_err(bad)?
                .into_iter()
                .map(|v| v != 0)
                .collect(),
        ),
        TensorKind::Quantized => unreachable!("refused above"),
    };
    Ok(Host { shape, data })
}

/// A host tensor on `device`, in the device's default dtype of its kind (`float_dtype` for a
/// float one, when given).
pub(super) fn upload(
    host: &Host,
    device: &Device,
    float_dtype: Option<FloatDType>,
) -> DispatchTensor {
    let dispatch = device.as_dispatch();
    let settings = get_or_init_device_settings::<Dispatch>(dispatch);
    let shape = host.shape.clone();
    match &host.data {
        Data::Float(v) => Dispatch::float_from_data(
            TensorData::new(v.clone(), shape)
                .convert_dtype(float_dtype.unwrap_or(settings.float_dtype).into()),
            dispatch,
        ),
        Data::Int(v) => Dispatch::int_from_data(
            TensorData::new(v.clone(), shape).convert_dtype(settings.int_dtype.into()),
            dispatch,
        ),
        Data::Bool(v) => Dispatch::bool_from_data(
            TensorData::new(v.clone(), shape).convert_dtype(settings.bool_dtype.into()),
            dispatch,
        ),
    }
}

/// Element `flat` of `shape` as an index, `[1, 2]`.
pub(super) fn index_of(flat: usize, shape: &[usize]) -> String {
    let mut rest = flat;
    let mut index = vec![0; shape.len()];
    for (i, &dim) in shape.iter().enumerate().rev() {
        if dim > 0 {
            index[i] = rest % dim;
            rest /= dim;
        }
    }
    format!("{index:?}")
}

/// Compares float elements: `Err` with the worst element (by difference over allowance) and
/// how many are out of tolerance.
pub(super) fn compare_floats(
    actual: &[f32],
    expected: &[f32],
    shape: &[usize],
    tol: f64,
) -> Result<(), String> {
    let mut worst: Option<(usize, f64)> = None;
    let mut failing = 0;
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let (a, e) = (f64::from(a), f64::from(e));
        if a == e || (a.is_nan() && e.is_nan()) {
            continue;
        }
        let allowed = tol * (1.0 + e.abs());
        let diff = (a - e).abs();
        // NaN against a number, or infinities that differ: infinitely wrong.
        let ratio = if diff.is_finite() {
            diff / allowed
        } else {
            f64::INFINITY
        };
        if ratio > 1.0 {
            failing += 1;
            if worst.is_none_or(|(_, r)| ratio > r) {
                worst = Some((i, ratio));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, _)) => {
            let (a, e) = (actual[i], expected[i]);
            let diff = (f64::from(a) - f64::from(e)).abs();
            let allowed = tol * (1.0 + f64::from(e).abs());
            Err(format!(
                "worst element {i} (index {}): got {a}, expected {e} (difference {diff:.3e}, \
                 allowed {allowed:.3e} = {tol} * (1 + |expected|)); {failing} of {} elements are \
                 out of tolerance",
                index_of(i, shape),
                actual.len()
            ))
        }
    }
}

/// Compares int or bool elements exactly: `Err` with the worst element (the largest difference;
/// the first mismatch for bools).
pub(super) fn compare_exact<T: PartialEq + Copy + fmt::Debug>(
    actual: &[T],
    expected: &[T],
    shape: &[usize],
    distance: impl Fn(T, T) -> u128,
) -> Result<(), String> {
    let mut worst: Option<(usize, u128)> = None;
    let mut failing = 0;
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        if a != e {
            failing += 1;
            let d = distance(a, e);
            if worst.is_none_or(|(_, w)| d > w) {
                worst = Some((i, d));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, _)) => Err(format!(
            "worst element {i} (index {}): got {:?}, expected {:?} (exact comparison); {failing} \
             of {} elements differ",
            index_of(i, shape),
            actual[i],
            expected[i],
            actual.len()
        )),
    }
}

/// How two lists of leaves differ: the first leaf that does, and whether it is float values
/// (which a looser tolerance could pass) rather than structure, shapes or exact values.
pub(super) struct Mismatch {
    pub(super) detail: String,
    pub(super) rounding: bool,
}

impl From<String> for Mismatch {
    fn from(detail: String) -> Self {
        Self {
            detail,
            rounding: false,
        }
    }
}

impl Mismatch {
    /// `fix`, and the tolerance to loosen when the difference may be rounding.
    pub(super) fn fix(&self, fix: &str, knob: &str, tol: f64) -> String {
        if self.rounding {
            format!("{fix}, or loosen {knob} (now {tol}) if the difference is rounding")
        } else {
            fix.to_owned()
        }
    }
}

/// Compares two lists of read leaves; `Err` names the first leaf that differs.
pub(super) fn compare_leaves(
    actual: &[HostLeaf],
    expected: &[HostLeaf],
    tol: f64,
) -> Result<(), Mismatch> {
    if actual.len() != expected.len() {
        let names = |leaves: &[HostLeaf]| {
            leaves
                .iter()
                .map(|l| match l.variant {
                    Some(v) => format!("{} (variant `{v}`)", l.name),
                    None => format!("{} ({})", l.name, l.kind),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(format!(
            "got {} output leaves [{}], expected {} [{}]",
            actual.len(),
            names(actual),
            expected.len(),
            names(expected)
        )
        .into());
    }
    for (a, e) in actual.iter().zip(expected) {
        let name = &e.name;
        match (a.variant, e.variant) {
            (None, None) => {}
            (Some(x), Some(y)) if x == y => continue,
            (x, y) => {
                let shown = |v: Option<&str>| {
                    v.map_or_else(|| "a tensor".to_owned(), |v| format!("variant `{v}`"))
                };
                return Err(format!("{name} is {}, expected {}", shown(x), shown(y)).into());
            }
        }
        if a.kind != e.kind {
            return Err(format!(
                "{name} is a {} tensor, expected a {} tensor",
                a.kind, e.kind
            )
            .into());
        }
        let (a, e) = match (&a.value, &e.value) {
            (None, None) => continue,
            (Some(_), None) => {
                return Err(format!("{name} is present, expected absent (None)").into());
            }
            (None, Some(_)) => {
                return Err(format!("{name} is absent (None), expected present").into());
            }
            (Some(a), Some(e)) => (a, e),
        };
        if a.shape != e.shape {
            return Err(format!("{name} has shape {:?}, expected {:?}", a.shape, e.shape).into());
        }
        let result = match (&a.data, &e.data) {
            (Data::Float(x), Data::Float(y)) => compare_floats(x, y, &e.shape, tol),
            (Data::Int(x), Data::Int(y)) => compare_exact(x, y, &e.shape, |p, q| {
                (i128::from(p) - i128::from(q)).unsigned_abs()
            }),
            (Data::Bool(x), Data::Bool(y)) => compare_exact(x, y, &e.shape, |_, _| 1),
            _ => unreachable!("leaves of one kind hold data of that kind"),
        };
        result.map_err(|detail| Mismatch {
            detail: format!("{name} differs: {detail}"),
            rounding: matches!(e.data, Data::Float(_)),
        })?;
    }
    Ok(())
}
