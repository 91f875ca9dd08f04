//! Which wgpu adapter the Cube tests and benches run on: `BURN_ROUTE_WGPU_ADAPTER` is `cpu` (the
//! default: a CPU adapter, lavapipe in CI), `gpu` (the first discrete GPU), `integrated` (the
//! first integrated GPU) or `default` (wgpu's own choice, which `CUBECL_WGPU_DEFAULT_DEVICE`
//! overrides). `scripts/gpu-check` sets `gpu`. Anything else is a panic naming the variable: a
//! misspelt adapter must not quietly test lavapipe instead of the GPU.

/// The variable that names the adapter.
pub const VARIABLE: &str = "BURN_ROUTE_WGPU_ADAPTER";

/// The adapters [`VARIABLE`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adapter {
    Cpu,
    DiscreteGpu,
    IntegratedGpu,
    Default,
}

/// The adapter [`VARIABLE`] asks for.
pub fn adapter() -> Adapter {
    match std::env::var(VARIABLE).as_deref() {
        Err(_) | Ok("" | "cpu") => Adapter::Cpu,
        Ok("gpu") => Adapter::DiscreteGpu,
        Ok("integrated") => Adapter::IntegratedGpu,
        Ok("default") => Adapter::Default,
        Ok(other) => panic!(
            "{VARIABLE}={other:?}: expected `cpu` (the default), `gpu`, `integrated` or `default`"
        ),
    }
}

/// The adapter as the `DeviceKind` of `Device::wgpu`.
#[allow(dead_code)] // (not every binary that includes this file builds a `Device`)
pub fn device_kind() -> burn_tensor::DeviceKind {
    use burn_tensor::DeviceKind;
    match adapter() {
        Adapter::Cpu => DeviceKind::Cpu,
        Adapter::DiscreteGpu => DeviceKind::DiscreteGpu(0),
        Adapter::IntegratedGpu => DeviceKind::IntegratedGpu(0),
        Adapter::Default => DeviceKind::DefaultDevice,
    }
}

/// The adapter as cubecl's `WgpuDeviceKind`, for a `CubeDevice` built directly.
#[cfg(feature = "wgpu")]
#[allow(dead_code)] // (not every binary that includes this file builds a `CubeDevice`)
pub fn wgpu_device_kind() -> burn_cubecl::cubecl::wgpu::WgpuDeviceKind {
    use burn_cubecl::cubecl::wgpu::WgpuDeviceKind;
    match adapter() {
        Adapter::Cpu => WgpuDeviceKind::Cpu,
        Adapter::DiscreteGpu => WgpuDeviceKind::DiscreteGpu(0),
        Adapter::IntegratedGpu => WgpuDeviceKind::IntegratedGpu(0),
        Adapter::Default => WgpuDeviceKind::DefaultDevice,
    }
}
